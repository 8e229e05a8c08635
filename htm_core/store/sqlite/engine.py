"""The SQLite database a store runs on: its connections and transactions, the schema gate
and migrations, ``htm_meta``, robot ids and the operations log (:class:`SQLiteDatabase`)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine, RootTransaction
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import StaticPool

from ...errors import (
    DatabaseCorruptError,
    DatabaseUnavailableError,
    DiskFullError,
    ReadOnlyError,
    StoreError,
    ValidationError,
)
from .._address import resolve_sqlite
from .._common import mask_url
from .._sql.parts import LogLine
from .._sql.schema import needs_migration
from ..base import SCHEMA_VERSION
from ..one_embedder import check_embedder
from ._errors import DRIVER_ERRORS, _driver_message, is_locked, map_sqlite_errors, sqlite_error
from ._schema import (
    _FTS_BATCH_KEY,
    _GATED_TRIGGERS,
    _HASH_INDEX,
    _HASH_INDEX_EXISTS,
    _MIGRATIONS,
)
from .files import (
    CommitCounter,
    count_commit,
    create_private,
    lost_commits,
    refuse_schemeless_server,
    writable,
)

T = TypeVar("T")

if TYPE_CHECKING:
    from ...jobs import JobQueue

logger = logging.getLogger("htm_core.store.sqlite")

#: ``htm_meta`` keys whose values are integers (anything else there is damage).
_NUMERIC_META = frozenset({"embedding_dim", "vector_generation", "schema_version",
                           "id_high_water", "window_generation", "commit_count",
                           "lost_commits"})


def default_sqlite_path() -> Path:
    """Where ``HTM()`` keeps its memory by default: ``<user data dir>/htm/htm.db``."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("htm", appauthor=False)) / "htm.db"


def sqlite_url(database: str | Path | None) -> str:
    """Normalise a path, ``:memory:`` or ``sqlite:///...`` URL into an SQLAlchemy URL."""
    if database is None:
        path = default_sqlite_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseUnavailableError(
                f"cannot create htm's data folder {path.parent}: {exc}; set HTM_DATABASE_URL "
                "or pass database_url") from exc
        return f"sqlite:///{path}"
    value = str(database)
    if value == ":memory:":
        return "sqlite://"
    refuse_schemeless_server(value)
    value = resolve_sqlite(value)
    if value.startswith("sqlite"):
        return value
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if scheme and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        raise ValidationError(
            f"unsupported database URL scheme {scheme!r} in {mask_url(value)}; use a file path, "
            "'sqlite:///path', ':memory:' or 'postgresql://user:password@host/database'")
    return f"sqlite:///{Path(value).expanduser()}"


#: Record the schema version, never lowering it.
_SET_VERSION = ("INSERT INTO htm_meta(key, value) VALUES ('schema_version', :v) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value "
                "WHERE CAST(htm_meta.value AS INTEGER) < CAST(excluded.value AS INTEGER)")


