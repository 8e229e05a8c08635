"""Every docstring example in ``htm_core`` and ``htm_integrations`` runs in the suite.

Each module of both packages (found on disk, so a new module is covered without listing
it) is imported and its examples run with :mod:`doctest`. A module whose optional
dependency is not installed (an adapter without its framework) is skipped, named in the
skip reason; any other import error fails. A docstring whose examples import a package
that is not installed (``langchain_core`` for the fake chat models of the enrichment
examples) is left out, and the module's test is reported as skipped, naming it, after the
rest of its examples have run. The examples need no network and no server:
they use ``database_url=":memory:"`` and the hashing embedder.

A second check counts the ``>>>`` lines of each file against the examples doctest
actually found there, so an example hidden where doctest does not look (a nested
function, a plain string) fails instead of silently never running.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from htm_core.errors import MissingDependencyError

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
    except MissingDependencyError as exc:
        pytest.skip(f"{name}: {exc}")
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


def _missing_packages(test: doctest.DocTest) -> set[str]:
    """The packages ``test``'s examples import that are not installed (optional extras)."""
    wanted = set()
    for example in test.examples:
        try:
            tree = ast.parse(example.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                wanted.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                wanted.add(node.module.split(".")[0])
    return {package for package in wanted if importlib.util.find_spec(package) is None}


def test_an_example_needing_a_missing_package_is_recognised() -> None:
    source = ">>> from not_installed_xyz.sub import thing\n>>> import htm_core\n"
    test = doctest.DocTestParser().get_doctest(source, {}, "example", None, 0)
    assert _missing_packages(test) == {"not_installed_xyz"}


class _Runner(doctest.DocTestRunner):
    """Runs examples; a docstring whose example raises htm's ``MissingDependencyError`` (an
    optional extra htm imports lazily, such as ``langchain-ollama``) counts as skipped from
    there on, instead of failing with every example after it."""

    def __init__(self) -> None:
        super().__init__(optionflags=doctest.ELLIPSIS)
        self.missing: dict[str, str] = {}
        self.real_failures = 0

    def report_failure(self, out: Any, test: doctest.DocTest, example: doctest.Example,
                       got: str) -> None:
        if test.name not in self.missing:
            self.real_failures += 1
            super().report_failure(out, test, example, got)

    def report_unexpected_exception(self, out: Any, test: doctest.DocTest,
                                    example: doctest.Example, exc_info: Any) -> None:
        if test.name in self.missing:
            return
        if isinstance(exc_info[1], MissingDependencyError):
            self.missing[test.name] = str(exc_info[1])
            return
        self.real_failures += 1
        super().report_unexpected_exception(out, test, example, exc_info)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = _import(name)
    runner = _Runner()
    skipped: dict[str, str] = {}
    for test in _tests(module):
        missing = _missing_packages(test)
        if missing:
            skipped[test.name] = f"needs {sorted(missing)}"
            continue
        runner.run(test)
    assert runner.real_failures == 0, f"{runner.real_failures} docstring example(s) failed in {name}"
    skipped.update(runner.missing)
    if skipped:
        pytest.skip("not run, for want of optional packages: "
                    + "; ".join(f"{test}: {why}" for test, why in skipped.items()))


@pytest.mark.parametrize("name", MODULES)
def test_every_example_line_is_collected(name: str) -> None:
    module = _import(name)
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    written = len(PROMPT.findall(source))
    found = sum(len(test.examples) for test in _tests(module))
    assert found == written, (
        f"{name} has {written} '>>>' lines but doctest finds {found} examples; "
        "move the hidden ones into a module, class or function docstring")

