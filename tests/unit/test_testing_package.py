"""``htm_core.testing`` without pytest: the in-memory store imports, the suite names what
to install (checked in a fresh interpreter with pytest blocked)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
sys.modules["pytest"] = None
import htm_core.testing as testing
store = testing.InMemoryStore()
store.ensure_robot("r1")
print(type(store).__name__)
try:
    testing.StoreConformance
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_the_in_memory_store_needs_no_pytest_and_the_suite_says_what_to_install() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == "InMemoryStore"
    assert out[1].startswith("MissingDependencyError pytest (for the conformance suite)")
    assert 'pip install -e ".[dev]"' in out[1]
