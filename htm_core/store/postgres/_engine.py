"""PostgreSQL connection pool, transactions and error mapping, schema gate, meta, robots, log."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.rows import tuple_row
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from ...errors import (
    SchemaError,
    ValidationError,
)
from ...models import Robot
from .._common import mask_url
from .._sql.forgetting import LogLine
from .._sql.schema import needs_migration
from .._sql.working import SQLWorkingSet
from .._vectors import (
    check_embedder,
)
from ..base import (
    SCHEMA_VERSION,
)
from ._codec import _JSONB_OID, _BinaryPassDumper, _JsonTextDumper
from ._errors import map_postgres_errors, postgres_error, sqlstate
from ._schema import _BULK_MARKER, _DIMENSION_LOCK, _HNSW_INDEX, _MIGRATE_LOCK, _MIGRATIONS

if TYPE_CHECKING:
    from ...jobs import JobQueue

logger = logging.getLogger("htm_core.store.postgres")

T = TypeVar("T")

#: SQLSTATEs worth retrying the whole transaction for: deadlock, serialisation failure.
_RETRYABLE = {"40P01", "40001"}
_RETRIES = 5


def postgres_url(url: str) -> str:
    """The SQLAlchemy URL (``postgresql+psycopg://``) for a ``postgresql://`` URL.

    Accepts ``postgresql://``, ``postgres://`` and ``postgresql+psycopg://``.

    >>> postgres_url("postgresql://me:pw@db.example/htm")
    'postgresql+psycopg://me:pw@db.example/htm'
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ValidationError(
            f"cannot parse database URL {mask_url(url)!r}: {exc}; use "
            "postgresql://user:password@host:port/database") from None
    if parsed.drivername not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise ValidationError(
            f"database URL {mask_url(url)!r} uses driver {parsed.drivername!r}; htm talks to "
            "PostgreSQL through psycopg 3: use postgresql:// or postgresql+psycopg://")
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


#: A ``text()`` placeholder (``:name``), not a ``::`` cast.
_PARAM = re.compile(r"(?<![:\w]):(\w+)")


@functools.lru_cache(maxsize=512)
def _pyformat(sql: str) -> str:
    """``text()``'s ``:name`` placeholders as the driver's ``%(name)s`` (``::`` casts and
    literal ``%`` kept), for the reads on every recall's path, which skip SQLAlchemy's
    statement compilation (a tenth of a millisecond per statement here)."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


def _rows(pg: psycopg.Connection[Any], sql: str, params: dict[str, Any],
          row_factory: Any = None) -> list[Any]:
    """The rows of ``sql`` (``text()`` placeholders) on the driver's connection."""
    with pg.cursor(row_factory=row_factory or tuple_row) as cur:
        return cur.execute(_pyformat(sql), params).fetchall()


#: A read on the driver's connection: the connection and its session notes (which
#: ``hnsw.ef_search`` it holds), kept as long as the connection lives.
Quick = Callable[[psycopg.Connection[Any], dict[str, Any]], T]


class _KeyRace(Exception):
    """A COPY met a key another writer committed after the batch looked (retry by statement)."""


def _aware(*values: datetime | None) -> bool:
    return all(v is None or v.utcoffset() is not None for v in values)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


#: Send buffer asked for a local (Unix-socket) connection: room for a whole batch of rows.
_SEND_BUFFER = 4 * 2**20


def _room_to_send(driver: psycopg.Connection[Any]) -> None:
    """Let a Unix socket to the server hold a whole COPY batch (the kernel caps the size
    at ``net.core.wmem_max``). With the default (about 200 KB, a hundred rows) the client
    stalls until the server has nearly caught up, so work it does after the rows are sent
    cannot overlap the server's inserting them. TCP sockets size their buffers themselves."""
    unix = getattr(socket, "AF_UNIX", None)
    if unix is None:
        return
    with contextlib.suppress(OSError):
        fd = os.dup(driver.pgconn.socket)
        try:
            sock = socket.socket(fileno=fd)  # owns the copy of the descriptor from here on
        except OSError:
            os.close(fd)
            raise
        with sock:
            if sock.family == unix and sock.getsockopt(
                    socket.SOL_SOCKET, socket.SO_SNDBUF) < _SEND_BUFFER:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SEND_BUFFER)


