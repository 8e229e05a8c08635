"""Every missing-extra error gives install commands that work before htm is on PyPI.

The extras are all installed here, so each one's absence is simulated by blocking its modules
(``sys.modules[name] = None``, which Python treats as not installed) in a fresh interpreter
that then does what needs the extra.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from htm_core import errors
from htm_core.errors import DISTRIBUTION, install_hint, missing_extra

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_hint_gives_the_clone_and_the_wheel_commands_beside_the_index_name() -> None:
    assert install_hint("mcp") == (
        'pip install -e ".[mcp]" from the root of a clone of the repository, or '
        f'pip install "dist/htm_memory-{VERSION}-py3-none-any.whl[mcp]" with a wheel built there '
        f'(pip install "{DISTRIBUTION}[mcp]" once {DISTRIBUTION} is published on PyPI)')


def test_the_upgrade_hint_upgrades_in_every_form() -> None:
    hint = install_hint("mcp", upgrade=True)
    assert 'pip install -U -e ".[mcp]"' in hint
    assert f'pip install -U "dist/htm_memory-{VERSION}-py3-none-any.whl[mcp]"' in hint
    assert f'pip install -U "{DISTRIBUTION}[mcp]" once' in hint
    assert hint.count("pip install") == hint.count("pip install -U") == 3


def test_once_published_the_hint_is_the_index_name_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "ON_PYPI", True)
    assert install_hint("ui") == f'pip install "{DISTRIBUTION}[ui]"'
    assert str(missing_extra("uvicorn", "ui")) == (
        f'uvicorn is not installed; install it with: pip install "{DISTRIBUTION}[ui]"')


def test_the_wheel_named_in_the_hint_is_the_one_the_build_makes() -> None:
    """setuptools names the wheel after the distribution with ``-`` as ``_`` and the version."""
    stem = f"{DISTRIBUTION.replace('-', '_')}-{VERSION}"
    assert f'"dist/{stem}-py3-none-any.whl[ann]"' in install_hint("ann")


CASES = [
    ("langchain", ["langchain_core"], "import htm_integrations.langchain.retriever"),
    ("langchain", ["langchain"], "import htm_integrations.langchain.middleware"),
    ("langchain", ["langchain_classic"], "import htm_integrations.langchain.memory"),
    ("langgraph", ["langgraph"], "import htm_integrations.langchain.store"),
    ("llamaindex", ["llama_index"], "import htm_integrations.llama_index"),
    ("mcp", ["mcp"], "import htm_integrations.mcp.server"),
    ("mcp", ["mcp"], "from htm_core.cli import main; main(['--db', ':memory:', 'mcp'])"),
    ("ui", ["starlette", "jinja2", "uvicorn"],
     "from htm_core.cli import main; main(['--db', ':memory:', 'ui'])"),
    ("postgres", ["psycopg"], "import htm_core.store.postgres"),
    ("otel", ["opentelemetry"], "from htm_core.observability import Metrics; Metrics(telemetry=True)"),
    ("ollama", ["langchain_ollama"], "from htm_core.ollama import OllamaEmbedder; OllamaEmbedder()"),
    ("local", ["sentence_transformers"],
     "from htm_core.embeddings import LocalEmbedder; LocalEmbedder()"),
]


@pytest.mark.parametrize(("extra", "blocked", "code"), CASES,
                         ids=[f"{extra}-{blocked[0]}" for extra, blocked, _ in CASES])
def test_a_missing_extra_names_the_commands_that_add_it(extra: str, blocked: list[str],
                                                        code: str) -> None:
    script = (f"import sys\nfor name in {blocked!r}:\n    sys.modules[name] = None\n"
              "from htm_core.errors import MissingDependencyError\n"
              f"try:\n    {code}\nexcept MissingDependencyError as exc:\n    print(exc)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HTM_EMBEDDER": "hashing"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    printed = done.stdout + done.stderr
    assert f"install it with: {install_hint(extra)}" in printed, printed
    assert 'pip install -e ".[' + extra + ']"' in printed
    assert f"htm_memory-{VERSION}-py3-none-any.whl[{extra}]" in printed


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md", "docs/releasing.md"])
def test_the_wheel_the_docs_name_is_the_current_version(page: str) -> None:
    """Every wheel file a page tells users to install is the one a build of this tree makes."""
    named = re.findall(r"htm_memory-(\d[^-\s\"]*)-py3-none-any\.whl", (ROOT / page).read_text())
    assert set(named) <= {VERSION}, f"{page} names {sorted(set(named))}, pyproject.toml {VERSION}"
    if page == "docs/getting-started.md":
        assert named, "getting-started names no wheel to install"
