"""Long-term stores behind the :class:`~htm_core.store.base.LongTermStore` protocol."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import (
    SCHEMA_VERSION,
    AddResult,
    ArmQuery,
    Brief,
    LongTermStore,
    NewMemory,
    SearchFilters,
    StoreCounts,
)

__all__ = [
    "SCHEMA_VERSION",
    "AddResult",
    "ArmQuery",
    "Brief",
    "LongTermStore",
    "NewMemory",
    "SearchFilters",
    "StoreCounts",
    "is_postgres_url",
    "open_store",
]


def __getattr__(name: str) -> Any:
    """``htm_core.store.SQLiteStore`` / ``PostgresStore``, imported when first asked for
    (the PostgreSQL one needs the ``postgres`` extra)."""
    if name == "SQLiteStore":
        from .sqlite import SQLiteStore

        return SQLiteStore
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_postgres_url(url: str | Path | None) -> bool:
    """Whether ``url`` names a PostgreSQL database."""
    return isinstance(url, str) and url.split(":", 1)[0].split("+", 1)[0] in ("postgresql",
                                                                              "postgres")


def open_store(url: str | Path | None, *, migrate: bool = True,
               read_only: bool = False, read_database_url: str | None = None) -> LongTermStore:
    """Open the store ``url`` names: PostgreSQL for ``postgresql://``, else SQLite.

    SQLite (a path, ``sqlite:///...``, ``:memory:`` or None for the default file) creates
    its schema on open; a relative path is resolved against the current directory. A
    malformed URL (``postgresql//...``, ``postgres:/...``) is a ValidationError.
    PostgreSQL creates its schema too unless ``migrate=False``, in which case
    an unmigrated database is an error naming ``htm migrate``. ``read_only`` opens a SQLite
    store for reading only (see :class:`~htm_core.store.sqlite.SQLiteStore`).
    ``read_database_url`` names a streaming replica of a PostgreSQL ``url``, for searches
    and lists (see :class:`~htm_core.store.postgres.PostgresStore`).
    """
    if isinstance(url, str):
        from ._address import check_address

        check_address(url)
    if is_postgres_url(url):
        from .postgres import PostgresStore

        if read_only:
            from ..errors import ValidationError

            raise ValidationError("read_only=True is for SQLite stores; for PostgreSQL connect "
                                  "as a role with read-only grants (or to a standby)")

        store: LongTermStore = PostgresStore(str(url), migrate=migrate,
                                             read_database_url=read_database_url)
        return store
    if read_database_url is not None:
        from ..errors import ValidationError

        raise ValidationError("read_database_url is for PostgreSQL stores (a streaming "
                              "replica of database_url); leave it out for SQLite")
    from .sqlite import SQLiteStore

    return SQLiteStore(url, migrate=migrate, read_only=read_only)
