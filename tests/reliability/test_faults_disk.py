"""Fault injection on the medium (#25 items 1, 2): read-only files, full disks.

Real faults where the machine allows them: a read-only medium is a tmpfs remounted ``ro``
(as root, ``chmod`` does not stop writes), a full disk is a small tmpfs filled to the last
byte. Both need ``mount`` (root in a container that allows it); without it those cases are
skipped and the ``chmod`` case runs instead (it needs a non-root user). A full *database*
is also simulated everywhere with SQLite's ``PRAGMA max_page_count`` (SQLite then fails the
write with the same "database or disk is full" error a full disk gives).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from sqlalchemy import event

from htm_core import HTM, HashingEmbedder
from htm_core.errors import DiskFullError, ReadOnlyError
from htm_core.store import open_store
from htm_core.transfer import export_jsonl

N = 50


def _mount(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True)
    return done.returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)  # lazy: never left behind


def _populate(db: Path) -> None:
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        htm.add_many([{"content": f"memory {i} about cats and dogs", "key": f"k{i}"}
                      for i in range(N)])


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    if not _mount(mnt, "3m"):
        pytest.skip("cannot mount a tmpfs here (needs root and a container that allows mount)")
    try:
        yield mnt
    finally:
        _umount(mnt)


def _fill(folder: Path) -> None:
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def _reads_work(htm: HTM) -> None:
    assert len(htm.recall("cats", limit=5)) == 5
    assert len(htm.recall("dogs", limit=5)) == 5
    assert htm.retrieve("k1") is not None
    assert htm.create_context().tokens > 0


def _one_warning(caplog: pytest.LogCaptureFixture, text: str) -> None:
    assert sum(text in r.getMessage() for r in caplog.records) == 1, caplog.text


# -- read-only ----------------------------------------------------------------------------


def test_explicit_read_only_reads_skip_statistics_and_refuse_writes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "htm.db"
    _populate(db)
    before = db.read_bytes()
    caplog.set_level(logging.WARNING)
    with HTM(database_url=str(db), embedder=HashingEmbedder(), read_only=True) as htm:
        _reads_work(htm)
        _one_warning(caplog, "are not saved")
        with pytest.raises(ReadOnlyError, match="read-only"):
            htm.add("a new memory")
        with pytest.raises(ReadOnlyError):
            htm.forget("k1", confirm=True)
        assert export_jsonl(htm.store, tmp_path / "out.jsonl") == N
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        assert htm.store.get("k1").access_count == 0  # nothing was written by the reads
        assert htm.store.counts("").total == N
    assert len(db.read_bytes()) == len(before)


def test_a_read_only_medium_opens_read_only_with_a_warning(
        small_fs: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Before the fix ``HTM()`` could not open the file at all."""
    db = small_fs / "htm.db"
    _populate(db)
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    caplog.set_level(logging.WARNING)
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        _one_warning(caplog, "opened it read-only")
        _reads_work(htm)
        with pytest.raises(ReadOnlyError, match="cannot be written"):
            htm.add("a new memory")
        assert export_jsonl(htm.store, small_fs.parent / "out.jsonl") == N


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod; the tmpfs case "
                                               "covers read-only media as root")
