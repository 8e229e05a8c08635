"""The shape the project keeps: short functions and shallow classes.

A function does one job and reads in one sitting (at most :data:`FUNCTION_LINES` lines,
docstring included), in the packages and the benchmark scripts alike; a class composes
parts instead of stacking them (at most :data:`CLASS_DEPTH` of the project's own classes
above it; protocols, which only declare what a part offers, do not count). The
allow-lists name what is over today, with its size now: an entry may only shrink, and one
that fits the budget must leave the list.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Protocol

import pytest

from .budgets import over

ROOT = Path(__file__).resolve().parents[2]
#: The kinds of test, one folder each (docs/architecture.md, "Tests").
TEST_FOLDERS = {"unit", "contract", "integration", "reliability", "docs", "ui"}
PACKAGES = ("htm_core", "htm_integrations")
#: Folders held to the function budget too, though not packages of the library.
SCRIPTS = ("benchmarks",)
FUNCTION_LINES = 60
CLASS_DEPTH = 3

#: Functions over the budget today, with their length now.
LONG_FUNCTIONS: dict[str, int] = {}

#: Classes stacked deeper than the budget today, with their depth now.
DEEP_CLASSES: dict[str, int] = {}


def function_lengths() -> dict[str, int]:
    """Every function and method of the packages and scripts, ``path::Qualified.name`` ->
    lines."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out[f"{path}::{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                walk(child, path, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, path, prefix + child.name + ".")

    for folder in PACKAGES + SCRIPTS:
        for file in sorted((ROOT / folder).rglob("*.py")):
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


def test_functions_stay_short() -> None:
    lengths = function_lengths()
    assert len(lengths) > 500, "the walk found too few functions"
    assert any(name.startswith("benchmarks") for name in lengths), "the walk missed the scripts"
    assert over(lengths, FUNCTION_LINES, LONG_FUNCTIONS) == {}


def test_classes_stay_shallow() -> None:
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    depths = class_depths()
    assert "htm_core.htm.HTM" in depths
    assert over(depths, CLASS_DEPTH, DEEP_CLASSES) == {}


def test_the_budget_check_sees_growth() -> None:
    assert over({"f": 61}, 60, {}) == {"f": "61 (allowed 60)"}
    assert over({"f": 61}, 60, {}, advice="split it") == {"f": "61 (allowed 60): split it"}
    assert over({"f": 70}, 60, {"f": 65}) == {"f": "70 (allowed 65)"}
    assert "lower" in over({"f": 62}, 60, {"f": 65})["f"]
    assert "remove" in over({"f": 40}, 60, {"f": 65})["f"]


def test_tests_live_in_their_kind_of_folder() -> None:
    """A test file sits in the folder of its kind, never at the top of ``tests/``."""
    tests = ROOT / "tests"
    top = sorted(p.name for p in tests.glob("test_*.py"))
    assert top == [], f"move {top} into one of {sorted(TEST_FOLDERS)}"
    folders = {p.parent.relative_to(tests).parts[0] for p in tests.rglob("test_*.py")}
    assert folders <= TEST_FOLDERS, folders - TEST_FOLDERS
