"""PostgreSQL driver errors reach the caller through one mapper (``postgres/_errors.py``):
a read-only server and a lock held too long say what happened and what to do, worded like
the SQLite store's. Real PostgreSQL server, settings changed per test database."""

from __future__ import annotations

from datetime import datetime, timezone

import psycopg
import pytest
from sqlalchemy.engine import make_url

from htm_core.errors import StoreError
from htm_core.store import NewMemory
from htm_core.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def _admin(url: str) -> psycopg.Connection:
    return psycopg.connect(make_url(url).set(drivername="postgresql")
                           .render_as_string(hide_password=False), autocommit=True)


def _note(key: str) -> NewMemory:
    return NewMemory(key=key, content=f"note {key}", robot="r1", importance=1.0, token_count=2,
                     created_at=datetime(2024, 5, 1, tzinfo=timezone.utc))


def _set_database(url: str, setting: str) -> None:
    with _admin(url) as conn:
        name = conn.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        conn.execute(f'ALTER DATABASE "{name}" SET {setting}')


def test_a_read_only_server_says_to_connect_to_the_primary(pg_url: str) -> None:
    PostgresStore(pg_url).close()  # schema in place
    _set_database(pg_url, "default_transaction_read_only = on")
    store = PostgresStore(pg_url, migrate=False)
    try:
        with pytest.raises(StoreError) as info:
            store.add_many([_note("a")])
        assert store.url in str(info.value) and "connect to the primary" in str(info.value)
    finally:
        store.close()


def test_a_lock_held_too_long_says_the_database_stayed_locked(pg_url: str) -> None:
    PostgresStore(pg_url).close()
    _set_database(pg_url, "lock_timeout = '100ms'")
    store = PostgresStore(pg_url, migrate=False)
    holder = _admin(pg_url)
    try:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(StoreError) as info:
            store.counts("r1")
        assert "stayed locked" in str(info.value) and "counting memories" in str(info.value)
    finally:
        holder.close()
        store.close()
