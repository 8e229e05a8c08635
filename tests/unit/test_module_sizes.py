"""The shape the project keeps: a module does one job and can be read in one sitting.

Core modules stay under 600 lines and adapter modules under 300 (adapters only translate
between a framework's types and :class:`htm_core.HTM`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _sizes(package: str) -> dict[str, int]:
    return {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted((ROOT / package).rglob("*.py"))}


@pytest.mark.parametrize(("package", "limit"), [("htm_core", 600), ("htm_integrations", 300)])
def test_modules_stay_small(package: str, limit: int) -> None:
    sizes = _sizes(package)
    assert sizes, f"no modules found under {package}"
    assert {name: n for name, n in sizes.items() if n > limit} == {}
