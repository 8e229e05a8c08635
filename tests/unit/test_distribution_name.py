"""Every install hint names the distribution htm is published under, not another package.

The name ``htm`` on PyPI belongs to an unrelated project; htm is published as the name in
``pyproject.toml`` and every ``pip install`` line (error hints, README, docs) must use it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib

from htm_core.errors import DISTRIBUTION, MissingDependencyError, install_hint, missing_extra

ROOT = Path(__file__).resolve().parents[2]


def project_name() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"])


def test_the_hint_constant_is_the_published_name() -> None:
    assert DISTRIBUTION == project_name() != "htm"


def test_missing_extra_names_the_published_distribution() -> None:
    error = missing_extra("mcp", "mcp")
    assert isinstance(error, MissingDependencyError)
    assert f'pip install "{project_name()}[mcp]"' in str(error)
    assert f'pip install "{project_name()}[local]" once' in install_hint("local")


def _documents() -> list[Path]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    paths += sorted((ROOT / "notebooks").glob("*.ipynb"))
    paths += sorted(p for p in (ROOT / "htm_core").rglob("*.py"))
    paths += sorted(p for p in (ROOT / "htm_integrations").rglob("*.py"))
    return paths


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_install_line_names_the_unrelated_htm_package(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    wrong = re.findall(r"""pip install (?:-U )?["'`]?htm(?:\[|["'`\s]|$)""", text, re.MULTILINE)
    wrong += re.findall(r"""["'`(]htm\[[a-z,]+\]""", text)
    assert not wrong, f"{path.name} tells users to install the unrelated 'htm' package: {wrong}"
