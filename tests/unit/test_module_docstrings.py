"""Module docstrings say what the module is for and link to docs/ for the long explanation.

Every module docstring of ``htm_core`` and ``htm_integrations`` is at most
:data:`DOCSTRING_LINES` lines (counted as written, closing quotes excluded). The allow-list
names what is over today, with its length now: an entry may only shrink, and one that fits
the budget must leave the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("htm_core", "htm_integrations")
DOCSTRING_LINES = 10

#: Module docstrings over the budget today, with their length now.
LONG_DOCSTRINGS = {
    "htm_core/store/_address.py": 17,
    "htm_core/store/_sql/versions.py": 16,
    "htm_core/store/ann.py": 33,
    "htm_core/store/postgres/__init__.py": 52,
    "htm_core/store/sqlite/__init__.py": 16,
}


def docstring_lengths() -> dict[str, int]:
    """Every module of the packages that has a docstring, ``path`` -> its lines."""
    out: dict[str, int] = {}
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            doc = ast.get_docstring(ast.parse(file.read_text(encoding="utf-8")), clean=False)
            if doc is not None:
                out[file.relative_to(ROOT).as_posix()] = len(doc.splitlines())
    return out


def _over(sizes: dict[str, int], budget: int, allowed: dict[str, int]) -> dict[str, str]:
    problems: dict[str, str] = {}
    for name, size in sizes.items():
        if size > allowed.get(name, budget):
            problems[name] = f"{size} lines (allowed {allowed.get(name, budget)}): link to docs/ instead"
    for name, size in allowed.items():
        now = sizes.get(name)
        if now is None or now <= budget:
            problems[name] = "fits the budget now (or is gone): remove it from the allow-list"
        elif now < size:
            problems[name] = f"shrank to {now}: lower its allow-list entry"
    return problems


def test_module_docstrings_stay_short() -> None:
    lengths = docstring_lengths()
    assert len(lengths) > 100, "the walk found too few modules"
    assert "htm_core/htm.py" in lengths
    assert _over(lengths, DOCSTRING_LINES, LONG_DOCSTRINGS) == {}


def test_the_budget_check_sees_growth() -> None:
    assert _over({"m.py": 11}, 10, {}) == {"m.py": "11 lines (allowed 10): link to docs/ instead"}
    assert _over({"m.py": 20}, 10, {"m.py": 15}) == {
        "m.py": "20 lines (allowed 15): link to docs/ instead"}
    assert "lower" in _over({"m.py": 12}, 10, {"m.py": 15})["m.py"]
    assert "remove" in _over({"m.py": 8}, 10, {"m.py": 15})["m.py"]
    assert "remove" in _over({}, 10, {"gone.py": 15})["gone.py"]


def test_the_count_is_of_the_lines_as_written() -> None:
    source = '"""One.\n\nTwo\nthree.\n"""\n'
    assert len((ast.get_docstring(ast.parse(source), clean=False) or "").splitlines()) == 4
