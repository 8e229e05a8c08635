"""Docs as tests: the site builds in strict mode, and the pages keep up with the code.

- ``mkdocs build --strict`` succeeds (broken internal links, bad nav entries, docstrings
  the API reference cannot render all fail it);
- every ``htm`` subcommand and global option is documented in ``docs/cli.md``;
- every ``HTM_*`` environment variable the code reads is documented in
  ``docs/configuration.md``;
- links from the published pages to repository files outside ``docs/`` point at files
  that exist (mkdocs cannot check those).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from htm_core.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    return re.findall(r"^\s+- [^:\n]+:\s+(\S+\.md)\s*$", text, flags=re.M)


def test_mkdocs_builds_in_strict_mode(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(site)], capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    for anchor in ("htm_core.HTM", "htm_core.transfer.copy_store", "htm_core.errors.HTMError",
                   "htm_integrations.langchain.retriever.HTMRetriever"):
        assert f'id="{anchor}"' in api, anchor
    # doctests in docstrings are rendered as code, not as block quotes
    assert '<span class="gp">&gt;&gt;&gt; </span>' in api
    assert (site / "cli" / "index.html").exists()


def test_nav_pages_exist() -> None:
    pages = _nav_pages()
    assert {"index.md", "cli.md", "api.md", "concepts.md", "configuration.md",
            "getting-started.md"} <= set(pages)
    assert [p for p in pages if not (DOCS / p).exists()] == []


def test_every_cli_subcommand_is_documented() -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^## htm (\w+)\s*$", text, flags=re.M))
    assert sorted(set(commands) - headings) == [], "document these in docs/cli.md"
    assert sorted(headings - set(commands)) == [], "docs/cli.md documents unknown commands"
    for option in ("--db", "--robot", "--embedder", "--working-memory-tokens", "--progress"):
        assert f"`{option}" in text, option


def test_every_environment_variable_is_documented() -> None:
    used: set[str] = set()
    for package in ("htm_core", "htm_integrations"):
        for path in (ROOT / package).rglob("*.py"):
            used |= set(re.findall(r"\bHTM_[A-Z][A-Z_]*[A-Z]\b", path.read_text(encoding="utf-8")))
    used -= {"HTM_TEST_DATABASE_URL"}
    documented = set(re.findall(r"`(HTM_[A-Z_]+)`",
                                (DOCS / "configuration.md").read_text(encoding="utf-8")))
    assert sorted(used - documented) == [], "document these in docs/configuration.md"


@pytest.mark.parametrize("page", _nav_pages())
def test_links_to_repository_files_resolve(page: str) -> None:
    path = DOCS / page
    if not path.exists():
        pytest.fail(f"{page} is in the nav but missing")
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        resolved = (path.parent / target.split("#", 1)[0]).resolve()
        if DOCS in resolved.parents or resolved == DOCS:
            continue  # mkdocs --strict checks links inside docs/
        assert resolved.exists(), f"{page} links to {target}, which does not exist"
