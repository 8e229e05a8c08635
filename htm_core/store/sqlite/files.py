"""The SQLite database file itself: created private, checked writable, found before reading."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from ...errors import DatabaseCorruptError, DatabaseUnavailableError, ValidationError
from ._errors import sqlite_error

__all__ = ["CommitCounter", "backup_database", "commits_file", "count_commit", "create_private",
           "existing_database_file", "lost_commits", "refuse_schemeless_server", "writable"]

#: ``host:port/...``: a server address whose scheme was left out (``user:pw@host`` is
#: refused by ``check_address``).
_SCHEMELESS_SERVER = re.compile(r"^[\w.-]+:\d+(?:/.*)?$")


def refuse_schemeless_server(value: str) -> None:
    """Refuse a database value that reads as a server address without ``postgresql://``
    (taken as a path it would silently create a SQLite store in a folder named after it)."""
    if "://" not in value and _SCHEMELESS_SERVER.match(value):
        raise ValidationError(
            f"database {value!r} looks like a server address without a scheme; for "
            f"PostgreSQL write 'postgresql://{value}', for a SQLite file whose name has a "
            f"colon write './{value}'")


def commits_file(database: str | Path) -> Path:
    """The file beside a SQLite database that counts its write transactions."""
    return Path(f"{database}-commits")


def count_commit(conn: Any) -> int:
    """Count the write transaction of ``conn`` (a SQLAlchemy connection) in ``htm_meta``
    (``commit_count``); return its number."""
    row = conn.exec_driver_sql(
        "INSERT INTO htm_meta(key, value) VALUES ('commit_count', '1') ON CONFLICT(key) "
        "DO UPDATE SET value = CAST(value AS INTEGER) + 1 RETURNING value").first()
    return int(row[0]) if row is not None else 0


def lost_commits(database: str | Path, conn: Any) -> int:
    """How many write transactions ``<database>-commits`` counts beyond those the database
    (read through the sqlite3 connection ``conn``) holds: those a lost ``-wal`` took."""
    try:
        recorded = int(commits_file(database).read_bytes().strip() or b"0")
    except (OSError, ValueError):
        return 0
    row = conn.execute("SELECT value FROM htm_meta WHERE key = 'commit_count'").fetchone()
    held = int(row[0]) if row is not None and str(row[0]).isdigit() else 0
    return recorded - held


class CommitCounter:
    """``<db>-commits``: the number of the last write transaction committed, written after
    each commit to a file a lost ``-wal`` does not take with it (see :func:`lost_commits`).
    Not flushed to disk (nor is the commit: synchronous=NORMAL); with several writers it
    can only say fewer than were made, never more."""

    def __init__(self, database: str | None) -> None:
        self._path = None if database is None else commits_file(database)
        self._fd: int | None = None
        self._pid = 0

    def record(self, count: int) -> None:
        if not count or self._path is None:
            return
        try:
            if self._fd is None or self._pid != os.getpid():
                self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                self._pid = os.getpid()
            os.pwrite(self._fd, f"{count:020d}\n".encode(), 0)
        except OSError:
            pass  # only the detection of a lost -wal is weakened

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None and self._pid == os.getpid():
            with contextlib.suppress(OSError):
                os.close(fd)


def create_private(path: Path) -> None:
    """Create a new database file readable and writable by its owner only (0600).

    SQLite gives the ``-wal`` and ``-shm`` files it creates beside it the same mode. An
    existing file keeps the mode it has.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError:
        return  # SQLite reports why the file cannot be opened, with htm's wording
    os.close(fd)


def writable(path: Path) -> bool:
    """Whether SQLite can write ``path``: the file, and its folder (for ``-wal``/``-shm``)
    unless both already exist and are writable."""
    if not os.access(path, os.W_OK):
        return False
    if os.access(path.parent, os.W_OK):
        return True
    sidecars = [Path(f"{path}-wal"), Path(f"{path}-shm")]
    return all(p.exists() and os.access(p, os.W_OK) for p in sidecars)


def existing_database_file(database: str | Path | None) -> Path:
    """The SQLite file ``database`` names, which must already exist as an htm database.

    For commands that only read a store (``htm export``, the source of ``htm copy``):
    nothing is created, and a missing file, a folder, a file that is not SQLite and a
    SQLite file without htm's tables are each refused with a message naming the path.
    """
    from .engine import default_sqlite_path, sqlite_url

    if database is None:
        path = default_sqlite_path()
    else:
        url = sqlite_url(database)
        if url in ("sqlite://", "sqlite:///:memory:"):
            raise ValidationError("an in-memory database (:memory:) starts empty; give the path "
                                  "or URL of the database to read from")
        path = Path(url.split("///", 1)[-1].split("?", 1)[0])
    if not path.exists():
        raise DatabaseUnavailableError(
            f"no database at {path}: the file does not exist (a relative path is read from "
            f"{Path.cwd()}); check the path or --db; nothing was created")
    if not path.is_file():
        raise DatabaseUnavailableError(f"{path} is not a database file (it is a folder?); "
                                       "check the path")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise sqlite_error(exc, str(path), "opening") from exc
    if "htm_meta" not in tables or "memories" not in tables:
        raise DatabaseUnavailableError(
            f"{path} is an SQLite file but not an htm database (it has no htm tables); "
            "check the path")
    return path


def backup_database(database: str | Path | None, target: str | Path) -> int:
    """Copy the SQLite store ``database`` to the file ``target`` as one consistent
    snapshot, also while other processes write it; return how many memories it holds.

    SQLite's online backup API reads the database with its ``-wal`` file (the commits not
    yet checkpointed into the main file), so the copy holds every committed memory, which
    copying the ``.db`` file alone does not. The copy is written to a new file beside
    ``target`` (0600), checked (``PRAGMA quick_check``), flushed to disk and only then
    renamed over ``target``: a backup that fails leaves an earlier one as it was.
    """
    source = existing_database_file(database)
    path = Path(target).expanduser()
    if path.resolve() == source.resolve():
        raise ValidationError(f"the backup {path} would overwrite the database itself; "
                              "give another file")
    if not path.parent.is_dir():
        raise ValidationError(f"cannot write {path}: the folder {path.parent} does not exist")
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        count = _copy_online(source, tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return count


def _copy_online(source: Path, copy: Path) -> int:
    """SQLite's backup of ``source`` into ``copy``, checked; the copy's memory count."""
    try:
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            dst = sqlite3.connect(copy)
            try:
                src.backup(dst)
                dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
                problems = [r[0] for r in dst.execute("PRAGMA quick_check")]
                count = int(dst.execute("SELECT count(*) FROM memories").fetchone()[0])
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.Error as exc:
        raise sqlite_error(exc, str(source), "backing up") from exc
    if problems != ["ok"]:
        raise DatabaseCorruptError(
            f"the backup of {source} does not pass SQLite's check ({problems[0]}); the "
            "database is damaged: run `htm check`")
    return count
