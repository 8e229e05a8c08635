"""A store that does not exist is created only by commands that write, or on request.

Before: ``htm --db typo.db stats`` (or ``recall``), and a URL without its scheme
(``localhost:5432/htm``), each created an empty SQLite store and exited 0. ``--read-only``
opens a store for reading only (a full disk, read-only media), for every command and ``htm ui``.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.cli import main
from htm_core.errors import ReadOnlyError, ValidationError


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--embedder", "hashing", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("HTM_DATABASE_URL", "HTM_ROBOT", "HTM_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("argv", [["stats"], ["recall", "cats"], ["context"], ["log"],
                                  ["forget", "k", "--yes"], ["restore", "k"],
                                  ["purge", "--yes"], ["reembed"]], ids=lambda a: a[0])
def test_a_command_that_reads_refuses_a_missing_store_and_creates_nothing(
        tmp_path: Path, argv: list[str]) -> None:
    code, _, err = _cli("--db", "typo.db", *argv)
    assert code == 1
    assert "no database at" in err and "typo.db" in err and "nothing was created" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["localhost:5432/htm", "db.example.com:5432",
                                 "localhost:5432"])
@pytest.mark.parametrize("command", [["stats"], ["add", "hello"]], ids=lambda a: a[0])
def test_a_server_address_without_a_scheme_is_refused(
        tmp_path: Path, url: str, command: list[str]) -> None:
    code, _, err = _cli("--db", url, *command)
    assert code == 1 and "without a scheme" in err and f"postgresql://{url}" in err
    assert list(tmp_path.iterdir()) == []


def test_the_api_refuses_a_server_address_without_a_scheme(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="postgresql://localhost:5432/htm"):
        HTM(database_url="localhost:5432/htm", embedder=HashingEmbedder())
    assert list(tmp_path.iterdir()) == []


def test_commands_that_write_create_the_store_and_create_asks_for_it(tmp_path: Path) -> None:
    assert _cli("--db", "new.db", "add", "hello cats")[0] == 0
    assert (tmp_path / "new.db").is_file()
    assert _cli("--db", "new.db", "stats")[0] == 0
    assert _cli("--db", "made.db", "--create", "stats")[0] == 0
    assert (tmp_path / "made.db").is_file()
    assert _cli("--db", "./host:1/x.db", "--create", "stats")[0] == 0  # a path, said so


def test_read_only_reads_and_refuses_writes(tmp_path: Path) -> None:
    assert _cli("--db", "s.db", "add", "hello cats", "--key", "k1")[0] == 0
    before = (tmp_path / "s.db").stat().st_mtime_ns
    code, out, _ = _cli("--db", "s.db", "--read-only", "recall", "cats")
    assert code == 0 and "hello cats" in out
    code, _, err = _cli("--db", "s.db", "--read-only", "add", "more")
    assert code == 1 and "read-only" in err
    code, _, err = _cli("--db", "s.db", "--read-only", "forget", "k1", "--yes")
    assert code == 1 and "read-only" in err
    assert _cli("--db", "s.db", "recall", "cats")[0] == 0
    assert _cli("--db", "s.db", "--read-only", "log")[0] == 0
    assert (tmp_path / "s.db").stat().st_mtime_ns >= before


def test_ui_takes_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``htm ui --read-only`` hands the server a read-only ``HTM`` (the server itself is not
    started: ``serve`` is replaced by a recorder, the one stand-in here)."""
    import htm_integrations.ui as ui

    assert _cli("--db", "s.db", "add", "hello cats", "--key", "k1")[0] == 0
    seen: list[str] = []

    def serve(htm: HTM, **_: object) -> None:
        with pytest.raises(ReadOnlyError):
            htm.add("written from the ui")
        seen.append(htm.retrieve("k1").content)  # type: ignore[union-attr]

    monkeypatch.setattr(ui, "serve", serve)
    assert _cli("--db", "s.db", "--read-only", "ui")[0] == 0
    assert seen == ["hello cats"]
