"""Fault injection on backups (#25 item 5, #22 item 6): killed exports, damaged files, missing sources.

Real files and real processes throughout: an export is SIGKILLed half-way in a child
process (it signals when its first batch is written, then the parent kills it); backups are
truncated and altered byte by byte; ``htm copy`` / ``export`` / ``import`` are run on
sources that do not exist or are not htm databases.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from htm_core import HashingEmbedder
from htm_core.cli import main
from htm_core.errors import DatabaseUnavailableError, IncompleteExportError, SchemaError
from htm_core.store import open_store
from htm_core.store.base import LongTermStore, NewMemory
from htm_core.transfer import export_jsonl, import_jsonl, open_source

ROOT = Path(__file__).resolve().parents[2]
N = 300


def _fill(store: LongTermStore, n: int, prefix: str = "m") -> None:
    from datetime import datetime, timezone

    embedder = HashingEmbedder()
    now = datetime(2024, 5, 1, tzinfo=timezone.utc)
    items = [f"{prefix} memory number {i} about topic {i % 7}" for i in range(n)]
    vectors = embedder.embed_documents(items)
    store.add_many([NewMemory(key=f"{prefix}{i}", content=text, robot="r", importance=1.0,
                              token_count=5, created_at=now, embedding=list(vec),
                              embedder=embedder.name, explicit_key=True)
                    for i, (text, vec) in enumerate(zip(items, vectors, strict=True))])


@pytest.fixture
def source(tmp_path: Path) -> Iterator[LongTermStore]:
    store = open_store(tmp_path / "source.db")
    _fill(store, N)
    yield store
    store.close()


@pytest.fixture
def backup(source: LongTermStore, tmp_path: Path) -> Path:
    path = tmp_path / "backup.jsonl"
    assert export_jsonl(source, path, with_embeddings=True) == N
    return path


def _keys(store: LongTermStore) -> set[str]:
    return {m.key for batch in store.iter_memories() for m in batch}


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--embedder", "hashing", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# -- a killed export --------------------------------------------------------------------


_KILLED_EXPORT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from htm_core.store import open_store
    from htm_core.transfer import export_jsonl

    marker = Path(sys.argv[3])
    def stall(done, total):
        marker.write_text(str(done))
        time.sleep(3600)  # killed here, half-way through the export
    export_jsonl(open_store(sys.argv[1]), sys.argv[2], batch_size=50, progress=stall)
""")


def test_a_killed_export_leaves_the_previous_backup_intact(
        source: LongTermStore, backup: Path, tmp_path: Path) -> None:
    """SIGKILL during ``export_jsonl`` to the path of an existing backup: before the fix the
    export truncated the backup in place (10,001 lines down to 16 in the issue)."""
    before = backup.read_bytes()
    _fill(source, 100, prefix="late")  # the next export would differ
    marker = tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _KILLED_EXPORT, str(tmp_path / "source.db"),
                              str(backup), str(marker)], env=env)
    try:
        while not marker.exists():
            assert child.poll() is None, "the exporting child died before its first batch"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert backup.read_bytes() == before
    target = open_store(tmp_path / "restored.db")
    try:
        assert import_jsonl(target, backup).written == N
    finally:
        target.close()
    # the next export to the same path clears the killed one's temporary file
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".htm-tmp")]
    assert len(leftovers) == 1
    assert export_jsonl(source, backup) == N + 100
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".htm-tmp")]


def test_a_failed_export_leaves_no_file_and_the_old_backup(
        source: LongTermStore, backup: Path) -> None:
    before = backup.read_bytes()

    def boom(done: int, total: int | None) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_jsonl(source, backup, batch_size=10, progress=boom)
    assert backup.read_bytes() == before
    assert sorted(p.name for p in backup.parent.iterdir() if "backup" in p.name) == [backup.name]


def test_the_export_header_and_end_line_state_the_count(backup: Path) -> None:
    lines = backup.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["count"] == N
    end = json.loads(lines[-1])
    assert end["format"] == "htm-export-end" and end["count"] == N == len(lines) - 2
    assert len(end["sha256"]) == 64
    assert backup.stat().st_mode & 0o777 == 0o600


# -- damaged backups --------------------------------------------------------------------