def _copy_rows(conn: Connection, statement: str, types: Sequence[str],
               rows: Iterator[tuple[Any, ...]] | Sequence[tuple[Any, ...]],
               during: Callable[[], None] | None = None) -> None:
    """Stream ``rows`` with a binary COPY on the transaction's own connection; ``during``
    runs once they are all sent, while the server may still be inserting them. A
    ``vector`` column takes bytes made by ``_vectors_binary``."""
    driver = conn.connection.driver_connection
    assert driver is not None  # a checked-out connection always has one
    if during is not None:
        _room_to_send(driver)
    try:
        with driver.cursor() as cur:
            jsonb = type("JsonTextDumper", (_JsonTextDumper,), {"oid": _JSONB_OID})
            cur.adapters.register_dumper(None, jsonb)
            vector = cur.adapters.types.get("vector")
            if "vector" in types and vector is not None:  # values made by ``_vectors_binary``
                cur.adapters.register_dumper(None, type(
                    "VectorBinaryDumper", (_BinaryPassDumper,), {"oid": vector.oid}))
            with cur.copy(statement) as copy:
                copy.set_types(list(types))
                for row in rows:
                    copy.write_row(row)
                if during is not None:
                    during()
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name == "memories_key_key":
            raise _KeyRace() from exc
        raise DBAPIError.instance(statement, None, exc, psycopg.Error) from exc
    except psycopg.Error as exc:
        raise DBAPIError.instance(statement, None, exc, psycopg.Error) from exc


