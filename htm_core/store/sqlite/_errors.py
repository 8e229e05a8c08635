"""The one place where SQLite's driver errors become htm's errors, with one wording.

Every read and write of the SQLite store runs inside :func:`map_sqlite_errors` (through
``_read`` and ``_write``), so a locked, full, read-only, damaged or unopenable database is
reported the same way whichever method met it, always naming the file and what to do.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError

from ...errors import (
    DatabaseCorruptError,
    DatabaseUnavailableError,
    DiskFullError,
    HTMError,
    ReadOnlyError,
    StoreError,
)

__all__ = ["is_locked", "map_sqlite_errors", "read_error", "sqlite_error"]

#: What the driver raises: sqlite3's own errors (raw cursors) and SQLAlchemy's wrappers.
DRIVER_ERRORS = (sqlite3.Error, DBAPIError)


def _driver_message(exc: BaseException) -> str:
    orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    return str(orig)


def is_locked(exc: BaseException) -> bool:
    """Whether ``exc`` says another connection holds the lock (worth waiting for)."""
    message = _driver_message(exc).lower()
    return "locked" in message or "busy" in message


def sqlite_error(exc: BaseException, url: str, what: str) -> StoreError:
    """The htm error for driver error ``exc`` met while ``what`` on database ``url``."""
    message = _driver_message(exc)
    low = message.lower()
    if is_locked(exc):
        return StoreError(
            f"SQLite database {url} stayed locked by another writer ({what}): {message}; "
            "retry, or give the store a longer busy_timeout_ms")
    if "disk is full" in low or "disk i/o error" in low:
        return DiskFullError(f"SQLite {what} failed on {url}: {message}; nothing was written; "
                             "free disk space on the volume that holds the database (a disk "
                             "I/O error can also be a failing disk) and retry")
    if "readonly" in low or "read-only" in low:
        return ReadOnlyError(f"SQLite {what} failed on {url}: {message}; "
                             f"{_read_only_cause(url)}, or open it with "
                             "HTM(..., read_only=True) to read it")
    if "malformed" in low or "not a database" in low or "corrupt" in low:
        return DatabaseCorruptError(
            f"SQLite {what} failed on {url}: {message}; the file is damaged or not an htm "
            "database: run `htm check` to see what is wrong, then restore it from an export "
            "(`htm import`)")
    if "unable to open" in low:
        return DatabaseUnavailableError(
            f"cannot open SQLite database {url} ({what}): {message}; check the path exists "
            "and is writable")
    return StoreError(f"SQLite {what} failed on {url}: {message}")


def _read_only_cause(url: str) -> str:
    """What to check for a read-only failure on ``url``: the write-ahead log files beside
    the database when they are there and this user cannot write them (a leftover of another
    user's process blocks every write), else the file, its folder and the medium."""
    path = url.removeprefix("sqlite:///")
    if not path or path == url:
        return "the file (or its folder, or the medium) is read-only: check its permissions"
    blocked = [p for p in (f"{path}-wal", f"{path}-shm")
               if os.path.exists(p) and not os.access(p, os.W_OK)]
    if blocked:
        return (f"this user cannot write {' and '.join(blocked)} (the store's write-ahead "
                "log, left by another user's process): make them writable, or remove them "
                "once no process has the store open")
    return "the file (or its folder, or the medium) is read-only: check its permissions"


@contextmanager
def map_sqlite_errors(url: str, what: str) -> Iterator[None]:
    """Turn a driver error raised inside the block into :func:`sqlite_error`'s.

    A stored value that cannot be turned back into a memory (metadata that is not JSON, a
    vector of the wrong length, a time that is not a number: damage written behind htm's
    back) is a :class:`~htm_core.errors.DatabaseCorruptError` too, not a raw ValueError.
    """
    try:
        yield
    except Exception as exc:
        mapped = read_error(exc, url, what)
        if mapped is None:
            raise
        raise mapped from exc


def read_error(exc: BaseException, url: str, what: str) -> StoreError | None:
    """What :func:`map_sqlite_errors` raises for ``exc`` (None: ``exc`` as it is)."""
    if isinstance(exc, DRIVER_ERRORS):
        return sqlite_error(exc, url, what)
    if isinstance(exc, HTMError) or not isinstance(exc, (ValueError, OverflowError, TypeError)):
        return None
    return DatabaseCorruptError(
        f"SQLite {what} on {url} met a stored value it cannot read ({type(exc).__name__}: "
        f"{exc}); the database is damaged: run `htm check` to see what is wrong, then "
        "restore it from an export (`htm import`)")
