"""A database address is what it looks like: a malformed URL is an error naming the problem
(the password never shown, nothing created), and a relative SQLite path is resolved once,
at open, and reported resolved."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from htm_core import HTM, ValidationError
from htm_core.cli import main
from htm_core.store import open_store

MALFORMED = [
    ("postgresql//ana:s3cret@db.example/htm", "'postgresql' must be followed by '://'"),
    ("postgres:/ana:s3cret@db.example/htm", "'postgres' must be followed by '://'"),
    ("postgresql:ana:s3cret@db.example/htm", "'postgresql' must be followed by '://'"),
    ("sqlite//memories.db", "'sqlite' must be followed by '://'"),
    ("ana:s3cret@db.example/htm", "no scheme"),
    ("mysql:/ana:s3cret@db.example/htm", "'mysql:' must be followed by '//'"),
]


@pytest.mark.parametrize(("url", "problem"), MALFORMED)
def test_a_malformed_url_is_refused_and_creates_nothing(
        url: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: ``postgresql//u:p@host/db`` opened a SQLite file in the current directory,
    in folders named after the password."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValidationError) as caught:
        HTM(database_url=url, embedder="hashing")
    message = str(caught.value)
    assert "malformed database URL" in message and problem in message
    assert "s3cret" not in message
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValidationError):
        open_store(url)
    assert list(tmp_path.iterdir()) == []


def test_the_cli_names_a_malformed_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    code = main(["--db", "postgresql//ana:s3cret@db.example/htm", "--embedder", "hashing", "stats"],
                stdout=io.StringIO(), stderr=err)
    assert code == 1
    assert "malformed database URL 'postgresql//***@db.example/htm'" in err.getvalue()
    assert "s3cret" not in err.getvalue()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["postgresql/notes.db", "ana@home.db", "sqlite.db",
                                  "postgres-backup.db"])
def test_paths_that_merely_resemble_urls_are_files(name: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "postgresql").mkdir()
    with HTM(database_url=name, embedder="hashing") as htm:
        htm.add("a fact", key="k")
    assert (tmp_path / name).is_file()


@pytest.mark.parametrize("form", ["{name}", "sqlite:///{name}"])
def test_a_relative_path_is_resolved_at_open_and_reported(
        form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a relative path was kept relative (``stats()`` said ``sqlite:///mem.db``),
    so the same setting named another file from another directory and nothing showed which."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(here)
    with HTM(database_url=form.format(name="mem.db"), embedder="hashing") as htm:
        htm.add("written from here", key="k")
        monkeypatch.chdir(elsewhere)  # the open store keeps its file
        htm.add("still the same file", key="k2")
        assert htm.stats().database == f"sqlite:///{here / 'mem.db'}"
    assert sorted(p.name for p in elsewhere.iterdir()) == []
    out = io.StringIO()
    assert main(["--db", "../here/mem.db", "--embedder", "hashing", "stats"], stdout=out,
                stderr=io.StringIO()) == 0
    assert str(here / "mem.db") in out.getvalue() and "../here" not in out.getvalue()
