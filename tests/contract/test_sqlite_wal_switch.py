"""Opening a SQLite file while another connection writes to it in rollback-journal mode.

Switching a file to WAL takes its exclusive lock, and SQLite answers "database is locked"
at once, without waiting, when another connection holds a write transaction. The store
waits for that writer (up to its busy timeout) instead of failing the open. Several
processes opening one new file together met this race; here one thread holds the lock.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from htm_core.errors import StoreError
from htm_core.store.sqlite import SQLiteStore


def _hold_write_lock(path: Path, seconds: float, held: threading.Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("CREATE TABLE IF NOT EXISTS other (x)")
        held.set()
        threading.Event().wait(seconds)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _open_while_held(path: Path, hold: float, busy_timeout_ms: int) -> SQLiteStore:
    held = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(path, hold, held))
    holder.start()
    try:
        held.wait(5)
        return SQLiteStore(str(path), busy_timeout_ms=busy_timeout_ms)
    finally:
        holder.join()


def test_open_waits_for_a_writer_holding_a_rollback_journal_file(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    store = _open_while_held(path, hold=0.3, busy_timeout_ms=10_000)
    try:
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert {"other", "memories"} <= tables
    finally:
        store.close()


def test_open_gives_up_after_the_busy_timeout(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="locked"):
        _open_while_held(tmp_path / "plain.db", hold=1.0, busy_timeout_ms=100)
