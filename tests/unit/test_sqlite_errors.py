"""SQLite driver errors reach the caller through one mapper: an htm error that names the
database file, what was being done and what to do, the same on every path (SQLAlchemy
statements and the raw cursors of the hot paths alike). Real SQLite files throughout."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

from htm_core.errors import DatabaseCorruptError, StoreError
from htm_core.store.base import NewMemory, SearchFilters
from htm_core.store.sqlite import SQLiteStore

NOW = datetime(2024, 5, 2, tzinfo=timezone.utc)


def _record(key: str) -> NewMemory:
    return NewMemory(key=key, content=f"content of {key}", robot="ada", importance=1.0,
                     token_count=3, created_at=datetime(2024, 5, 1, tzinfo=timezone.utc))


def test_a_locked_database_reads_the_same_on_every_write_path(tmp_path: Path) -> None:
    """Another process's write lock: the add path (raw cursor), a catalogue write
    (SQLAlchemy) and never-forget all say the file is locked and how to wait longer."""
    path = tmp_path / "locked.db"
    store = SQLiteStore(path, busy_timeout_ms=50)
    store.add_many([_record("kept")])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # holds the write lock
    try:
        messages = []
        for attempt in (lambda: store.add_many([_record("new")]),
                        lambda: store.ensure_robot("bob"),
                        lambda: store.forget("kept", robot="ada", at=NOW)):
            with pytest.raises(StoreError) as info:
                attempt()
            messages.append(str(info.value))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    for message in messages:
        assert str(path) in message and "locked" in message and "busy_timeout_ms" in message
    assert store.get("new") is None and store.get("kept") is not None  # nothing half-written
    store.close()


def test_a_damaged_table_reads_the_same_on_raw_and_sqlalchemy_reads(tmp_path: Path) -> None:
    """A read that meets a broken schema names the file and the read, whether it ran
    through SQLAlchemy (``tags``) or the raw cursor of the recall path (``briefs``)."""
    path = tmp_path / "damaged.db"
    store = SQLiteStore(path)
    store.add_many([_record("one")])
    raw = sqlite3.connect(path)
    raw.execute("ALTER TABLE robots RENAME TO robots_gone")
    raw.execute("ALTER TABLE tags RENAME TO tags_gone")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError) as via_sqlalchemy:
        store.tags()
    with pytest.raises(StoreError) as via_cursor:
        store.briefs([1], SearchFilters())
    for info in (via_sqlalchemy, via_cursor):
        assert f"on {store.url}" in str(info.value) and "no such table" in str(info.value)
    assert "listing tags" in str(via_sqlalchemy.value)
    store.close()


def test_a_file_that_is_not_a_database_cannot_be_opened(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are not the pages of an SQLite database" * 200)
    with pytest.raises(DatabaseCorruptError, match="htm check") as info:
        SQLiteStore(path)
    assert str(path) in str(info.value)


def test_a_read_only_failure_names_leftover_log_files_this_user_cannot_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's own read-only error, met on a real file, names the ``-wal``/``-shm`` files
    beside the store that this user cannot write (another user's leftovers block every
    write). The suite runs as root, for whom every file is writable, so ``os.access`` stands
    in for a user without write permission on those two files; everything else is real."""
    import os

    from htm_core.errors import ReadOnlyError
    from htm_core.store.sqlite._errors import sqlite_error

    db = tmp_path / "htm.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.close()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as caught:
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    url = f"sqlite:///{db}"
    plain = sqlite_error(caught.value, url, "adding")
    assert isinstance(plain, ReadOnlyError) and "-wal" not in str(plain)
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"htm.db{suffix}").write_bytes(b"")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: (
        False if str(p).endswith(("-wal", "-shm")) else real_access(p, mode)))
    named = sqlite_error(caught.value, url, "adding")
    assert isinstance(named, ReadOnlyError)
    assert f"{db}-wal and {db}-shm" in str(named) and "remove them" in str(named)
