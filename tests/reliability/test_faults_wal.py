"""The write-ahead log: what losing it costs, and a backup that never loses it.

In WAL mode a commit lands in ``<db>-wal`` first and reaches the ``.db`` file at the next
checkpoint. A process holding the store open keeps recent commits there, so copying only the
``.db`` file of a live store (or losing its ``-wal``) loses acknowledged adds, and nothing in
the ``.db`` file can tell. ``htm backup`` copies through SQLite's online backup API, which
reads the WAL too: the copy holds every add acknowledged before it started, also while a
writer goes on.
"""

from __future__ import annotations

import io
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.cli import main
from htm_core.store.sqlite.files import backup_database


def _keys(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {r[0] for r in conn.execute("SELECT key FROM memories")}


def _live_store_with_commits_in_its_wal(db: Path) -> HTM:
    htm = HTM(database_url=str(db), embedder=HashingEmbedder(), working_memory_tokens=50)
    htm.store.engine.dispose()
    conn = htm.store.database.reader()  # the store's own connections: no automatic checkpoint
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    for i in range(30):
        htm.add_many([{"content": f"memory {i}-{j} about cats", "key": f"k{i}-{j}"}
                      for j in range(10)])
    return htm


def test_copying_only_the_db_file_of_a_live_store_loses_acknowledged_adds(
        tmp_path: Path) -> None:
    """The hazard the docs warn of (not a bug htm can fix from inside the ``.db`` file)."""
    db = tmp_path / "htm.db"
    htm = _live_store_with_commits_in_its_wal(db)
    try:
        assert (tmp_path / "htm.db-wal").stat().st_size > 0
        shutil.copy(db, tmp_path / "copy.db")
        assert len(_keys(tmp_path / "copy.db")) < 300
    finally:
        htm.close()


def test_htm_backup_of_a_live_store_holds_every_acknowledged_add(tmp_path: Path) -> None:
    db = tmp_path / "htm.db"
    htm = _live_store_with_commits_in_its_wal(db)
    try:
        out, err = io.StringIO(), io.StringIO()
        assert main(["--db", str(db), "--embedder", "hashing", "backup",
                     str(tmp_path / "backup.db")], stdout=out, stderr=err) == 0, err.getvalue()
        assert "backed up 300 memories" in out.getvalue()
        assert len(_keys(tmp_path / "backup.db")) == 300
        assert not (tmp_path / "backup.db-wal").exists()  # one self-contained file
    finally:
        htm.close()
    with HTM(database_url=str(tmp_path / "backup.db"), embedder=HashingEmbedder()) as copy:
        assert copy.retrieve("k29-9") is not None


def test_a_backup_taken_while_a_writer_goes_on_is_consistent(tmp_path: Path) -> None:
    db = tmp_path / "htm.db"
    acked: list[str] = []
    stop = threading.Event()
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        htm.add("seed", key="seed")

        def write() -> None:
            i = 0
            while not stop.is_set():
                htm.add(f"live memory {i}", key=f"live{i}")
                acked.append(f"live{i}")
                i += 1

        writer = threading.Thread(target=write)
        writer.start()
        try:
            while len(acked) < 20:
                stop.wait(0.01)
            before = set(acked)
            count = backup_database(db, tmp_path / "backup.db")
        finally:
            stop.set()
            writer.join()
    keys = _keys(tmp_path / "backup.db")
    assert before <= keys and keys <= set(acked) | {"seed"} and count == len(keys)


@pytest.mark.parametrize("target", ["same", "no-folder"])
def test_a_backup_that_cannot_be_written_leaves_nothing(tmp_path: Path, target: str) -> None:
    db = tmp_path / "htm.db"
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        htm.add("one memory", key="k")
    path = db if target == "same" else tmp_path / "missing" / "b.db"
    out, err = io.StringIO(), io.StringIO()
    assert main(["--db", str(db), "backup", str(path)], stdout=out, stderr=err) == 1
    assert all(p.name.startswith("htm.db") for p in tmp_path.iterdir())
    assert _keys(db) == {"k"}


def test_a_lost_wal_is_detected_on_open_and_by_check(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The store's files as a crash leaves them when the ``-wal`` is then lost (the ``.db``
    and the ``-commits`` counter beside it, taken while the writer had commits in its WAL).
    Before: the open said nothing and ``htm check`` said ok, with adds missing."""
    import logging

    db = tmp_path / "htm.db"
    htm = _live_store_with_commits_in_its_wal(db)
    lost_dir = tmp_path / "lost"
    lost_dir.mkdir()
    try:
        shutil.copy(db, lost_dir / "htm.db")
        shutil.copy(tmp_path / "htm.db-commits", lost_dir / "htm.db-commits")
    finally:
        htm.close()
    missing = 300 - len(_keys(lost_dir / "htm.db"))
    assert missing > 0
    out, err = io.StringIO(), io.StringIO()
    assert main(["--db", str(lost_dir / "htm.db"), "check"], stdout=out, stderr=err) == 1
    assert "write transactions acknowledged on this store are not in it" in out.getvalue()
    caplog.set_level(logging.WARNING)
    with HTM(database_url=str(lost_dir / "htm.db"), embedder=HashingEmbedder()) as again:
        assert "lacks the last" in caplog.text and "-wal file was lost" in caplog.text
        again.add("written after the loss", key="after")
    out = io.StringIO()
    assert main(["--db", str(lost_dir / "htm.db"), "check"], stdout=out, stderr=err) == 1
    assert "are not in it" in out.getvalue()  # noted for good, not forgotten by the next write


def test_a_store_closed_and_reopened_reports_no_loss(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    db = tmp_path / "htm.db"
    _live_store_with_commits_in_its_wal(db).close()
    caplog.set_level(logging.WARNING)
    for _ in range(2):
        with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
            htm.add("one more", key=f"more{len(caplog.records)}")
    assert "lacks the last" not in caplog.text
    out, err = io.StringIO(), io.StringIO()
    assert main(["--db", str(db), "check"], stdout=out, stderr=err) == 0, out.getvalue()
    backup_database(db, tmp_path / "b.db")
    assert main(["--db", str(tmp_path / "b.db"), "check"], stdout=out, stderr=err) == 0
