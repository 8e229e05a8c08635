"""The PostgreSQL engine: connection pool, transactions and error mapping, the recall
path's own connection, schema version and migration, ``htm_meta``, robot ids, the log."""

from __future__ import annotations

import functools
import json
import logging
import os
import random
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.rows import tuple_row
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from ..._native import in_native, sleep
from ...errors import SchemaError, ValidationError
from ...validation import check_int
from .._common import mask_url
from .._sql.parts import LogLine
from .._sql.schema import needs_migration
from ..base import SCHEMA_VERSION
from ._codec import register_vectors
from ._errors import map_postgres_errors, postgres_error, sqlstate
from ._schema import _MIGRATE_LOCK, _MIGRATIONS
from .listener import NOTIFY_DDL, NOTIFY_TRIGGERS_SQL, HeardVersions, Listener, local_write
from .native import NativeEngine, SyncFace

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


#: The pooler modes ``pooler=`` (or a URL's ``?pooler=``) accepts.
POOLER_MODES = ("transaction",)


def split_pooler(url: str, pooler: str | None = None) -> tuple[str, str | None]:
    """``url`` without its ``pooler`` query parameter, and the pooler mode: ``pooler``, or
    the URL's ``?pooler=transaction``.

    >>> split_pooler("postgresql://me@pool.example:6432/htm?pooler=transaction")
    ('postgresql://me@pool.example:6432/htm', 'transaction')
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url, pooler  # postgres_url says what is wrong with it
    in_url = parsed.query.get("pooler")
    if isinstance(in_url, tuple):
        in_url = in_url[-1]
    for given in (pooler, in_url):
        if given is not None and given not in POOLER_MODES:
            raise ValidationError(
                f"unknown pooler mode {given!r} for {mask_url(url)!r}: use pooler='transaction' "
                "(or ?pooler=transaction in the URL) behind a pooler that hands out a server "
                "connection per transaction, such as PgBouncer's pool_mode = transaction; "
                "behind a session-mode pooler or none, leave it out")
    if in_url is None:
        return url, pooler
    return parsed.difference_update_query(["pooler"]).render_as_string(
        hide_password=False), in_url


_YES, _NO = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


def split_listen(url: str, listen: bool | None = None) -> tuple[str, bool]:
    """``url`` without its ``listen`` query parameter, and whether to listen: ``listen``,
    else the URL's ``?listen=true`` (or ``on``, ``1``, ``yes``), else False.

    >>> split_listen("postgresql://me@db.example/htm?listen=on")
    ('postgresql://me@db.example/htm', True)
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url, bool(listen)
    in_url = parsed.query.get("listen")
    if isinstance(in_url, tuple):
        in_url = in_url[-1]
    if in_url is None:
        return url, bool(listen)
    if in_url.lower() not in _YES + _NO:
        raise ValidationError(
            f"cannot read listen={in_url!r} in {mask_url(url)!r}: use ?listen=true to hear "
            "other processes' working-memory changes through LISTEN/NOTIFY, or leave it out")
    stripped = parsed.difference_update_query(["listen"]).render_as_string(hide_password=False)
    return stripped, listen if listen is not None else in_url.lower() in _YES


#: Per database (its masked URL), the primary's WAL position after the newest write this
#: process committed there, while a store reads on a replica (see :mod:`.replica`).
_WRITTEN_LSN: dict[str, int] = {}
_LSN_LOCK = threading.Lock()

#: A ``text()`` placeholder (``:name``), not a ``::`` cast.
PARAM = re.compile(r"(?<![:\w]):(\w+)")


@functools.lru_cache(maxsize=512)
def _pyformat(sql: str) -> str:
    """``text()``'s ``:name`` placeholders as the driver's ``%(name)s`` (``::`` casts and
    literal ``%`` kept), for the reads on every recall's path, which skip SQLAlchemy's
    statement compilation (a tenth of a millisecond per statement here)."""
    return PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


def driver_rows(pg: psycopg.Connection[Any], sql: str, params: dict[str, Any],
                row_factory: Any = None) -> list[Any]:
    """The rows of ``sql`` (``text()`` placeholders) on the driver's connection."""
    with pg.cursor(row_factory=row_factory or tuple_row) as cur:
        return cur.execute(_pyformat(sql), params).fetchall()