def _truncate_mid_line(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _truncate_at_line(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    return b"".join(lines[: len(lines) // 2])


def _drop_end_line(data: bytes) -> bytes:
    return b"".join(data.splitlines(keepends=True)[:-1])


def _drop_a_record(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    return b"".join(lines[:5] + lines[6:])


def _alter_content(data: bytes) -> bytes:
    return data.replace(b"memory number 17 ", b"memory number 71 ", 1)


def _flip_a_byte(data: bytes) -> bytes:
    pos = len(data) // 3
    return data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1:]


def _garbage_at_the_end(data: bytes) -> bytes:
    return data + b'{"key": "extra", "content": "smuggled", "robot": "r", ' \
                  b'"created_at": "2024-05-01T00:00:00+00:00"}\n'


DAMAGES = [_truncate_mid_line, _truncate_at_line, _drop_end_line, _drop_a_record,
           _alter_content, _flip_a_byte, _garbage_at_the_end]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__.strip("_"))
def test_a_damaged_backup_is_refused_before_anything_is_written(
        backup: Path, tmp_path: Path, damage) -> None:
    backup.write_bytes(damage(backup.read_bytes()))
    target = open_store(tmp_path / "target.db")
    try:
        with pytest.raises(IncompleteExportError, match="--partial"):
            import_jsonl(target, backup)
        assert _keys(target) == set()
    finally:
        target.close()


@pytest.mark.parametrize("damage", [_truncate_mid_line, _truncate_at_line, _alter_content],
                         ids=lambda f: f.__name__.strip("_"))
def test_partial_takes_what_a_damaged_backup_holds(backup: Path, tmp_path: Path, damage) -> None:
    data = damage(backup.read_bytes())
    intact = sum(1 for line in data.splitlines()[1:] if line.endswith(b"}")
                 and b"htm-export-end" not in line)
    backup.write_bytes(data)
    target = open_store(tmp_path / "target.db")
    try:
        result = import_jsonl(target, backup, partial=True)
        assert result.written == len(_keys(target)) == intact
        assert result.notes and "not a complete export" in result.notes[0]
    finally:
        target.close()


def test_a_truncated_version_1_backup_is_refused_by_its_header_count(
        backup: Path, tmp_path: Path) -> None:
    """A file written by the previous htm (no end line): the header's count is checked."""
    lines = backup.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header["version"] = 1
    backup.write_text(json.dumps(header) + "\n" + "".join(lines[1:17]), encoding="utf-8")
    target = open_store(tmp_path / "target.db")
    try:
        with pytest.raises(IncompleteExportError, match=f"promises {N} memories but it holds 16"):
            import_jsonl(target, backup)
        assert _keys(target) == set()
    finally:
        target.close()


def test_the_cli_refuses_a_truncated_backup_and_partial_takes_it(
        backup: Path, tmp_path: Path) -> None:
    backup.write_bytes(_truncate_mid_line(backup.read_bytes()))
    db = str(tmp_path / "cli.db")
    code, out, err = _cli("--db", db, "import", str(backup))
    assert code == 1 and "not a complete htm export" in err and "--partial" in err
    assert "Traceback" not in err
    code, out, err = _cli("--db", db, "import", str(backup), "--partial")
    assert code == 0 and "warning" in err and "imported" in out


# -- missing or wrong sources (#22 item 6) ----------------------------------------------


def test_copy_from_a_missing_source_creates_nothing(tmp_path: Path) -> None:
    """Before the fix: an empty memories.db was created, 0 rows copied, "verified", exit 0."""
    missing, target = tmp_path / "memories.db", tmp_path / "target.db"
    code, _out, err = _cli("copy", str(missing), str(target))
    assert code == 1 and "does not exist" in err and str(missing) in err
    assert not missing.exists() and not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_export_from_a_missing_database_creates_nothing(tmp_path: Path) -> None:
    missing, out_file = tmp_path / "nope.db", tmp_path / "backup.jsonl"
    code, _out, err = _cli("--db", str(missing), "export", str(out_file))
    assert code == 1 and "does not exist" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_import_of_a_missing_file_creates_no_database(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    code, _out, err = _cli("--db", str(db), "import", str(tmp_path / "no-such.jsonl"))
    assert code == 1 and "no such file" in err
    assert not db.exists()


@pytest.mark.parametrize("content", [b"", b"not a database at all\n" * 200],
                         ids=["empty-file", "text-file"])
def test_copy_from_a_file_that_is_not_an_htm_database_is_refused(
        tmp_path: Path, content: bytes) -> None:
    src = tmp_path / "notes.db"
    src.write_bytes(content)
    code, _out, err = _cli("copy", str(src), str(tmp_path / "target.db"))
    assert code == 1 and "notes.db" in err and "Traceback" not in err
    assert src.read_bytes() == content
    assert not (tmp_path / "target.db").exists()


def test_copy_from_a_plain_sqlite_file_is_refused(tmp_path: Path) -> None:
    import sqlite3

    src = tmp_path / "other.db"
    with sqlite3.connect(src) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(DatabaseUnavailableError, match="not an htm database"):
        open_source(str(src))
    with pytest.raises(DatabaseUnavailableError, match="does not exist"):
        open_source(str(tmp_path / "missing.db"))


@pytest.mark.postgres
def test_copy_from_an_empty_postgres_database_is_refused(pg_url: str, tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="right database"):
        open_source(pg_url)
    code, _out, _err = _cli("copy", pg_url, str(tmp_path / "target.db"))
    assert code == 1 and not (tmp_path / "target.db").exists()
