"""The PostgreSQL engine's native async side: an async SQLAlchemy engine (psycopg's async
driver, the sync engine's URL, connect arguments and pool sizes, pgvector's codec) that
:class:`~htm_core.store.postgres.engine.PostgresDatabase` uses for its I/O while it runs in
a greenlet of :func:`htm_core._native.run_native`.

The sync code needs no second copy: SQLAlchemy's ``AsyncEngine.sync_engine`` takes the
same ``fn(conn)`` callables (each statement awaited on the loop), and :class:`SyncFace`
gives the recall path's ``fn(pg, info)`` callables the few methods of a
``psycopg.Connection`` they call, over a ``psycopg.AsyncConnection``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg.pq import TransactionStatus
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ..._native import in_native, run_native, wait_for

__all__ = ["NativeEngine", "SyncFace", "driver_of"]


class SyncCursor:
    """A ``psycopg.AsyncCursor`` with the sync methods the recall path's reads call."""

    def __init__(self, cursor: psycopg.AsyncCursor[Any]) -> None:
        self._cursor = cursor

    def execute(self, query: Any, params: Any = None) -> SyncCursor:
        wait_for(self._cursor.execute(query, params))
        return self

    def fetchone(self) -> Any:
        return wait_for(self._cursor.fetchone())

    def fetchall(self) -> list[Any]:
        return wait_for(self._cursor.fetchall())

    def close(self) -> None:
        wait_for(self._cursor.close())

    def __enter__(self) -> SyncCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def adapters(self) -> Any:
        return self._cursor.adapters

    @contextlib.contextmanager
    def copy(self, statement: Any) -> Iterator[SyncCopy]:
        block = self._cursor.copy(statement)
        copy = wait_for(block.__aenter__())
        try:
            yield SyncCopy(copy)
        except BaseException:
            if not wait_for(block.__aexit__(*sys.exc_info())):
                raise
        else:
            wait_for(block.__aexit__(None, None, None))


class SyncCopy:
    """A ``psycopg.AsyncCopy`` with the sync methods a binary COPY in calls."""

    def __init__(self, copy: psycopg.AsyncCopy) -> None:
        self._copy = copy

    def set_types(self, types: Any) -> None:
        self._copy.set_types(types)

    def write_row(self, row: Any) -> None:
        wait_for(self._copy.write_row(row))


class SyncFace:
    """A ``psycopg.AsyncConnection`` seen through the sync methods the recall path's reads
    (``PostgresDatabase.quick``) and a COPY in (:func:`~._copy.copy_rows`) call:
    ``execute``, ``cursor`` (with ``copy``), ``transaction``, ``pgconn``; each awaited on
    the loop."""

    def __init__(self, pg: psycopg.AsyncConnection[Any]) -> None:
        self._pg = pg

    @property
    def pgconn(self) -> Any:
        return self._pg.pgconn

    def execute(self, query: Any, params: Any = None) -> SyncCursor:
        return SyncCursor(wait_for(self._pg.execute(query, params)))

    def cursor(self, *, row_factory: Any = None) -> SyncCursor:
        cursor = (self._pg.cursor() if row_factory is None
                  else self._pg.cursor(row_factory=row_factory))
        return SyncCursor(cursor)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        block = self._pg.transaction()
        wait_for(block.__aenter__())
        try:
            yield
        except BaseException:
            if not wait_for(block.__aexit__(*sys.exc_info())):
                raise
        else:
            wait_for(block.__aexit__(None, None, None))


def driver_of(conn: Connection) -> psycopg.Connection[Any]:
    """The psycopg connection under ``conn``, or in a native call a :class:`SyncFace` over
    the async one."""
    pg = conn.connection.driver_connection
    if isinstance(pg, psycopg.AsyncConnection):
        return SyncFace(pg)  # type: ignore[return-value]
    assert pg is not None  # a checked-out connection always has one
    return pg  # type: ignore[no-any-return]