def test_a_read_only_file_opens_read_only(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "htm.db"
    _populate(db)
    db.chmod(0o444)
    folder.chmod(0o555)
    try:
        with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
            _reads_work(htm)
            with pytest.raises(ReadOnlyError):
                htm.add("a new memory")
    finally:
        folder.chmod(0o755)


# -- full disk ----------------------------------------------------------------------------


def test_a_full_disk_opens_read_only_and_reads_work(
        small_fs: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Before the fix opening failed (SQLite cannot create its -shm file on a full disk)."""
    db = small_fs / "htm.db"
    _populate(db)
    _fill(small_fs)
    caplog.set_level(logging.WARNING)
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        _reads_work(htm)
        with pytest.raises(ReadOnlyError, match="disk is full"):
            htm.add_many([f"new {i}" for i in range(10)])
    (small_fs / "filler").unlink()
    store = open_store(db)
    try:
        assert store.counts("").total == N
    finally:
        store.close()


def test_a_disk_that_fills_while_open_keeps_reads_working(
        small_fs: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Opened writable, then the disk fills: recall's statistics are skipped (one warning),
    an add fails with DiskFullError and writes nothing."""
    db = small_fs / "htm.db"
    _populate(db)
    caplog.set_level(logging.WARNING)
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        _fill(small_fs)
        _reads_work(htm)
        assert len(htm.recall("memory", limit=10)) == 10
        total = htm.store.counts("").total
        with pytest.raises(DiskFullError, match="nothing was written"):
            htm.add_many([f"a long new memory {i} " + "lorem ipsum " * 200 for i in range(100)])
        assert htm.store.counts("").total == total == N


def _limit_pages(store, pages: int) -> None:  # type: ignore[no-untyped-def]
    @event.listens_for(store.engine, "connect")
    def _cap(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_conn.execute(f"PRAGMA max_page_count = {pages}")

    store.engine.dispose()


def test_a_full_database_is_disk_full_and_writes_nothing(tmp_path: Path) -> None:
    """Simulated with ``PRAGMA max_page_count`` (no mount needed): the batch is refused as a
    whole with DiskFullError, reads and recall keep working, and after the limit is lifted
    the same batch goes in."""
    db = tmp_path / "htm.db"
    _populate(db)
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        pages = htm.store.engine.connect().exec_driver_sql("PRAGMA page_count").scalar()
        _limit_pages(htm.store, int(pages) + 2)
        batch = [{"content": f"a long memory {i} " + "lorem ipsum " * 100, "key": f"new{i}"}
                 for i in range(100)]
        with pytest.raises(DiskFullError, match="nothing was written"):
            htm.add_many(batch)
        assert htm.store.counts("").total == N
        assert all(htm.store.get(f"new{i}") is None for i in range(100))
        _reads_work(htm)
        _limit_pages(htm.store, 1_000_000)
        assert len(htm.add_many(batch)) == 100
        assert htm.store.counts("").total == N + 100


# -- an error never hides a commit --------------------------------------------------------


@pytest.mark.parametrize("landed", [True, False], ids=["commit-landed", "commit-failed"])
def test_an_error_from_commit_never_hides_a_written_batch(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, landed: bool) -> None:
    """SQLite can fail ``COMMIT`` with a full-disk or I/O error *after* the commit record
    reached the WAL (growing the WAL index failed): the issue's add_many that raised "database
    or disk is full" yet had committed its 100 rows. That moment cannot be staged reliably on
    a real disk, so the driver's commit is wrapped (a simulation, the only one in this file):
    it really commits, or really rolls back, and then raises the error SQLite gives. The
    store must report success exactly when the rows are in the database."""
    import sqlite3

    db = tmp_path / "htm.db"
    _populate(db)
    caplog.set_level(logging.WARNING)
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        dialect = htm.store.engine.dialect
        real_commit, real_rollback = dialect.do_commit, dialect.do_rollback

        def failing_commit(dbapi_conn) -> None:  # type: ignore[no-untyped-def]
            (real_commit if landed else real_rollback)(dbapi_conn)
            raise sqlite3.OperationalError("database or disk is full")

        dialect.do_commit = failing_commit  # type: ignore[method-assign]
        batch = [{"content": f"batch memory {i}", "key": f"b{i}"} for i in range(100)]
        try:
            if landed:
                assert len(htm.add_many(batch)) == 100
                assert "counts as written" in caplog.text
            else:
                with pytest.raises(DiskFullError, match="nothing was written"):
                    htm.add_many(batch)
        finally:
            dialect.do_commit = real_commit  # type: ignore[method-assign]
        present = sum(htm.store.get(f"b{i}") is not None for i in range(100))
        assert present == (100 if landed else 0)
        assert htm.store.counts("").total == N + present


# -- a failed batch wrote nothing, on a disk that fills at every byte count ---------------


class _MemoEmbedder(HashingEmbedder):
    """The hashing embedder with its vectors kept, so that the many trials below do not
    spend their time embedding the same batch again."""

    memo: ClassVar[dict[str, list[float]]] = {}

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        missing = [t for t in texts if t not in self.memo]
        self.memo.update(zip(missing, super().embed_documents(missing), strict=True))
        return [self.memo[t] for t in texts]


_LONG_BATCH = [{"content": f"a long new memory {i} " + "lorem ipsum " * 200, "key": f"n{i}"}
               for i in range(100)]


def _batch_on_a_full_disk(root: Path, free_kib: int) -> tuple[int, str | None]:
    """Add the long batch (its memories get search windows, written after the batch) on a
    fresh tmpfs filled to leave ``free_kib``; return how many of its rows are stored and the
    error ``add_many`` raised (None when it returned)."""
    mnt = root / f"fs-{uuid.uuid4().hex[:6]}"
    assert _mount(mnt, "6m")
    try:
        db = mnt / "htm.db"
        with HTM(database_url=str(db), embedder=_MemoEmbedder()) as htm:
            htm.add_many([{"content": f"memory {i} about cats", "key": f"k{i}"}
                          for i in range(N)])
            stat = os.statvfs(mnt)
            with open(mnt / "filler", "wb") as filler:
                filler.write(b"x" * max(0, stat.f_bavail * stat.f_frsize - free_kib * 1024))
            try:
                htm.add_many(_LONG_BATCH)
                error = None
            except DiskFullError as exc:
                error = str(exc)
        (mnt / "filler").unlink()
        store = open_store(db)
        try:
            return sum(store.get(f"n{i}") is not None for i in range(100)), error
        finally:
            store.close()
    finally:
        _umount(mnt)


def test_a_batch_that_fails_on_a_full_disk_wrote_nothing(small_fs: Path) -> None:
    """Real full disks, one fresh tmpfs per trial: the smallest free space at which the
    batch's rows land is found by bisection, then every KiB above it is tried. Each batch
    that raised must have stored none of its 100 rows; each that returned, all of them.
    Before the fix, for 8 KiB above that point the batch committed and then its search
    windows (a second transaction) met the full disk: ``DiskFullError "...; nothing was
    written"`` with all 100 rows stored."""
    low, high = 0, 2048
    assert _batch_on_a_full_disk(small_fs.parent, high)[0] == 100
    while high - low > 1:
        mid = (low + high) // 2
        if _batch_on_a_full_disk(small_fs.parent, mid)[0]:
            high = mid
        else:
            low = mid
    failed_rows = {}
    for free_kib in range(low, high + 16):
        rows, error = _batch_on_a_full_disk(small_fs.parent, free_kib)
        if error is not None:
            failed_rows[free_kib] = rows
            assert "nothing was written" in error
        else:
            assert rows == 100, (free_kib, rows)
    assert failed_rows and set(failed_rows.values()) == {0}, failed_rows
