"""The one place where PostgreSQL's driver errors become htm's errors, with one wording.

``_run`` and ``_read`` (every transaction and read of the store), ``migrate`` and
``bulk_load`` map through :func:`postgres_error`; the SQLSTATE decides: an unreachable
server or an exhausted pool is a :class:`~htm_core.errors.DatabaseUnavailableError`; a
vector of another dimension a :class:`~htm_core.errors.DimensionMismatchError`; a lock,
a full disk, a read-only server or a damaged table a :class:`~htm_core.errors.StoreError`
that says what to do, worded like the SQLite store's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from ...errors import (
    DatabaseCorruptError,
    DatabaseUnavailableError,
    DimensionMismatchError,
    DiskFullError,
    ReadOnlyError,
    StoreError,
)
from ...secrets import mask_text

__all__ = ["map_postgres_errors", "postgres_error", "sqlstate"]


def sqlstate(exc: DBAPIError) -> str | None:
    """The SQLSTATE of the driver error under ``exc``, if it has one."""
    code = getattr(exc.orig, "sqlstate", None)
    return code if isinstance(code, str) else None


def postgres_error(exc: DBAPIError | PoolTimeoutError, url: str, what: str) -> StoreError:
    """The htm error for ``exc`` met while ``what`` on the database at ``url``."""
    if isinstance(exc, PoolTimeoutError):
        return DatabaseUnavailableError(
            f"no free connection to {url} ({what}) within pool_timeout: {exc}; raise "
            "pool_size / max_overflow / pool_timeout of PostgresStore, or check for "
            "long-running work holding connections")
    code = sqlstate(exc) or ""
    message = mask_text(str(exc.orig).strip())
    lost = isinstance(exc, (OperationalError, InterfaceError)) and not code
    if code == "53100":
        return DiskFullError(
            f"PostgreSQL {what} failed on {url}: {message}; nothing was written; free disk "
            "space on the volume that holds the database and retry")
    if lost or code.startswith(("08", "57P", "53")):
        return DatabaseUnavailableError(
            f"cannot reach PostgreSQL at {url} ({what}): {message}; check the server "
            "is running and accepts connections from this host, and that the host, port, "
            "database, user and password in the URL are right")
    if code == "22000" and "dimension" in message:
        return DimensionMismatchError(
            f"{message}; this store holds vectors of another dimension: use the store's "
            "embedder or re-embed the store (HTM.reembed())")
    if code == "55P03":
        return StoreError(f"PostgreSQL database {url} stayed locked by another transaction "
                          f"({what}): {message}; retry, or look for long-running transactions")
    if code == "25006":
        return ReadOnlyError(f"PostgreSQL {what} failed on {url}: {message}; the server is "
                          "read-only (a standby?): connect to the primary")
    if code.startswith("XX"):
        return DatabaseCorruptError(
            f"PostgreSQL {what} failed on {url}: {message}; the database is damaged: restore "
            "it from a backup (`htm import` of an export)")
    return StoreError(f"PostgreSQL {what} failed on {url}: {message}")


@contextmanager
def map_postgres_errors(url: str, what: str) -> Iterator[None]:
    """Turn a driver or pool error raised inside the block into :func:`postgres_error`'s."""
    try:
        yield
    except (DBAPIError, PoolTimeoutError) as exc:
        raise postgres_error(exc, url, what) from exc
