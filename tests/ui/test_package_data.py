"""The inspector's templates ship in the wheel: pyproject.toml's package data names every
file of ``htm_integrations/ui`` that is not Python source."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "htm_integrations" / "ui"


def test_every_template_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["htm_integrations"]
    data = [path.relative_to(UI.parent).as_posix() for path in UI.rglob("*")
            if path.is_file() and path.suffix not in {".py", ".pyc"}]
    assert any(name.startswith("ui/templates/") for name in data)
    assert [name for name in data if not any(fnmatch(name, p) for p in patterns)] == []