def use_wal(cur: sqlite3.Cursor, busy_timeout_ms: float) -> None:
    """Put the file in WAL mode, waiting (bounded) for a process that holds it.

    WAL mode is kept in the file, so once any process has set it the others only read it.
    Switching takes the file's exclusive lock, and SQLite does not always wait for it with
    the busy handler (several processes opening one new file at once): a locked switch is
    tried again until ``busy_timeout_ms`` has passed, then the lock error is raised.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            if cur.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_locked(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


class TransactionState(Protocol):
    """What a part caches about the database and puts back when a write does not commit."""

    def saved(self) -> object:
        """The cached state as it is before a write transaction."""
        ...

    def restore(self, saved: object) -> None:
        """Put back what :meth:`saved` returned (the write did not commit)."""
        ...


class SQLiteDatabase:
    """One SQLite file (or ``:memory:``): connections, transactions, schema, meta, robots, log.

    Opening it opens the file read-only when asked or when it cannot be written, refuses a
    schema it cannot use, migrates when allowed, gates the full-text triggers and checks
    for lost commits (see :class:`~htm_core.store.sqlite.SQLiteStore`).
    """

    def __init__(self, database: str | Path | None = None, *, busy_timeout_ms: int = 10_000,
                 migrate: bool = True, read_only: bool = False) -> None:
        self.raw_url = sqlite_url(database)
        self.url = mask_url(self.raw_url)
        self.memory_db = self.raw_url in ("sqlite://", "sqlite:///:memory:")
        self.busy_timeout_ms = busy_timeout_ms
        #: Held by every read and write of this process's store.
        self.lock = threading.RLock()
        self._robot_ids: dict[str, int] = {}
        #: Parts whose caches a write that does not commit puts back.
        self._states: list[TransactionState] = []
        #: Why the store is read-only (None: writable); see :meth:`_open_version`.
        self.read_only: str | None = None
        self._immutable = False
        self._skip_warned = False
        #: The connection of the raw reads, kept out of the pool; see :meth:`reader`.
        self._reader_conn: sqlite3.Connection | None = None
        self._reader_pid = 0
        #: Whether the full-text insert triggers stand aside for batches (set on open:
        #: see :meth:`_gate_fts_trigger`).
        self.fts_batched = False
        self._bulk_depth = 0  # nesting of bulk_load() blocks
        version = self._open_version(read_only)
        writable = self.read_only is None
        if needs_migration(self.url, version, migrate=migrate and writable):
            self.migrate()
        self.fts_batched = self._gate_fts_trigger(upgrade=migrate and writable)
        self._check_lost_commits()
        if migrate and writable:
            try:
                self.build_hash_index(reason="left by a bulk load that did not finish")
            except StoreError as exc:  # a read-only file: cache lookups scan until it is built
                logger.warning("could not rebuild the content_hash index of %s: %s", self.url, exc)

    def keep_state(self, part: TransactionState) -> None:
        """Have a write that does not commit put back ``part``'s cached state."""
        self._states.append(part)

    # -- engine and transactions -----------------------------------------------------

    def _make_engine(self) -> Engine:
        self._close_reader()
        self._commits = CommitCounter(None if self.memory_db else self.file())
        kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False,
                                                   "timeout": self.busy_timeout_ms / 1000}}
        if self.memory_db:
            kwargs["poolclass"] = StaticPool
        elif self.read_only is None:
            path = self.file()
            if path and path != ":memory:":
                try:
                    Path(path).parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise DatabaseUnavailableError(
                        f"cannot create the folder for SQLite database {self.url}: {exc}; "
                        "check the path (a parent may be a file) and its permissions") from exc
                create_private(Path(path))
        if self.read_only is not None and not self.memory_db:
            uri = f"{Path(self.file()).resolve().as_uri()}?" + (
                "immutable=1" if self._immutable else "mode=ro")
            timeout = self.busy_timeout_ms / 1000
            kwargs["creator"] = lambda: sqlite3.connect(uri, uri=True, timeout=timeout,
                                                        check_same_thread=False)
        engine = create_engine(self.raw_url, **kwargs)
        busy = self.busy_timeout_ms
        memory_db = self.memory_db or self.read_only is not None

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={int(busy)}")
            if not memory_db:
                use_wal(cur, busy)
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            if conn.get_execution_options().get("htm_write"):
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.exec_driver_sql("BEGIN")

        return engine

    @contextmanager
    def write(self, *, cache_kib: int | None = None, what: str = "write",
              landed: Callable[[sqlite3.Connection], bool] | None = None,
              after: Callable[[Any], None] | None = None
              ) -> Iterator[Connection]:
        """A write transaction: all or nothing. Waits (bounded) for another process's lock.

        ``cache_kib`` enlarges the page cache for this transaction only (a large batch then
        never spills to the WAL before its commit). What the store caches (robot ids, the
        vector generation) is put back when it does not commit; a commit is counted.

        ``landed`` guards against an error hiding a commit: SQLite can fail ``COMMIT`` (a
        full disk, an I/O error) after the commit record reached the WAL. Then ``landed``
        is asked, on a fresh connection, whether the transaction is in the database; if
        so, it counts as done (with a warning): an error always means nothing was written.

        ``after`` is called with the connection once the transaction committed, before
        the connection goes back to the pool (it must not raise).
        """
        if self.read_only is not None:
            raise ReadOnlyError(
                f"SQLite store {self.url} is open read-only ({self.read_only}); {what} needs "
                "a writable store: open it without read_only=True on a writable file and disk")
        with self.lock:
            cached = dict(self._robot_ids), [part.saved() for part in self._states]
            committed = False
            conn = self._engine.connect().execution_options(htm_write=True)
            raw = conn.connection.dbapi_connection if cache_kib else None
            normal_cache = None
            try:
                if raw is not None:
                    normal_cache = raw.execute("PRAGMA cache_size").fetchone()[0]
                    raw.execute(f"PRAGMA cache_size = -{int(cache_kib or 0)}")
                trans = self._begin(conn)
                try:
                    yield conn
                    count = 0 if self.memory_db else count_commit(conn)
                except BaseException:
                    trans.rollback()
                    raise
                self._commit(trans, what, landed)
                committed = True
                self._commits.record(count)
                if after is not None:
                    after(conn.connection.dbapi_connection)
            except DRIVER_ERRORS as exc:
                raise sqlite_error(exc, self.url, what) from exc
            finally:
                if not committed:
                    self._robot_ids = cached[0]
                    for part, saved in zip(self._states, cached[1], strict=True):
                        part.restore(saved)
                if raw is not None and normal_cache is not None:
                    raw.execute(f"PRAGMA cache_size = {int(normal_cache)}")
                conn.close()

    def _begin(self, conn: Connection) -> RootTransaction:
        """Begin the write transaction, waiting (bounded) for another process's lock."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                return conn.begin()
            except OperationalError as exc:
                if is_locked(exc) and time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                raise

    def _commit(self, trans: RootTransaction, what: str,
                landed: Callable[[sqlite3.Connection], bool] | None) -> None:
        """Commit; a failed COMMIT whose transaction ``landed`` all the same counts as done."""
        try:
            trans.commit()
        except DRIVER_ERRORS as exc:
            if landed is None or not self._committed_anyway(landed):
                raise
            logger.warning("SQLite reported %r committing a %s on %s, but the "
                           "transaction is in the database; it counts as written",
                           _driver_message(exc), what, self.url)

    def _check_lost_commits(self) -> None:
        """Warn (and note in ``htm_meta``, for ``htm check``) when ``<db>-commits`` counts
        write transactions the database does not hold: its ``-wal`` was lost, or the file
        was replaced by an older copy."""
        with self.read("reading the commit count") as conn:
            lost = lost_commits(self.file(), conn.connection.dbapi_connection)
        if lost <= 0:
            return
        logger.warning("SQLite database %s lacks the last %d write transactions acknowledged "
                       "on it (its -wal file was lost, or the file was replaced by an older "
                       "copy); the memories they wrote are gone: restore them from a backup, "
                       "and run `htm check`", self.url, lost)
        def note(conn: Connection) -> None:  # skipped on a read-only store or a full disk
            noted, held = (int(self.meta(conn, k) or 0) for k in ("lost_commits",
                                                                    "commit_count"))
            self.set_meta(conn, "lost_commits", str(noted + lost))
            self.set_meta(conn, "commit_count", str(held + lost))
        self.optional_write("the note of lost transactions",
                            lambda: self.writing("noting lost transactions", note), lambda: None)

    def _committed_anyway(self, landed: Callable[[sqlite3.Connection], bool]) -> bool:
        """Whether a transaction whose COMMIT raised is in the database after all."""
        self._close_reader()  # like the pooled connections, it may hold a stale view of the WAL index
        self._engine.dispose()  # pooled connections may hold a stale view of the WAL index
        try:
            probe = sqlite3.connect(f"{Path(self.file()).resolve().as_uri()}?mode=ro", uri=True,
                                    timeout=self.busy_timeout_ms / 1000)
            try:
                return landed(probe)
            finally:
                probe.close()
        except sqlite3.Error:
            return False

    def file(self) -> str:
        return self.raw_url.split("///", 1)[-1].split("?", 1)[0]

    def _open_version(self, read_only: bool) -> int:
        """Open the database and read its schema version, read-only when asked or needed.

        A file that cannot be written (read-only file, folder or medium; a full disk, where
        SQLite cannot even create its ``-shm`` file) is opened read-only with one warning:
        reads work, writes raise :class:`~htm_core.errors.ReadOnlyError`. Without a
        ``-wal`` file (nobody is writing it) a file whose folder is not writable is opened
        ``immutable`` (SQLite then needs no ``-shm``).
        """
        if read_only and not self.memory_db:
            self.read_only = "opened with read_only=True"
            return self._reopen_read_only()
        path = Path(self.file())
        if not self.memory_db and path.is_file() and not writable(path):
            return self._fall_back_read_only("the file or its folder cannot be written")
        self._engine = self._make_engine()
        try:
            return self.schema_version()
        except (ReadOnlyError, DiskFullError) as error:
            if self.memory_db or not path.is_file():
                raise
            self._engine.dispose()
            return self._fall_back_read_only(
                "the disk is full" if isinstance(error, DiskFullError) else str(error))

    def _fall_back_read_only(self, why: str) -> int:
        self.read_only = why
        logger.warning("SQLite database %s cannot be written (%s); opened it read-only: "
                       "recall, retrieve, context and export work, writes raise "
                       "ReadOnlyError", self.url, why)
        return self._reopen_read_only()

    def _reopen_read_only(self) -> int:
        wal = Path(self.file() + "-wal")
        for immutable in (False, True):
            if immutable and wal.exists() and wal.stat().st_size > 0:
                break  # a live WAL: another process writes, immutable would miss its commits
            self._immutable = immutable
            self._engine = self._make_engine()
            try:
                return self.schema_version()
            except StoreError as exc:
                self._engine.dispose()
                last = exc
        raise last

    def _skip_write(self, what: str, error: StoreError | None = None) -> None:
        """Log once that ``what`` (statistics a read would write) is not being saved."""
        if not self._skip_warned:
            self._skip_warned = True
            why = self.read_only or str(error)
            logger.warning("%s of %s are not saved (%s); reads keep working", what,
                           self.url, why)

    def optional_write(self, what: str, write: Callable[[], T], skipped: Callable[[], T]) -> T:
        """Run ``write`` (statistics a read saves: access counts, working-memory membership);
        on a read-only store or a full disk, log once and return ``skipped()`` instead."""
        if self.read_only is not None:
            self._skip_write(what)
            return skipped()
        try:
            return write()
        except (DiskFullError, ReadOnlyError) as exc:
            self._skip_write(what, exc)
            return skipped()

    def reader(self) -> sqlite3.Connection:
        """The connection the raw reads run on (the caller holds the lock).

        One connection of the store's own, opened by the engine (so with its pragmas) and
        taken out of the pool: a pool checkout and return cost four times a small read, and
        a recall makes several. A process made by ``fork`` opens its own.
        """
        conn = self._reader_conn
        if conn is None or self._reader_pid != os.getpid():
            fairy = self._engine.raw_connection()
            conn = fairy.dbapi_connection  # type: ignore[assignment]
            if self.memory_db:
                fairy.close()  # the one shared connection stays open in its pool
            else:
                fairy.detach()  # ours now: closed by _close_reader, never returned
            self._reader_conn, self._reader_pid = conn, os.getpid()
        assert conn is not None
        return conn

    def _close_reader(self) -> None:
        """Close the raw reads' connection (a shared in-memory one only lets go of it) and
        the commit counter's file."""
        if hasattr(self, "_commits"):
            self._commits.close()
        conn, self._reader_conn = self._reader_conn, None
        if conn is not None and not self.memory_db and self._reader_pid == os.getpid():
            try:
                conn.close()
            except sqlite3.Error as exc:
                logger.debug("closing the read connection of %s: %s", self.url, exc)

    @contextmanager
    def read(self, what: str = "read") -> Iterator[Connection]:
        """A read connection; driver errors become htm's (``what`` names the read)."""
        with self.lock, map_sqlite_errors(self.url, what), self._engine.connect() as conn:
            yield conn

    # -- the Database part of the shared SQL roles ------------------------------------

    def reading(self, what: str, fn: Callable[[Connection], T]) -> T:
        with self.read(what) as conn:
            return fn(conn)

    def writing(self, what: str, fn: Callable[[Connection], T]) -> T:
        with self.write(what=what) as conn:
            return fn(conn)

    def writing_as(self, robot: str, what: str, fn: Callable[[Connection, int], T]) -> T:
        with self.write(what=what) as conn:
            return fn(conn, self.robot_id(conn, robot))

    def log_lines(self, conn: Connection, lines: Sequence[LogLine]) -> None:
        for op, rid, mid, key, detail in lines:
            self.log(conn, op, robot_id=rid, memory_id=mid, key=key, detail=detail)

    # -- schema ----------------------------------------------------------------------

    @staticmethod
    def _version_in(conn: Connection) -> int:
        """The schema version ``conn`` sees (0 for a new file)."""
        exists = conn.execute(
            text("SELECT 1 FROM sqlite_master WHERE type='table' AND name='htm_meta'")
        ).first()
        if not exists:
            return 0
        row = conn.execute(text("SELECT value FROM htm_meta WHERE key='schema_version'")).first()
        return int(row[0]) if row else 0

    def schema_version(self) -> int:
        with map_sqlite_errors(self.url, "reading the schema version"), \
                self._engine.connect() as conn:
            return self._version_in(conn)

    def migrate(self) -> int:
        """Create or upgrade the schema; never drops anything.

        Safe when many processes open one file at once: the version is read inside the
        write transaction (``BEGIN IMMEDIATE`` holds the write lock from its start), so one
        process makes every step from the version it finds to the current one, all in that
        one transaction, and the others then find the schema current. The stored version
        is never lowered.
        """
        with self.write(what="migrating the schema") as conn:
            current = self._version_in(conn)
            if needs_migration(self.url, current, migrate=True):
                for version in range(current + 1, SCHEMA_VERSION + 1):
                    for step in _MIGRATIONS[version]:
                        if isinstance(step, str):
                            conn.exec_driver_sql(step)
                        else:
                            step(conn)
                    self.log(conn, "migrate", robot_id=None, detail={"to": version})
                conn.execute(text(_SET_VERSION), {"v": str(SCHEMA_VERSION)})
                logger.info("migrated %s from schema version %d to %d", self.url, current,
                            SCHEMA_VERSION)
        self.fts_batched = self._gate_fts_trigger(upgrade=True)
        return SCHEMA_VERSION

    def _gate_fts_trigger(self, *, upgrade: bool) -> bool:
        """Whether the full-text insert triggers (FTS and CJK trigram) stand aside for
        batches (see ``_FTS_BATCH_KEY``).

        A file written before a trigger had that condition gets the new trigger here, in
        one logged write transaction, unless ``upgrade`` is False or the file cannot be
        written; the add path then leaves indexing to the old per-row triggers. Both kinds
        of trigger index every row any writer inserts, so either kind of file stays
        readable and writable by older htm versions.
        """
        query = text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN "
                     "('memories_fts_ai', 'memories_cjk_ai')")

        def stale(conn: Connection) -> list[str]:
            found = {str(name): str(sql) for name, sql in conn.execute(query)}
            return [name for name in _GATED_TRIGGERS if _FTS_BATCH_KEY not in found.get(name, "")]

        with self.read() as conn:
            if not stale(conn):
                return True
        if not upgrade:
            return False
        try:
            with self.write() as conn:
                names = stale(conn)
                for name in names:
                    conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
                    conn.exec_driver_sql(_GATED_TRIGGERS[name][0])
                if names:
                    self.log(conn, "migrate", robot_id=None,
                              detail={_GATED_TRIGGERS[n][1]: "batched" for n in names})
        except StoreError as exc:
            logger.warning("kept the per-row full-text triggers of %s: %s", self.url, exc)
            return False
        logger.info("full-text indexing of %s now runs once per batch", self.url)
        return True

    def build_hash_index(self, *, reason: str) -> None:
        """Create the embedding-cache index if it is missing (logged, with ``reason``)."""
        with self.read() as conn:
            present = conn.execute(text(_HASH_INDEX_EXISTS)).first()
        if present is not None:
            return
        with self.write() as conn:
            conn.exec_driver_sql(_HASH_INDEX)
            self.log(conn, "bulk_load", robot_id=None, detail={"index": "built", "reason": reason})

    # -- meta ------------------------------------------------------------------------

    def meta(self, conn: Connection, key: str) -> str | None:
        row = conn.execute(text("SELECT value FROM htm_meta WHERE key = :k"), {"k": key}).first()
        value = None if row is None else str(row[0])
        if value is not None and key in _NUMERIC_META and not value.lstrip("-").isdigit():
            raise DatabaseCorruptError(
                f"SQLite database {self.url} holds {key} = {value!r}, not a number; the "
                "database is damaged: run `htm check`, then restore it from an export")
        return value

    def set_meta(self, conn: Connection, key: str, value: str) -> None:
        conn.execute(
            text("INSERT INTO htm_meta(key, value) VALUES (:k, :v) "
                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
            {"k": key, "v": value},
        )

    def embedding_info(self) -> tuple[str, int] | None:
        with self.read() as conn:
            name = self.meta(conn, "embedder")
            dim = self.meta(conn, "embedding_dim")
        if name is None or dim is None:
            return None
        return name, int(dim)

    def check_embedding(self, conn: Connection, embedder: str, dim: int) -> None:
        cur = conn.connection.cursor()  # one raw query: this runs on every add
        try:
            meta = dict(cur.execute("SELECT key, value FROM htm_meta WHERE key IN "
                                    "('embedder', 'embedding_dim')").fetchall())
        finally:
            cur.close()
        stored_dim = meta.get("embedding_dim")
        if stored_dim is None:
            self.set_meta(conn, "embedder", embedder)
            self.set_meta(conn, "embedding_dim", str(dim))
            return
        check_embedder(meta.get("embedder") or "", int(stored_dim), embedder, dim)

    # -- robots ----------------------------------------------------------------------

    def robot_id(self, conn: Connection, name: str) -> int:
        rid = self._robot_ids.get(name)
        if rid is not None:
            return rid
        row = conn.execute(text("SELECT id FROM robots WHERE name = :n"), {"n": name}).first()
        if row is None:
            row = conn.execute(
                text("INSERT INTO robots(name, created_at, last_active) VALUES (:n, :t, :t) "
                     "ON CONFLICT(name) DO UPDATE SET name = excluded.name RETURNING id"),
                {"n": name, "t": time.time()},
            ).first()
        assert row is not None
        self._robot_ids[name] = int(row[0])
        return int(row[0])

    def known_robot_id(self, name: str) -> int | None:
        if name in self._robot_ids:
            return self._robot_ids[name]
        with self.read() as conn:
            row = conn.execute(text("SELECT id FROM robots WHERE name = :n"), {"n": name}).first()
        if row is not None:
            self._robot_ids[name] = int(row[0])
            return int(row[0])
        return None

    def ensure_robot(self, name: str, *, working_memory_tokens: int | None = None) -> None:
        """Write the robot (and its working-memory budget, when given) unless it is there;
        a robot new to a read-only store writes nothing."""
        if self.read_only is not None:
            return
        with self.write() as conn:
            rid = self.robot_id(conn, name)
            if working_memory_tokens is not None:
                conn.execute(text("UPDATE robots SET working_memory_tokens = :t "
                                  "WHERE id = :r AND working_memory_tokens IS NOT :t"),
                             {"t": working_memory_tokens, "r": rid})

    # -- log -------------------------------------------------------------------------

    def log(self, conn: Connection, op: str, *, robot_id: int | None, memory_id: int | None = None,
            key: str | None = None, detail: dict[str, Any] | None = None) -> None:
        conn.execute(
            text("INSERT INTO operations(at, op, robot_id, memory_id, key, detail) "
                 "VALUES (:at, :op, :r, :m, :k, :d)"),
            {"at": time.time(), "op": op, "r": robot_id, "m": memory_id, "k": key,
             "d": json.dumps(detail or {})},
        )

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (write transactions through it take the lock up front)."""
        return self._engine

    def open_job_queue(self) -> JobQueue:
        """The enrichment job queue on this store's database (see ``LongTermStore``)."""
        from ...jobs import job_queue_on

        return job_queue_on(self._engine)

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """``SQLiteStore.bulk_load``'s block: the embedding-cache index is dropped when the
        outermost block starts and built when it ends (also with an error)."""
        with self.lock:
            if self._bulk_depth == 0:
                with self.write() as conn:
                    conn.exec_driver_sql("DROP INDEX IF EXISTS memories_hash")
                    self.log(conn, "bulk_load", robot_id=None, detail={"index": "dropped"})
            self._bulk_depth += 1
        try:
            yield
        finally:
            with self.lock:
                self._bulk_depth -= 1
                if self._bulk_depth == 0:
                    self.build_hash_index(reason="end of bulk load")

    def close(self) -> None:
        """Close the read connection and every pooled one."""
        with self.lock:
            self._close_reader()
        self._engine.dispose()