def register_vectors_async(engine: AsyncEngine) -> None:
    """Give every connection of ``engine`` pgvector's codec (as ``register_vectors`` does
    for the sync engine), at its first checkout after the extension exists."""
    @event.listens_for(engine.sync_engine, "checkout")
    def _register(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        pg = dbapi_connection.driver_connection
        if pg.adapters.types.get("vector") is not None:
            return
        with contextlib.suppress(psycopg.ProgrammingError):  # no vector type yet
            wait_for(register_vector_async(pg))


class Readers:
    """The recall path's own autocommit connections in native calls, kept out of the pool
    (as the sync path keeps one): no checkout, no isolation level set and reset per read,
    statements prepared per connection, session notes kept. At most ``limit`` at once;
    a native call beyond waits on the loop."""

    def __init__(self, engine: AsyncEngine, limit: int) -> None:
        self._engine = engine
        self._slots = asyncio.Semaphore(limit)
        self.idle: list[tuple[psycopg.AsyncConnection[Any], dict[str, Any]]] = []

    @contextlib.contextmanager
    def connection(self) -> Iterator[tuple[psycopg.AsyncConnection[Any], dict[str, Any]]]:
        """An idle reader, or a new one; kept for the next read unless it broke."""
        wait_for(self._slots.acquire())
        try:
            pg, info = self.idle.pop() if self.idle else (self._open(), {})
            try:
                yield pg, info
            finally:
                if pg.info.transaction_status == TransactionStatus.IDLE:
                    self.idle.append((pg, info))
                else:  # broken, or left mid-statement (a cancelled call): not reused
                    with contextlib.suppress(psycopg.Error):
                        wait_for(pg.close())
        finally:
            self._slots.release()

    def _open(self) -> psycopg.AsyncConnection[Any]:
        fairy = self._engine.sync_engine.raw_connection()  # connect args, pgvector's codec
        pg = fairy.dbapi_connection.driver_connection  # type: ignore[union-attr]
        fairy.detach()  # ours now: never returned to the pool
        assert isinstance(pg, psycopg.AsyncConnection)
        wait_for(pg.set_autocommit(True))
        return pg


class NativeEngine:
    """The async engine of one database, made at its first use in each event loop (an
    async pool's connections and waits belong to one loop), with its :class:`Readers`."""

    def __init__(self, url: str, **options: Any) -> None:
        self._url = url
        self._options = options
        self._lock = threading.Lock()
        self._engine: AsyncEngine | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._readers: Readers | None = None

    def readers(self) -> Readers:
        """The running loop's :class:`Readers`."""
        self.engine()
        assert self._readers is not None  # made with the engine
        return self._readers

    @property
    def started(self) -> bool:
        """Whether an async engine was made (a native call ran)."""
        return self._engine is not None

    def engine(self) -> Engine:
        """The sync face of the running loop's async engine (its statements awaited)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            engine, old = self._engine, None
            if engine is None or self._loop is not loop:
                old, engine = engine, create_async_engine(self._url, **self._options)
                register_vectors_async(engine)
                old_readers, self._readers = self._readers, Readers(
                    engine, self._options["pool_size"])
                self._engine, self._loop = engine, loop
        if old is not None:  # another loop's: its connections go with it
            _drop(old, old_readers)
        return engine.sync_engine

    def close(self) -> None:
        """Close the pooled connections (awaited when native, else on the owning loop if
        it still runs, else dropped)."""
        with self._lock:
            engine, loop, readers = self._engine, self._loop, self._readers
            self._engine = self._loop = self._readers = None
        if engine is None:
            return
        if in_native():
            _close_readers(readers)
            wait_for(engine.dispose())
            return
        if loop is not None and loop.is_running() and not _on(loop):
            async def dispose() -> None:
                await run_native(_close_readers, readers)
                await engine.dispose()

            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(dispose(), loop).result(10)
                return
        _drop(engine, readers)


def _on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _close_readers(readers: Readers | None) -> None:
    """Close the idle readers (in a native call)."""
    while readers is not None and readers.idle:
        with contextlib.suppress(psycopg.Error):
            wait_for(readers.idle.pop()[0].close())


def _drop(engine: AsyncEngine, readers: Readers | None) -> None:
    """Close ``engine``'s idle connections and the idle readers at the socket, without a
    loop (one that is closed, or this thread's, busy running this call)."""
    idle = getattr(engine.sync_engine.pool, "_pool", None)
    pooled = []
    while idle is not None and not idle.empty():
        pooled.append(getattr(idle.get_nowait().dbapi_connection, "driver_connection", None))
    for pg in pooled + [pg for pg, _ in (readers.idle if readers else [])]:
        if isinstance(pg, psycopg.AsyncConnection):
            with contextlib.suppress(Exception):
                pg.pgconn.finish()
    engine.sync_engine.dispose(close=False)
