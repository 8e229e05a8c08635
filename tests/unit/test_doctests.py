"""Every docstring example in ``htm_core`` and ``htm_integrations`` runs in the suite.

Each module of both packages (found on disk, so a new module is covered without listing
it) is imported and its examples run with :mod:`doctest`. A module whose optional
dependency is not installed (an adapter without its framework) is skipped, named in the
skip reason; any other import error fails. The examples need no network and no server:
they use ``database_url=":memory:"`` and the hashing embedder.

A second check counts the ``>>>`` lines of each file against the examples doctest
actually found there, so an example hidden where doctest does not look (a nested
function, a plain string) fails instead of silently never running.
"""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("htm_core", "htm_integrations")
PROMPT = re.compile(r"^\s*>>>", re.M)


def _module_names() -> list[str]:
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "__main__.py":
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.append(".".join(parts))
    return names


MODULES = _module_names()


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing in PACKAGES or not missing:
            raise
        pytest.skip(f"{name} needs {missing!r}, which is not installed")


def _tests(module: ModuleType) -> list[doctest.DocTest]:
    return doctest.DocTestFinder().find(module, module.__name__)


def test_every_module_is_found() -> None:
    assert "htm_core.htm" in MODULES and "htm_core.store.base" in MODULES
    assert "htm_integrations.langchain.store" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = _import(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in _tests(module):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


@pytest.mark.parametrize("name", MODULES)
def test_every_example_line_is_collected(name: str) -> None:
    module = _import(name)
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    written = len(PROMPT.findall(source))
    found = sum(len(test.examples) for test in _tests(module))
    assert found == written, (
        f"{name} has {written} '>>>' lines but doctest finds {found} examples; "
        "move the hidden ones into a module, class or function docstring")