#: A read on the driver's connection: the connection and its session notes (which
#: ``hnsw.ef_search`` it holds), kept as long as the connection lives.
Quick = Callable[[psycopg.Connection[Any], dict[str, Any]], T]


def embedding_settings(meta: dict[str, str]) -> tuple[str, int] | None:
    """(embedder, dimension) fixed in ``htm_meta`` (as :meth:`PostgresDatabase.meta`
    reads it), None before the first vector."""
    if "embedder" not in meta or "embedding_dim" not in meta:
        return None
    return meta["embedder"], int(meta["embedding_dim"])


def _in_transaction(fn: Quick[T]) -> Quick[T]:
    """``fn`` run in one transaction of its (autocommit) connection."""
    def inside(pg: psycopg.Connection[Any], info: dict[str, Any]) -> T:
        with pg.transaction():
            return fn(pg, info)
    return inside


class PostgresDatabase:
    """One PostgreSQL database: the pool, how work runs on it, and what every part shares.

    :meth:`run` is a transaction (retried on deadlock and serialisation failure),
    :meth:`read` autocommit reads on a pooled connection, :meth:`quick` reads on the
    store's own connection kept out of the pool (the recall path). The robot ids it
    caches stay valid because robots are never deleted. In a native call (a greenlet of
    :func:`htm_core._native.run_native`) all three do their I/O on :attr:`native`, the
    async engine, awaited on the event loop.

    With ``pooler="transaction"`` (a pooler such as PgBouncer gives each transaction
    whichever server connection is free) no state is kept in a server session:
    psycopg prepares no statement, :meth:`quick` runs its reads in one transaction, and
    locks are held for a transaction only.
    """

    def __init__(self, url: str, *, pool_size: int = 5, max_overflow: int = 10,
                 pool_timeout: float = 30.0, connect_timeout: int = 10,
                 pooler: str | None = None) -> None:
        url, _ = split_listen(url)
        url, pooler = split_pooler(url, pooler)
        #: ``"transaction"`` behind a transaction-mode pooler, else None.
        self.pooler = pooler
        full = postgres_url(url)
        connect_args: dict[str, Any] = {
            "connect_timeout": check_int("connect_timeout", connect_timeout, 1, 3600),
            "application_name": "htm"}
        if pooler is not None:
            connect_args["prepare_threshold"] = None  # a prepared statement is session state
        #: The database's address with the password masked (for messages).
        self.url = mask_url(full)
        pool = {"pool_size": check_int("pool_size", pool_size, 1, 1000),
                "max_overflow": check_int("max_overflow", max_overflow, 0, 1000),
                "pool_timeout": pool_timeout, "pool_recycle": 1800, "connect_args": connect_args}
        #: The SQLAlchemy engine (its pool gives every connection pgvector's codec).
        self.engine: Engine = create_engine(full, **pool)
        register_vectors(self.engine)
        #: The async engine native calls use (see :mod:`.native`), made at their first one.
        self.native = NativeEngine(full, **pool)
        self._robot_ids: dict[str, int] = {}
        #: Held while a thread reads on the recall path's own connection (see :meth:`quick`).
        self.raw_lock = threading.Lock()
        self._raw_conn: psycopg.Connection[Any] | None = None
        self._raw_pid = 0
        self._raw_info: dict[str, Any] = {}
        #: Each robot's working-set version as last read, trusted while a listener vouches.
        self.heard = HeardVersions(None, self._robot_ids)
        #: Note the WAL position after each committed transaction (a replica reads for us).
        self.track_lsn = False

    @property
    def raw_connection(self) -> psycopg.Connection[Any] | None:
        """The recall path's own connection, None until the first :meth:`quick` read."""
        return self._raw_conn

    # -- transactions ----------------------------------------------------------------

    def _engine(self) -> Engine:
        """The engine for this call: the async engine's sync face in a native call (each
        statement awaited on the event loop), else the sync engine."""
        return self.native.engine() if in_native() else self.engine

    def run(self, what: str, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one transaction; retry on deadlock or serialisation failure, and
        once on a dead pooled connection when it failed before the commit."""
        reconnected = False
        for attempt in range(_RETRIES):
            before_commit = False
            try:
                with self._engine().begin() as conn:
                    before_commit = True
                    result = fn(conn)
                    before_commit = False
                local_write(self.url)
                if self.track_lsn:
                    self._note_lsn()
                return result
            except DBAPIError as exc:
                if sqlstate(exc) in _RETRYABLE and attempt < _RETRIES - 1:
                    sleep(random.uniform(0.005, 0.02) * 2**attempt)
                    continue
                if before_commit and exc.connection_invalidated and not reconnected:
                    reconnected = True  # nothing was committed: run it again, once
                    continue
                raise postgres_error(exc, self.url, what) from exc
            except PoolTimeoutError as exc:
                raise postgres_error(exc, self.url, what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _note_lsn(self) -> None:
        """Remember the WAL position now (at or past the commit that just returned)."""
        lsn = int(self.read("reading the WAL position", lambda conn: conn.execute(text(
            "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")).scalar_one()))
        with _LSN_LOCK:
            _WRITTEN_LSN[self.url] = max(_WRITTEN_LSN.get(self.url, 0), lsn)

    def written_lsn(self) -> int:
        """The WAL position a replica must have replayed to hold every write this process
        committed here (0 before the first)."""
        return _WRITTEN_LSN.get(self.url, 0)

    def read(self, what: str, fn: Callable[[Connection], T]) -> T:
        """Run ``fn``'s reads in autocommit mode: each statement is its own snapshot, and
        no BEGIN / ROLLBACK round trips are paid (a read is on the path of every recall).
        ``set_config(..., true)`` does not carry over between statements here; use
        :meth:`run` for anything that needs a transaction. A dead pooled connection is
        replaced and ``fn`` run again, once."""
        for attempt in range(2):
            try:
                with self._engine().connect().execution_options(
                        isolation_level="AUTOCOMMIT") as conn:
                    return fn(conn)
            except DBAPIError as exc:
                if exc.connection_invalidated and attempt == 0:
                    continue
                raise postgres_error(exc, self.url, what) from exc
            except PoolTimeoutError as exc:
                raise postgres_error(exc, self.url, what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def quick(self, what: str, fn: Quick[T]) -> T:
        """Run ``fn``'s reads (autocommit: each statement its own snapshot) on the store's
        own psycopg connection, kept out of the pool: the reads on every recall's path pay
        no pool checkout, no SQLAlchemy statement, and psycopg prepares a statement run
        five times (a fresh connection starts with none prepared). While another thread
        holds that connection, ``fn`` runs on a pooled one. A dead connection is replaced
        and ``fn`` run again, once; a process made by ``fork`` opens its own. Behind a
        transaction-mode pooler ``fn`` runs in one transaction, so all its statements
        meet the same server connection (and nothing is prepared). In a native call
        (:mod:`htm_core._native`) ``fn`` runs on one of the async engine's own readers.
        """
        if self.pooler is not None:
            fn = _in_transaction(fn)
        if in_native():
            return self._quick_native(what, fn)
        if not self.raw_lock.acquire(blocking=False):
            return self.read(what, lambda conn: fn(
                conn.connection.driver_connection,  # type: ignore[arg-type]
                conn.connection.info))
        try:
            for attempt in range(2):
                pg = self._connect_raw(what)
                try:
                    return fn(pg, self._raw_info)
                except psycopg.Error as exc:
                    if pg.broken or pg.closed:
                        self._drop_raw()
                        if attempt == 0:
                            continue
                    raise self._driver_error(exc, what) from exc
        finally:
            self.raw_lock.release()
        raise AssertionError("unreachable")  # pragma: no cover

    def _driver_error(self, exc: psycopg.Error, what: str) -> Exception:
        """The :class:`~htm_core.errors.StoreError` for a driver error of ``what``."""
        error = DBAPIError.instance(None, None, exc, psycopg.Error)
        assert isinstance(error, DBAPIError)  # a driver error always makes one
        return postgres_error(error, self.url, what)

    def _quick_native(self, what: str, fn: Quick[T]) -> T:
        """:meth:`quick` in a native call: ``fn`` on one of the async engine's readers (its
        own autocommit connections, see :class:`~.native.Readers`), through
        :class:`~.native.SyncFace`. A dead connection is dropped and ``fn`` run again, once."""
        for attempt in range(2):
            try:
                with self.native.readers().connection() as (pg, info):
                    try:
                        return fn(SyncFace(pg), info)  # type: ignore[arg-type]
                    except psycopg.Error as exc:
                        if attempt or not (pg.broken or pg.closed):
                            raise self._driver_error(exc, what) from exc
            except (DBAPIError, PoolTimeoutError) as exc:
                raise postgres_error(exc, self.url, what) from exc
            except psycopg.Error as exc:  # opening a reader
                raise self._driver_error(exc, what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _connect_raw(self, what: str) -> psycopg.Connection[Any]:
        """The store's own read connection (the caller holds ``raw_lock``)."""
        pg = self._raw_conn
        if pg is None or self._raw_pid != os.getpid():
            with map_postgres_errors(self.url, what):
                pg = self.detached_connection()
            self._raw_conn, self._raw_pid, self._raw_info = pg, os.getpid(), {}
        return pg

    def detached_connection(self) -> psycopg.Connection[Any]:
        """A new autocommit connection of the engine's (its connect arguments and
        pgvector's codec), taken out of the pool: the caller closes it."""
        fairy = self.engine.raw_connection()
        pg = fairy.dbapi_connection
        fairy.detach()  # the caller's now: never returned to the pool
        assert isinstance(pg, psycopg.Connection)
        pg.autocommit = True
        return pg

    # -- listening -------------------------------------------------------------------

    def notify_installed(self, install: bool) -> bool:
        """Whether the triggers that notify listeners are in the database; with
        ``install``, create them when missing (under the migration lock)."""
        def step(conn: Connection) -> bool:
            if conn.execute(text(NOTIFY_TRIGGERS_SQL)).scalar() == 2:
                return True
            if not install:
                return False
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATE_LOCK})
            if conn.execute(text(NOTIFY_TRIGGERS_SQL)).scalar() != 2:
                for statement in NOTIFY_DDL:
                    conn.exec_driver_sql(statement)
                logger.info("installed the LISTEN/NOTIFY triggers in %s", self.url)
            return True

        return self.run("installing the LISTEN/NOTIFY triggers", step)

    def listen(self, *, install: bool, staleness: float) -> bool:
        """Start the listener (see :mod:`.listener`); False when the triggers are missing
        and may not be installed (reads then check the working-set version each time)."""
        if not self.notify_installed(install):
            logger.warning(
                "%s has no LISTEN/NOTIFY triggers and the store may not migrate: reads check "
                "the working-set version each time; open one store with listen=True and "
                "migrate=True (as a role that owns the tables) to install them", self.url)
            return False
        self.heard.listener = Listener(self.detached_connection, self.url, staleness=staleness)
        return True

    def _drop_raw(self) -> None:
        """Close the store's own read connection (one inherited through ``fork`` is only
        let go of: closing it would end the parent's session)."""
        pg, self._raw_conn = self._raw_conn, None
        if pg is not None and self._raw_pid == os.getpid():
            try:
                pg.close()
            except psycopg.Error as exc:
                logger.debug("closing the read connection of %s: %s", self.url, exc)

    # -- what the shared SQL roles call ----------------------------------------------

    def reading(self, what: str, fn: Callable[[Connection], T]) -> T:
        """:meth:`read`."""
        return self.read(what, fn)

    def writing(self, what: str, fn: Callable[[Connection], T]) -> T:
        """:meth:`run`."""
        return self.run(what, fn)

    def writing_as(self, robot: str, what: str, fn: Callable[[Connection, int], T]) -> T:
        """:meth:`run` of ``fn(conn, robot id)``, the robot registered first if new."""
        rid = self.robot_id(robot)
        return self.run(what, lambda conn: fn(conn, rid))

    def log_lines(self, conn: Connection, lines: Sequence[LogLine]) -> None:
        """Append (op, robot id, memory id, key, detail) lines in one statement, in order."""
        if not lines:
            return
        # The lines as one JSON text: psycopg dumps text[] parameters element by element.
        conn.execute(text(
            "INSERT INTO operations(op, robot_id, memory_id, key, detail) "
            "SELECT e.v->>0, CAST(e.v->>1 AS bigint), CAST(e.v->>2 AS bigint), e.v->>3, e.v->4 "
            "FROM jsonb_array_elements(CAST(:lines AS jsonb)) WITH ORDINALITY AS e(v, ord) "
            "ORDER BY e.ord"),
            {"lines": json.dumps([[op, rid, mid, key, detail or {}]
                                  for op, rid, mid, key, detail in lines])})

    # -- schema ----------------------------------------------------------------------

    @staticmethod
    def _version(conn: Connection) -> int:
        # pg_class read by a query, not to_regclass(): a lookup without a lock may answer
        # from the session's cache, which a transaction that waited for the migration
        # lock has not refreshed (a table created meanwhile would look missing).
        if conn.execute(text(
                "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                "ON n.oid = c.relnamespace WHERE c.relname = 'htm_meta' "
                "AND n.nspname = ANY(current_schemas(false))")).first() is None:
            return 0
        value = conn.execute(text("SELECT value FROM htm_meta WHERE key = 'schema_version'")
                             ).scalar()
        return int(value) if value is not None else 0

    def schema_version(self) -> int:
        """The schema version in the database (0 when empty)."""
        return self.read("reading the schema version", self._version)

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
        (so it sees whatever the previous holder created). Behind a transaction-mode
        pooler the lock is the migration transaction's own, taken before anything is read.
        """
        def step(conn: Connection) -> int:
            current = self._version(conn)
            if not needs_migration(self.url, current, migrate=True):
                return current
            self._create_extension(conn)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[version]:
                    conn.exec_driver_sql(statement)
                self.set_meta(conn, "schema_version", str(version))
                self.log_lines(conn, [("migrate", None, None, None,
                                       {"from": version - 1, "to": version})])
                logger.info("migrated %s to schema version %d", self.url, version)
            return SCHEMA_VERSION

        with map_postgres_errors(self.url, "migrating the schema"), self.engine.connect() as conn:
            if self.pooler is not None:
                with conn.begin():
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATE_LOCK})
                    return step(conn)
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATE_LOCK})
            conn.commit()
            try:
                with conn.begin():
                    return step(conn)
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATE_LOCK})
                conn.commit()

    def close(self) -> None:
        """Release every pooled connection, the recall path's own and the listener's."""
        if self.heard.listener is not None:
            self.heard.listener.close()
        with self.raw_lock:
            self._drop_raw()
        self.native.close()
        self.engine.dispose()

    # -- meta ------------------------------------------------------------------------

    @staticmethod
    def meta(conn: Connection) -> dict[str, str]:
        """Every ``htm_meta`` entry."""
        return {str(k): str(v) for k, v in conn.execute(text("SELECT key, value FROM htm_meta"))}

    @staticmethod
    def set_meta(conn: Connection, key: str, value: str) -> None:
        """Write one ``htm_meta`` entry."""
        conn.execute(text("INSERT INTO htm_meta(key, value) VALUES (:k, :v) "
                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value"),
                     {"k": key, "v": value})

    def embedding_info(self) -> tuple[str, int] | None:
        """(embedder name, dimension) fixed for this store, or None before any vector."""
        return embedding_settings(self.read("reading the embedding settings", self.meta))

    # -- robots ----------------------------------------------------------------------

    def robot_ids(self, names: Sequence[str]) -> dict[str, int]:
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

            self._robot_ids.update(self.run("registering robots", register))
        return {n: self._robot_ids[n] for n in names}

    def robot_id(self, name: str) -> int:
        """The id of robot ``name``, registered if new."""
        return self.robot_ids([name])[name]

    def known_robot_id(self, conn: Connection, name: str) -> int | None:
        """The id of robot ``name`` if it is registered (never registers it)."""
        if name in self._robot_ids:
            return self._robot_ids[name]
        rid = conn.execute(text("SELECT id FROM robots WHERE name = :n"), {"n": name}).scalar()
        if rid is not None:
            self._robot_ids[name] = int(rid)
            return int(rid)
        return None

    def register_robot(self, name: str, working_memory_tokens: int | None) -> None:
        """Register ``name`` if new, recording the budget its ``HTM`` runs with when given."""
        rid = self.robot_id(name)
        if working_memory_tokens is not None:
            self.run("recording the working-memory budget", lambda conn: conn.execute(text(
                "UPDATE robots SET working_memory_tokens = :t "
                "WHERE id = :r AND working_memory_tokens IS DISTINCT FROM :t"),
                {"t": working_memory_tokens, "r": rid}))