class _PostgresEngine(SQLWorkingSet):
    """The PostgreSQL connection pool, its transactions and the catalogue every other part uses."""

    _url: str
    url: str
    hnsw_m: int
    hnsw_ef_construction: int
    ef_search: int
    copy_min_rows: int
    _robot_ids: dict[str, int]
    _centroid: tuple[int, float, str | None, list[float] | None] | None
    _dim: int | None
    _common: tuple[float, list[str] | None] | None
    _engine: Engine
    #: The recall path's own connection (see :meth:`_quick`), its process and its notes.
    _raw_lock: threading.Lock
    _raw_conn: psycopg.Connection[Any] | None = None
    _raw_pid: int = 0
    _raw_info: dict[str, Any]

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"

    # -- transactions ----------------------------------------------------------------

    def _run(self, what: str, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one transaction; retry on deadlock or serialisation failure, and
        once on a dead pooled connection when it failed before the commit."""
        reconnected = False
        for attempt in range(_RETRIES):
            before_commit = False
            try:
                with self._engine.begin() as conn:
                    before_commit = True
                    result = fn(conn)
                    before_commit = False
                return result
            except DBAPIError as exc:
                if sqlstate(exc) in _RETRYABLE and attempt < _RETRIES - 1:
                    time.sleep(random.uniform(0.005, 0.02) * 2**attempt)
                    continue
                if before_commit and exc.connection_invalidated and not reconnected:
                    reconnected = True  # nothing was committed: run it again, once
                    continue
                raise postgres_error(exc, self.url, what) from exc
            except PoolTimeoutError as exc:
                raise postgres_error(exc, self.url, what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _read(self, what: str, fn: Callable[[Connection], T]) -> T:
        """Run ``fn``'s reads in autocommit mode: each statement is its own snapshot, and
        no BEGIN / ROLLBACK round trips are paid (a read is on the path of every recall).
        ``set_config(..., true)`` does not carry over between statements here; use
        :meth:`_run` for anything that needs a transaction. A dead pooled connection is
        replaced and ``fn`` run again, once."""
        for attempt in range(2):
            try:
                with self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                    return fn(conn)
            except DBAPIError as exc:
                if exc.connection_invalidated and attempt == 0:
                    continue
                raise postgres_error(exc, self.url, what) from exc
            except PoolTimeoutError as exc:
                raise postgres_error(exc, self.url, what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _quick(self, what: str, fn: Quick[T]) -> T:
        """Run ``fn``'s reads (autocommit: each statement its own snapshot) on the store's
        own psycopg connection, kept out of the pool: the reads on every recall's path pay
        no pool checkout, no SQLAlchemy statement, and psycopg prepares a statement run
        five times (a fresh connection starts with none prepared). While another thread
        holds that connection, ``fn`` runs on a pooled one. A dead connection is replaced
        and ``fn`` run again, once; a process made by ``fork`` opens its own.
        """
        if not self._raw_lock.acquire(blocking=False):
            return self._read(what, lambda conn: fn(
                conn.connection.driver_connection,  # type: ignore[arg-type]
                conn.connection.info))
        try:
            for attempt in range(2):
                pg = self._raw_connection(what)
                try:
                    return fn(pg, self._raw_info)
                except psycopg.Error as exc:
                    if pg.broken or pg.closed:
                        self._drop_raw()
                        if attempt == 0:
                            continue
                    error = DBAPIError.instance(None, None, exc, psycopg.Error)
                    assert isinstance(error, DBAPIError)  # a driver error always makes one
                    raise postgres_error(error, self.url, what) from exc
        finally:
            self._raw_lock.release()
        raise AssertionError("unreachable")  # pragma: no cover

    def _raw_connection(self, what: str) -> psycopg.Connection[Any]:
        """The store's own read connection (the caller holds ``_raw_lock``): one of the
        engine's (its connect arguments and pgvector's codec), taken out of the pool."""
        pg = self._raw_conn
        if pg is None or self._raw_pid != os.getpid():
            with map_postgres_errors(self.url, what):
                fairy = self._engine.raw_connection()
            pg = fairy.dbapi_connection  # type: ignore[assignment]
            fairy.detach()  # ours now: closed by _drop_raw, never returned
            assert pg is not None
            pg.autocommit = True
            self._raw_conn, self._raw_pid, self._raw_info = pg, os.getpid(), {}
        return pg

    def _drop_raw(self) -> None:
        """Close the store's own read connection (one inherited through ``fork`` is only
        let go of: closing it would end the parent's session)."""
        pg, self._raw_conn = self._raw_conn, None
        if pg is not None and self._raw_pid == os.getpid():
            try:
                pg.close()
            except psycopg.Error as exc:
                logger.debug("closing the read connection of %s: %s", self.url, exc)

    # -- hooks of the shared SQL layer -----------------------------------------------

    _CODE_POINT_ORDER = ' COLLATE "C"'
    _LOCK_ROWS = " FOR UPDATE"
    _BUMP_TIME = "CAST(:t AS timestamptz)"

    def _reading(self, what: str, fn: Callable[[Connection], T]) -> T:
        return self._read(what, fn)

    def _writing(self, what: str, fn: Callable[[Connection], T]) -> T:
        return self._run(what, fn)

    def _writing_as(self, robot: str, what: str, fn: Callable[[Connection, int], T]) -> T:
        rid = self._robot_id(robot)
        return self._run(what, lambda conn: fn(conn, rid))

    def _log_lines(self, conn: Connection, lines: Sequence[LogLine]) -> None:
        self._log_many(conn, lines)

    @staticmethod
    def _delete_rows(conn: Connection, ids: Sequence[int]) -> None:
        conn.execute(text("DELETE FROM memories WHERE id = ANY(:ids)"), {"ids": list(ids)})

    @staticmethod
    def _time_in(value: datetime) -> Any:
        return value

    @staticmethod
    def _time_out(value: Any) -> datetime:
        moment: datetime = value.astimezone(timezone.utc)
        return moment

    @staticmethod
    def _json_out(value: Any) -> dict[str, Any]:
        return dict(value or {})

    # -- schema ----------------------------------------------------------------------

    @staticmethod
    def _version(conn: Connection) -> int:
        if conn.execute(text("SELECT to_regclass('htm_meta')")).scalar() is None:
            return 0
        value = conn.execute(text("SELECT value FROM htm_meta WHERE key = 'schema_version'")
                             ).scalar()
        return int(value) if value is not None else 0

    def schema_version(self) -> int:
        """The schema version in the database (0 when empty)."""
        return self._read("reading the schema version", self._version)

    def _create_extension(self, conn: Connection) -> None:
        if conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first():
            return
        database = conn.execute(text("SELECT current_database()")).scalar()
        available = conn.execute(text(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).first()
        if not available:
            raise SchemaError(
                f"the PostgreSQL server at {self.url} does not have the pgvector extension "
                "installed; install pgvector on the server (for example the "
                "postgresql-16-pgvector package, or the pgvector/pgvector Docker image), then "
                "run HTM(...).migrate() or `htm migrate` again")
        try:
            with conn.begin_nested():
                conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
        except DBAPIError as exc:
            raise SchemaError(
                f"cannot create the pgvector extension in database {database!r} on {self.url}: "
                f"{str(exc.orig).strip()}; ask a superuser to run `CREATE EXTENSION vector;` "
                "in that database, then run HTM(...).migrate() or `htm migrate` again") from exc

    def migrate(self) -> int:
        """Create or upgrade the schema; return the version now in place. Never drops.

        Safe to run from many processes at once: migrations are serialised by a session
        advisory lock, and each runs in one transaction started after the lock is held
        (so it sees whatever the previous holder created).
        """
        def step(conn: Connection) -> int:
            current = self._version(conn)
            if not needs_migration(self.url, current, migrate=True):
                return current
            self._create_extension(conn)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[version]:
                    conn.exec_driver_sql(statement)
                self._set_meta(conn, "schema_version", str(version))
                self._log_many(conn, [("migrate", None, None, None,
                                       {"from": version - 1, "to": version})])
                logger.info("migrated %s to schema version %d", self.url, version)
            return SCHEMA_VERSION

        with map_postgres_errors(self.url, "migrating the schema"), self._engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATE_LOCK})
            conn.commit()
            try:
                with conn.begin():
                    return step(conn)
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATE_LOCK})
                conn.commit()

    def close(self) -> None:
        """Release every pooled connection and the recall path's own."""
        with self._raw_lock:
            self._drop_raw()
        self._engine.dispose()

    # -- meta ------------------------------------------------------------------------

    @staticmethod
    def _meta(conn: Connection) -> dict[str, str]:
        return {str(k): str(v) for k, v in conn.execute(text("SELECT key, value FROM htm_meta"))}

    @staticmethod
    def _set_meta(conn: Connection, key: str, value: str) -> None:
        conn.execute(text("INSERT INTO htm_meta(key, value) VALUES (:k, :v) "
                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value"),
                     {"k": key, "v": value})

    @staticmethod
    def _info(meta: dict[str, str]) -> tuple[str, int] | None:
        if "embedder" not in meta or "embedding_dim" not in meta:
            return None
        return meta["embedder"], int(meta["embedding_dim"])

    def embedding_info(self) -> tuple[str, int] | None:
        """(embedder name, dimension) fixed for this store, or None before any vector."""
        return self._info(self._read("reading the embedding settings", self._meta))

    def _hnsw_ddl(self) -> str:
        return (f"CREATE INDEX IF NOT EXISTS {_HNSW_INDEX} ON memories "
                f"USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = {self.hnsw_m}, ef_construction = {self.hnsw_ef_construction}) "
                "WHERE forgotten_at IS NULL")

    def _check_embedding(self, conn: Connection, embedder: str, dim: int) -> None:
        """Fix the dimension with the first vector (column type + HNSW index); else check it.

        While a bulk load runs (its marker is in ``htm_meta``) the index is left to the
        load's end, which builds it once over all the rows.
        """
        meta = self._meta(conn)
        info = self._info(meta)
        if info is None:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _DIMENSION_LOCK})
            meta = self._meta(conn)  # another process may have fixed it meanwhile
            info = self._info(meta)
        if info is None:
            conn.exec_driver_sql(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dim)})")
            if _BULK_MARKER not in meta:
                conn.exec_driver_sql(self._hnsw_ddl())
            self._set_meta(conn, "embedder", embedder)
            self._set_meta(conn, "embedding_dim", str(dim))
            self._set_meta(conn, "hnsw", json.dumps({"m": self.hnsw_m,
                                                     "ef_construction": self.hnsw_ef_construction}))
            return
        check_embedder(info[0], info[1], embedder, dim)

    # -- robots ----------------------------------------------------------------------

    def _robot_id_map(self, names: Sequence[str]) -> dict[str, int]:
        """Ids of ``names``, registering new ones in their own committed transaction.

        Robots are never deleted, so cached ids stay valid; registering outside the
        caller's transaction means a rolled-back batch never leaves a stale id cached.
        """
        unknown = sorted({n for n in names if n not in self._robot_ids})
        if unknown:
            def register(conn: Connection) -> dict[str, int]:
                conn.execute(text(
                    "INSERT INTO robots(name, last_active) SELECT n, now() "
                    "FROM unnest(CAST(:names AS text[])) AS n ON CONFLICT (name) DO NOTHING"),
                    {"names": unknown})
                rows = conn.execute(text("SELECT name, id FROM robots WHERE name = ANY(:names)"),
                                    {"names": unknown})
                return {str(r[0]): int(r[1]) for r in rows}

            self._robot_ids.update(self._run("registering robots", register))
        return {n: self._robot_ids[n] for n in names}

    def _robot_id(self, name: str) -> int:
        return self._robot_id_map([name])[name]

    def _known_robot_id(self, conn: Connection, name: str) -> int | None:
        if name in self._robot_ids:
            return self._robot_ids[name]
        rid = conn.execute(text("SELECT id FROM robots WHERE name = :n"), {"n": name}).scalar()
        if rid is not None:
            self._robot_ids[name] = int(rid)
            return int(rid)
        return None

    def ensure_robot(self, name: str, *, working_memory_tokens: int | None = None) -> Robot:
        """Register ``name`` if new (recording the budget its ``HTM`` runs with); return it."""
        rid = self._robot_id(name)
        if working_memory_tokens is not None:
            self._run("recording the working-memory budget", lambda conn: conn.execute(text(
                "UPDATE robots SET working_memory_tokens = :t "
                "WHERE id = :r AND working_memory_tokens IS DISTINCT FROM :t"),
                {"t": working_memory_tokens, "r": rid}))
        return next(r for r in self.robots() if r.name == name)

    # -- log -------------------------------------------------------------------------

    @staticmethod
    def _log_many(conn: Connection,
                  entries: Sequence[tuple[str, int | None, int | None, str | None,
                                          dict[str, Any] | None]]) -> None:
        """Append (op, robot id, memory id, key, detail) lines in one statement."""
        if not entries:
            return
        # The lines as one JSON text: psycopg dumps text[] parameters element by element.
        conn.execute(text(
            "INSERT INTO operations(op, robot_id, memory_id, key, detail) "
            "SELECT e.v->>0, CAST(e.v->>1 AS bigint), CAST(e.v->>2 AS bigint), e.v->>3, e.v->4 "
            "FROM jsonb_array_elements(CAST(:lines AS jsonb)) WITH ORDINALITY AS e(v, ord) "
            "ORDER BY e.ord"),
            {"lines": json.dumps([[op, rid, mid, key, detail or {}]
                                  for op, rid, mid, key, detail in entries])})

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for companions such as the enrichment job queue)."""
        return self._engine

    def open_job_queue(self) -> JobQueue:
        """The enrichment job queue on this store's database (see ``LongTermStore``)."""
        from ...jobs import job_queue_on

        return job_queue_on(self._engine)
