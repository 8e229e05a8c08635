"""The shape the project keeps: short functions and shallow classes.

A function does one job and reads in one sitting (at most :data:`FUNCTION_LINES` lines,
docstring included); a class composes parts instead of stacking them (at most
:data:`CLASS_DEPTH` of the project's own classes above it; protocols, which only declare
what a part offers, do not count). The allow-lists name what is over today, with its size
now: an entry may only shrink, and one that fits the budget must leave the list.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Protocol

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The kinds of test, one folder each (docs/architecture.md, "Tests").
TEST_FOLDERS = {"unit", "contract", "integration", "reliability", "docs", "ui"}
PACKAGES = ("htm_core", "htm_integrations")
FUNCTION_LINES = 60
CLASS_DEPTH = 3

#: Functions over the budget today, with their length now.
LONG_FUNCTIONS = {
    "htm_core/cli_args.py::build_parser": 109,
    "htm_core/demo.py::_tour": 87,
    "htm_core/enrich/kinds.py::enrichment_handlers": 65,
    "htm_core/store/sqlite/_engine.py::_SQLiteEngine._write": 62,
    "htm_core/store/sqlite/_writer.py::_SQLiteWriter._add_many": 104,
    "htm_core/working/memory.py::WorkingMemory._put": 78,
    "htm_integrations/langchain/tools.py::htm_tools": 78,
    "htm_integrations/llama_index/tools.py::htm_tools": 61,
    "htm_integrations/mcp/server.py::build_server": 198,
}

#: Classes stacked deeper than the budget today, with their depth now.
DEEP_CLASSES = {
    "htm_core.store._sql.versions.SQLVersions": 4,
    "htm_core.store.sqlite._engine._SQLiteEngine": 4,
    "htm_core.store.sqlite._history._SQLiteHistory": 10,
    "htm_core.store.sqlite._records._SQLiteRecords": 5,
    "htm_core.store.sqlite._search._SQLiteSearch": 7,
    "htm_core.store.sqlite._windows._SQLiteWindows": 11,
    "htm_core.store.sqlite._working.SQLiteWorkingSet": 6,
    "htm_core.store.sqlite._writer._SQLiteWriter": 8,
    "htm_core.store.sqlite.store.SQLiteStore": 12,
}


def function_lengths() -> dict[str, int]:
    """Every function and method of the packages, ``path::Qualified.name`` -> lines."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out[f"{path}::{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                walk(child, path, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, path, prefix + child.name + ".")

    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            walk(ast.parse(file.read_text(encoding="utf-8")), str(file.relative_to(ROOT)), "")
    return out


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False)) or cls is Protocol


def class_depths() -> dict[str, int]:
    """Every class the packages define -> how many of the project's classes stand above it."""
    depths: dict[str, int] = {}
    for package in PACKAGES:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for cls in vars(module).values():
                if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                    continue
                own = [base for base in cls.__mro__[1:]
                       if base.__module__.split(".")[0] in PACKAGES and not _is_protocol(base)]
                depths[f"{cls.__module__}.{cls.__qualname__}"] = len(own)
    return depths


def _over(sizes: dict[str, int], budget: int, allowed: dict[str, int]) -> dict[str, str]:
    problems: dict[str, str] = {}
    for name, size in sizes.items():
        if size > allowed.get(name, budget):
            problems[name] = f"{size} (allowed {allowed.get(name, budget)})"
    for name, size in allowed.items():
        now = sizes.get(name)
        if now is None or now <= budget:
            problems[name] = "fits the budget now (or is gone): remove it from the allow-list"
        elif now < size:
            problems[name] = f"shrank to {now}: lower its allow-list entry"
    return problems


def test_functions_stay_short() -> None:
    lengths = function_lengths()
    assert len(lengths) > 500, "the walk found too few functions"
    assert _over(lengths, FUNCTION_LINES, LONG_FUNCTIONS) == {}


def test_classes_stay_shallow() -> None:
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    depths = class_depths()
    assert "htm_core.htm.HTM" in depths
    assert _over(depths, CLASS_DEPTH, DEEP_CLASSES) == {}


def test_the_budget_check_sees_growth() -> None:
    assert _over({"f": 61}, 60, {}) == {"f": "61 (allowed 60)"}
    assert _over({"f": 70}, 60, {"f": 65}) == {"f": "70 (allowed 65)"}
    assert "lower" in _over({"f": 62}, 60, {"f": 65})["f"]
    assert "remove" in _over({"f": 40}, 60, {"f": 65})["f"]


def test_tests_live_in_their_kind_of_folder() -> None:
    """A test file sits in the folder of its kind, never at the top of ``tests/``."""
    tests = ROOT / "tests"
    top = sorted(p.name for p in tests.glob("test_*.py"))
    assert top == [], f"move {top} into one of {sorted(TEST_FOLDERS)}"
    folders = {p.parent.relative_to(tests).parts[0] for p in tests.rglob("test_*.py")}
    assert folders <= TEST_FOLDERS, folders - TEST_FOLDERS
