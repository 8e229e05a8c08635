"""The embedded long-term store: one SQLite file (or ``:memory:``), no server.

- WAL journal, a busy timeout, foreign keys on; writes take the write lock up front
  (``BEGIN IMMEDIATE``) so concurrent writers queue instead of failing half-way.
- Full text: an FTS5 table (porter stemming, unicode61) kept in step by triggers, ranked
  by bm25; ``add_many`` indexes its new rows with one statement per batch while the insert
  trigger stands aside (see ``_FTS_BATCH_KEY``). User text is reduced to quoted words and
  phrases (:func:`~htm_core.store._text.parse_query`) before it reaches ``MATCH``. A
  second FTS5 table with the trigram tokenizer holds the memories with CJK characters,
  whose substrings a CJK query looks for.
- Vectors: float32 BLOBs in the ``memories`` table and an in-process numpy index
  (:class:`~htm_core.store.vector_index.VectorIndex`) built on open and kept in step
  with adds, forgets, restores and purges. New rows written by other processes are
  picked up before each vector search. Large stores add an HNSW graph in front of it
  (:class:`~htm_core.store.ann.ApproximateIndex`), persisted beside the database file
  as ``<file>-vectors.usearch``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import StaticPool

from ..clock import to_timestamp, utc_from_timestamp
from ..errors import (
    DatabaseUnavailableError,
    DimensionMismatchError,
    DuplicateKeyError,
    NotFoundError,
    SchemaError,
    StoreError,
    ValidationError,
)
from ..models import Memory, Operation, Robot
from ._coherence import Merged, as_dict, merge_readd, touch_detail
from ._common import chunks, informative_terms, mask_url
from ._sqlite_working import SQLiteWorkingSet
from ._text import CJK_GLOB, merge_hits, parse_query, tag_patterns
from ._vectors import (
    CHUNK_SQLITE,
    FAILED_COUNT,
    FAILURES_DDL,
    NOT_FAILED,
    EmbeddingFailure,
    batch_embedder,
    check_embedder,
    clear_failures,
    list_failures,
    mark_failures,
)
from .ann import ApproximateIndex, make_index
from .base import (
    SCHEMA_VERSION,
    AddResult,
    ArmQuery,
    Brief,
    NewMemory,
    SearchFilters,
    StoreCounts,
    WorkingChange,
    WorkingResult,
    like_prefix,
)
from .vector_index import VectorIndex, normalise

if TYPE_CHECKING:
    from ..enrich.jobs import JobQueue

__all__ = ["SQLiteStore", "default_sqlite_path", "sqlite_url"]

logger = logging.getLogger(__name__)

#: While this ``htm_meta`` key exists the FTS insert trigger stands aside. The add path sets
#: it inside its write transaction, inserts a batch of rows, indexes the whole batch with one
#: ``INSERT INTO memories_fts ... SELECT`` and deletes the key again before committing, so
#: the key is never committed and every other writer (an older htm, the sqlite3 shell) keeps
#: the trigger's per-row indexing. An FTS5 insert run from a trigger costs about as much as
#: the rest of the row; run as one statement per batch it is almost free.
_FTS_BATCH_KEY = "fts_batch_insert"

_FTS_INSERT_TRIGGER = f"""CREATE TRIGGER IF NOT EXISTS memories_fts_ai AFTER INSERT ON memories
        WHEN NOT EXISTS (SELECT 1 FROM htm_meta WHERE key = '{_FTS_BATCH_KEY}') BEGIN
        INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END"""

#: A batch of at least this many records gets a page cache of _LARGE_BATCH_CACHE_KIB for its
#: transaction (the default 2 MB spills dirty pages of a 1,000-row batch to the WAL early).
_LARGE_BATCH = 256
_LARGE_BATCH_CACHE_KIB = 32_768

#: The index behind the embedding cache (``find_embedding(s)``). Its keys are random, so each
#: batch dirties pages all over it; ``bulk_load`` builds it once at the end instead.
_HASH_INDEX = "CREATE INDEX IF NOT EXISTS memories_hash ON memories(content_hash, embedder)"

_SCHEMA_V1 = [
    """CREATE TABLE IF NOT EXISTS htm_meta (
        key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS robots (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        created_at REAL NOT NULL,
        last_active REAL)""",
    """CREATE TABLE IF NOT EXISTS memories (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        robot_id INTEGER NOT NULL REFERENCES robots(id),
        importance REAL NOT NULL DEFAULT 1.0 CHECK (importance >= 0 AND importance <= 10),
        token_count INTEGER NOT NULL CHECK (token_count >= 0),
        created_at REAL NOT NULL,
        last_accessed REAL NOT NULL,
        access_count INTEGER NOT NULL DEFAULT 0,
        metadata TEXT NOT NULL DEFAULT '{}',
        embedding BLOB,
        embedder TEXT,
        forgotten_at REAL)""",
    "CREATE INDEX IF NOT EXISTS memories_created_at ON memories(created_at)",
    _HASH_INDEX,
    "CREATE INDEX IF NOT EXISTS memories_robot ON memories(robot_id)",
    """CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
        content, content='memories', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2')""",
    _FTS_INSERT_TRIGGER,
    """CREATE TRIGGER IF NOT EXISTS memories_fts_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content)
        VALUES ('delete', old.id, old.content); END""",
    """CREATE TRIGGER IF NOT EXISTS memories_fts_au AFTER UPDATE OF content ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
        INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END""",
    """CREATE TABLE IF NOT EXISTS tags (
        id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)""",
    """CREATE TABLE IF NOT EXISTS memory_tags (
        memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        tag_id INTEGER NOT NULL REFERENCES tags(id),
        PRIMARY KEY (memory_id, tag_id)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS memory_tags_tag ON memory_tags(tag_id)",
    """CREATE TABLE IF NOT EXISTS working_memory (
        robot_id INTEGER NOT NULL REFERENCES robots(id),
        memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        added_at REAL NOT NULL,
        PRIMARY KEY (robot_id, memory_id)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS operations (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        op TEXT NOT NULL,
        robot_id INTEGER,
        memory_id INTEGER,
        key TEXT,
        detail TEXT NOT NULL DEFAULT '{}')""",
    "CREATE INDEX IF NOT EXISTS operations_at ON operations(at)",
]

#: Schema version 2, coherence part: per-robot working-memory item state (the robot's own
#: last access and count, entry and access order) so a restart restores the exact order; a
#: per-robot working-set version every membership change bumps; the id high-water mark
#: (ids are never reused: the purge log of a v1 file seeds it).
_V2_COHERENCE = [
    "ALTER TABLE working_memory ADD COLUMN last_accessed REAL",
    "ALTER TABLE working_memory ADD COLUMN access_count INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE working_memory ADD COLUMN seq INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE working_memory ADD COLUMN access_seq INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE robots ADD COLUMN working_version INTEGER NOT NULL DEFAULT 0",
    # Backfill through an indexed temporary table: O(n log n) for a large working memory.
    """CREATE TEMP TABLE htm_v2_order AS SELECT w.robot_id, w.memory_id,
        m.last_accessed AS la, m.access_count AS n,
        row_number() OVER (PARTITION BY w.robot_id ORDER BY w.added_at, w.memory_id) AS s,
        row_number() OVER (PARTITION BY w.robot_id ORDER BY m.last_accessed, w.memory_id) AS a
        FROM working_memory w JOIN memories m ON m.id = w.memory_id""",
    "CREATE UNIQUE INDEX temp.htm_v2_order_key ON htm_v2_order(robot_id, memory_id)",
    """UPDATE working_memory SET (last_accessed, access_count, seq, access_seq) =
        (SELECT la, n, s, a FROM htm_v2_order o
         WHERE o.robot_id = working_memory.robot_id AND o.memory_id = working_memory.memory_id)
        WHERE EXISTS (SELECT 1 FROM htm_v2_order o WHERE o.robot_id = working_memory.robot_id
                      AND o.memory_id = working_memory.memory_id)""",
    "DROP TABLE temp.htm_v2_order",
    """INSERT OR IGNORE INTO htm_meta(key, value)
        SELECT 'id_high_water', CAST(max(coalesce((SELECT max(memory_id) FROM operations), 0),
                                         coalesce((SELECT max(id) FROM memories), 0)) AS TEXT)""",
]

#: Schema version 2, this branch's part: the marks of memories whose embedding failed.
_V2_VECTORS = [FAILURES_DDL.format(id_type="INTEGER", time_type="REAL")]

#: Version 2, full text: CJK memories (those holding a Chinese, Japanese or Korean
#: character) are copied into a trigram index, so a CJK query finds its substrings
#: (``_text``'s rules); existing ones are copied in.
_V2_FTS = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS memories_cjk USING fts5(content, tokenize='trigram')",
    f"""CREATE TRIGGER IF NOT EXISTS memories_cjk_ai AFTER INSERT ON memories
        WHEN new.content GLOB '{CJK_GLOB}' BEGIN
        INSERT INTO memories_cjk(rowid, content) VALUES (new.id, new.content); END""",
    """CREATE TRIGGER IF NOT EXISTS memories_cjk_ad AFTER DELETE ON memories BEGIN
        DELETE FROM memories_cjk WHERE rowid = old.id; END""",
    f"""CREATE TRIGGER IF NOT EXISTS memories_cjk_au AFTER UPDATE OF content ON memories BEGIN
        DELETE FROM memories_cjk WHERE rowid = old.id;
        INSERT INTO memories_cjk(rowid, content) SELECT new.id, new.content
        WHERE new.content GLOB '{CJK_GLOB}'; END""",
    f"""INSERT INTO memories_cjk(rowid, content) SELECT id, content FROM memories
        WHERE content GLOB '{CJK_GLOB}' AND id NOT IN (SELECT rowid FROM memories_cjk)""",
    # Tag filters compare lower(name) (``_text.fold_tag``).
    "CREATE INDEX IF NOT EXISTS tags_name_folded ON tags(lower(name))",
]

_MIGRATIONS: dict[int, list[str]] = {
    1: _SCHEMA_V1, 2: [*_V2_COHERENCE, *_V2_VECTORS, *_V2_FTS]}

_MEMORY_COLUMNS = (
    "m.id, m.key, m.content, m.content_hash, r.name AS robot, m.importance, m.token_count, "
    "m.created_at, m.last_accessed, m.access_count, m.metadata, m.embedder, m.forgotten_at"
)


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
    if value.startswith("sqlite"):
        return value
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if scheme and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        raise ValidationError(
            f"unsupported database URL scheme {scheme!r} in {mask_url(value)}; use a file path, "
            "'sqlite:///path', ':memory:' or 'postgresql://user:password@host/database'")
    return f"sqlite:///{Path(value).expanduser()}"


def _unit_rows(records: Sequence[NewMemory]) -> np.ndarray:
    """The records' embeddings (in order, skipping None) as unit float32 rows, at once."""
    vectors = [r.embedding for r in records if r.embedding is not None]
    if not vectors:
        return np.zeros((0, 0), dtype=np.float32)
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        bad = [r for r in records if r.embedding is not None][int(np.argmin(finite))]
        raise DimensionMismatchError(f"embedding for key {bad.key!r} contains NaN or infinity")
    return matrix


def _is_locked(exc: BaseException) -> bool:
    return "locked" in str(exc).lower() or "busy" in str(exc).lower()


class SQLiteStore(SQLiteWorkingSet):
    """The embedded default backend. See the module docstring for how it works.

    Args:
        database: a file path, ``":memory:"``, an ``sqlite:///`` URL, or None for the
            default file under the user data directory.
        busy_timeout_ms: how long a writer waits for another process's write lock.
        migrate: create or upgrade the schema on open (the default for SQLite).
    """

    backend = "sqlite"

    def __init__(
        self,
        database: str | Path | None = None,
        *,
        busy_timeout_ms: int = 10_000,
        migrate: bool = True,
    ) -> None:
        self._url = sqlite_url(database)
        self.url = mask_url(self._url)
        self._memory_db = self._url in ("sqlite://", "sqlite:///:memory:")
        self._busy_timeout_ms = busy_timeout_ms
        self._lock = threading.RLock()
        self._robot_ids: dict[str, int] = {}
        self._index: VectorIndex | None = None
        # Vector changes on rows the index has already seen (vectors filled in later,
        # forget, restore, purge) bump ``vector_generation`` in htm_meta; an index that
        # sees another writer's bump reloads before it searches.
        self._seen_generation = 0
        self._index_stale = False
        self._fts_batched = False  # set on open: see _gate_fts_trigger
        self._bulk_depth = 0  # nesting of bulk_load() blocks
        self._engine = self._make_engine()
        try:
            version = self.schema_version()
        except OperationalError as exc:
            raise DatabaseUnavailableError(
                f"cannot open SQLite database {self.url}: {exc.orig}; check the path exists "
                "and is writable"
            ) from exc
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"database {self.url} has schema version {version}, newer than this htm "
                f"understands ({SCHEMA_VERSION}); upgrade htm"
            )
        if version < SCHEMA_VERSION:
            if not migrate:
                raise SchemaError(
                    f"database {self.url} has schema version {version}; run HTM(...).migrate() "
                    "or `htm migrate` to create or upgrade it"
                )
            self.migrate()
        self._fts_batched = self._gate_fts_trigger(upgrade=migrate)
        if migrate:
            try:
                self._build_hash_index(reason="left by a bulk load that did not finish")
            except StoreError as exc:  # a read-only file: cache lookups scan until it is built
                logger.warning("could not rebuild the content_hash index of %s: %s", self.url, exc)
        self._load_index()

    # -- engine and transactions -----------------------------------------------------

    def _make_engine(self) -> Engine:
        kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False,
                                                   "timeout": self._busy_timeout_ms / 1000}}
        if self._memory_db:
            kwargs["poolclass"] = StaticPool
        else:
            path = self._url.split("///", 1)[-1].split("?", 1)[0]
            if path and path != ":memory:":
                try:
                    Path(path).parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise DatabaseUnavailableError(
                        f"cannot create the folder for SQLite database {self.url}: {exc}; "
                        "check the path (a parent may be a file) and its permissions") from exc
        engine = create_engine(self._url, **kwargs)
        busy = self._busy_timeout_ms
        memory_db = self._memory_db

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            if not memory_db:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={int(busy)}")
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
    def _write(self, *, cache_kib: int | None = None) -> Iterator[Connection]:
        """A write transaction: all or nothing. Waits (bounded) for another process's lock.

        ``cache_kib`` enlarges the connection's page cache for this transaction only (a large
        batch then never spills dirty pages to the WAL before its commit). What the store
        caches about the database (robot ids, the vector generation) is put back as it was
        when the transaction does not commit.
        """
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        with self._lock:
            cached = (dict(self._robot_ids), self._seen_generation, self._index_stale)
            committed = False
            conn = self._engine.connect().execution_options(htm_write=True)
            raw = conn.connection.dbapi_connection if cache_kib else None
            normal_cache = None
            try:
                if raw is not None:
                    normal_cache = raw.execute("PRAGMA cache_size").fetchone()[0]
                    raw.execute(f"PRAGMA cache_size = -{int(cache_kib or 0)}")
                while True:
                    try:
                        trans = conn.begin()
                        break
                    except OperationalError as exc:
                        if _is_locked(exc) and time.monotonic() < deadline:
                            time.sleep(0.01)
                            continue
                        raise StoreError(
                            f"SQLite database {self.url} stayed locked by another writer: "
                            f"{exc.orig}") from exc
                try:
                    yield conn
                except BaseException:
                    trans.rollback()
                    raise
                try:
                    trans.commit()
                except DBAPIError as exc:
                    raise StoreError(f"SQLite commit failed on {self.url}: {exc.orig}") from exc
                committed = True
            except DBAPIError as exc:
                raise StoreError(f"SQLite write failed on {self.url}: {exc.orig}") from exc
            finally:
                if not committed:
                    self._robot_ids, self._seen_generation, self._index_stale = cached
                if raw is not None and normal_cache is not None:
                    raw.execute(f"PRAGMA cache_size = {int(normal_cache)}")
                conn.close()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._lock, self._engine.connect() as conn:
            try:
                yield conn
            except OperationalError as exc:
                raise StoreError(f"SQLite read failed on {self.url}: {exc.orig}") from exc

    # -- schema ----------------------------------------------------------------------

    def schema_version(self) -> int:
        with self._engine.connect() as conn:
            exists = conn.execute(
                text("SELECT 1 FROM sqlite_master WHERE type='table' AND name='htm_meta'")
            ).first()
            if not exists:
                return 0
            row = conn.execute(
                text("SELECT value FROM htm_meta WHERE key='schema_version'")
            ).first()
            return int(row[0]) if row else 0

    def migrate(self) -> int:
        """Create or upgrade the schema step by step; never drops anything."""
        current = self.schema_version()
        if current > SCHEMA_VERSION:
            raise SchemaError(
                f"database {self.url} has schema version {current}, newer than this htm "
                f"understands ({SCHEMA_VERSION}); upgrade htm"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            with self._write() as conn:
                for statement in _MIGRATIONS[version]:
                    conn.exec_driver_sql(statement)
                conn.execute(
                    text("INSERT INTO htm_meta(key, value) VALUES ('schema_version', :v) "
                         "ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
                    {"v": str(version)},
                )
                self._log(conn, "migrate", robot_id=None, detail={"to": version})
            logger.info("migrated %s to schema version %d", self.url, version)
        self._fts_batched = self._gate_fts_trigger(upgrade=True)
        return SCHEMA_VERSION

    def _gate_fts_trigger(self, *, upgrade: bool) -> bool:
        """Whether the FTS insert trigger stands aside for batches (see ``_FTS_BATCH_KEY``).

        A file written before the trigger had that condition gets the new trigger here, in
        one logged write transaction, unless ``upgrade`` is False or the file cannot be
        written; the add path then leaves indexing to the old per-row trigger. Both
        triggers index every row any writer inserts, so either kind of file stays readable
        and writable by older htm versions.
        """
        query = text("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'memories_fts_ai'")
        with self._read() as conn:
            sql = conn.execute(query).scalar()
        if sql is not None and _FTS_BATCH_KEY in sql:
            return True
        if not upgrade:
            return False
        try:
            with self._write() as conn:
                sql = conn.execute(query).scalar()
                if sql is None or _FTS_BATCH_KEY not in sql:
                    conn.exec_driver_sql("DROP TRIGGER IF EXISTS memories_fts_ai")
                    conn.exec_driver_sql(_FTS_INSERT_TRIGGER)
                    self._log(conn, "migrate", robot_id=None,
                              detail={"fts_insert_trigger": "batched"})
        except StoreError as exc:
            logger.warning("kept the per-row full-text trigger of %s: %s", self.url, exc)
            return False
        logger.info("full-text indexing of %s now runs once per batch", self.url)
        return True

    def _build_hash_index(self, *, reason: str) -> None:
        """Create the embedding-cache index if it is missing (logged, with ``reason``)."""
        with self._read() as conn:
            present = conn.execute(text(
                "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'memories_hash'")).first()
        if present is not None:
            return
        with self._write() as conn:
            conn.exec_driver_sql(_HASH_INDEX)
            self._log(conn, "bulk_load", robot_id=None, detail={"index": "built", "reason": reason})

    @contextmanager
    def bulk_load(self) -> Iterator[SQLiteStore]:
        """A block for many ``add_many`` batches: the embedding-cache index is built once, at the end.

        Each ``add_many`` inside stays one all-or-nothing transaction of its own. The index
        on ``content_hash`` (random keys: every batch dirties pages all over it, which halves
        bulk throughput in a 100k store) is dropped when the block starts and built when it
        ends, also when it ends with an error; a loader that dies in between leaves that to
        the next open of the store. Meanwhile ``find_embedding(s)`` scan the table, in every
        process. Blocks may nest; the outermost one builds the index.

        >>> store = SQLiteStore(":memory:")
        >>> with store.bulk_load():
        ...     pass
        >>> [op.detail["index"] for op in store.operations(op="bulk_load")]
        ['built', 'dropped']
        """
        with self._lock:
            if self._bulk_depth == 0:
                with self._write() as conn:
                    conn.exec_driver_sql("DROP INDEX IF EXISTS memories_hash")
                    self._log(conn, "bulk_load", robot_id=None, detail={"index": "dropped"})
            self._bulk_depth += 1
        try:
            yield self
        finally:
            with self._lock:
                self._bulk_depth -= 1
                if self._bulk_depth == 0:
                    self._build_hash_index(reason="end of bulk load")

    def close(self) -> None:
        self._engine.dispose()
        if isinstance(self._index, ApproximateIndex):
            self._index.close()
        self._index = None

    def open_job_queue(self) -> JobQueue:
        """The enrichment job queue on this store's database (see ``LongTermStore``)."""
        from ..enrich.jobs import job_queue_on

        return job_queue_on(self._engine)

    # -- meta ------------------------------------------------------------------------

    def _meta(self, conn: Connection, key: str) -> str | None:
        row = conn.execute(text("SELECT value FROM htm_meta WHERE key = :k"), {"k": key}).first()
        return None if row is None else str(row[0])

    def _set_meta(self, conn: Connection, key: str, value: str) -> None:
        conn.execute(
            text("INSERT INTO htm_meta(key, value) VALUES (:k, :v) "
                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
            {"k": key, "v": value},
        )

    def _bump_generation(self, conn: Connection) -> None:
        old = int(self._meta(conn, "vector_generation") or 0)
        if old != self._seen_generation:
            self._index_stale = True  # another writer changed vectors since we last looked
        self._set_meta(conn, "vector_generation", str(old + 1))
        self._seen_generation = old + 1

    def embedding_info(self) -> tuple[str, int] | None:
        with self._read() as conn:
            name = self._meta(conn, "embedder")
            dim = self._meta(conn, "embedding_dim")
        if name is None or dim is None:
            return None
        return name, int(dim)

    def _check_embedding(self, conn: Connection, embedder: str, dim: int) -> None:
        cur = conn.connection.cursor()  # one raw query: this runs on every add
        try:
            meta = dict(cur.execute("SELECT key, value FROM htm_meta WHERE key IN "
                                    "('embedder', 'embedding_dim')").fetchall())
        finally:
            cur.close()
        stored_dim = meta.get("embedding_dim")
        if stored_dim is None:
            self._set_meta(conn, "embedder", embedder)
            self._set_meta(conn, "embedding_dim", str(dim))
            return
        check_embedder(meta.get("embedder") or "", int(stored_dim), embedder, dim)

    # -- robots ----------------------------------------------------------------------

    def _robot_id(self, conn: Connection, name: str) -> int:
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

    def _known_robot_id(self, name: str) -> int | None:
        if name in self._robot_ids:
            return self._robot_ids[name]
        with self._read() as conn:
            row = conn.execute(text("SELECT id FROM robots WHERE name = :n"), {"n": name}).first()
        if row is not None:
            self._robot_ids[name] = int(row[0])
            return int(row[0])
        return None

    def ensure_robot(self, name: str) -> Robot:
        with self._write() as conn:
            self._robot_id(conn, name)
        return next(r for r in self.robots() if r.name == name)

    def robots(self) -> list[Robot]:
        with self._read() as conn:
            rows = conn.execute(text(
                "SELECT r.id, r.name, r.created_at, r.last_active, "
                "(SELECT count(*) FROM memories m WHERE m.robot_id = r.id "
                " AND m.forgotten_at IS NULL) FROM robots r ORDER BY r.name"
            )).all()
        return [
            Robot(id=r[0], name=r[1], created_at=utc_from_timestamp(r[2]),
                  last_active=utc_from_timestamp(r[3]) if r[3] else None, memory_count=r[4])
            for r in rows
        ]

    # -- log -------------------------------------------------------------------------

    def _log(self, conn: Connection, op: str, *, robot_id: int | None, memory_id: int | None = None,
             key: str | None = None, detail: dict[str, Any] | None = None) -> None:
        conn.execute(
            text("INSERT INTO operations(at, op, robot_id, memory_id, key, detail) "
                 "VALUES (:at, :op, :r, :m, :k, :d)"),
            {"at": time.time(), "op": op, "r": robot_id, "m": memory_id, "k": key,
             "d": json.dumps(detail or {})},
        )

    def log(self, op: str, *, robot: str | None, key: str | None = None,
            detail: dict[str, Any] | None = None) -> None:
        with self._write() as conn:
            rid = self._robot_id(conn, robot) if robot else None
            self._log(conn, op, robot_id=rid, key=key, detail=detail)

    def operations(self, *, limit: int = 100, robot: str | None = None,
                   op: str | None = None) -> list[Operation]:
        where, params = [], {"limit": limit}
        if robot is not None:
            where.append("r.name = :robot")
            params["robot"] = robot  # type: ignore[assignment]
        if op is not None:
            where.append("o.op = :op")
            params["op"] = op  # type: ignore[assignment]
        sql = ("SELECT o.id, o.at, o.op, r.name, o.key, o.detail FROM operations o "
               "LEFT JOIN robots r ON r.id = o.robot_id "
               + (f"WHERE {' AND '.join(where)} " if where else "")
               + "ORDER BY o.id DESC LIMIT :limit")
        with self._read() as conn:
            rows = conn.execute(text(sql), params).all()
        return [Operation(id=r[0], at=utc_from_timestamp(r[1]), op=r[2], robot=r[3], key=r[4],
                          detail=json.loads(r[5])) for r in rows]

    # -- writing ---------------------------------------------------------------------

    def add_many(self, records: Sequence[NewMemory]) -> list[AddResult]:
        """Write ``records`` in one transaction; all or nothing (see ``LongTermStore``)."""
        return self._add(records, None, None)[0]

    def add_and_enter(self, records: Sequence[NewMemory], *,
                      working: Callable[[list[AddResult]], WorkingChange | None],
                      expected_version: int | None = None,
                      ) -> tuple[list[AddResult], WorkingResult | None]:
        """``add_many`` and a working-memory change in one transaction (see ``LongTermStore``)."""
        return self._add(records, working, expected_version)

    def _add(self, records: Sequence[NewMemory],
             working: Callable[[list[AddResult]], WorkingChange | None] | None,
             expected_version: int | None) -> tuple[list[AddResult], WorkingResult | None]:
        if not records:
            return [], None
        made: dict[int, Memory] = {}
        revived: list[int] = []
        big = len(records) >= _LARGE_BATCH
        applied: WorkingResult | None = None
        with self._write(cache_kib=_LARGE_BATCH_CACHE_KIB if big else None) as conn:
            outcomes = self._add_many(conn, records, made, revived)
            # New rows are returned as written (no read-back); touched ones are re-read.
            again = [mid for mid, _created, _vec in outcomes if mid not in made]
            by_id = {m.id: m for part in chunks(again, 500) for m in self._fetch(
                conn, f"m.id IN ({', '.join(str(int(i)) for i in part)})", {}, False)}
            by_id.update(made)
            results = [AddResult(by_id[mid], created) for mid, created, _ in outcomes]
            change = working(results) if working is not None else None
            if change is not None:
                applied = self._apply_working(conn, change, expected_version)
        # The in-process index follows only once the transaction has committed.
        self._index_new(outcomes)
        if self._index is not None:
            for mid in revived:
                self._index.set_alive(mid, True)
            for rec, (mid, created, _vec) in zip(records, outcomes, strict=True):
                if created and rec.forgotten_at is not None:
                    self._index.set_alive(mid, False)  # imported forgotten: hidden until restored
        return results, applied

    def _add_many(self, conn: Connection, records: Sequence[NewMemory], made: dict[int, Memory],
                  revived: list[int]) -> list[tuple[int, bool, tuple[np.ndarray, float, int] | None]]:
        """Write the batch on ``conn``; fill ``made`` (new rows) and ``revived`` (restored ids).

        Returns (id, created, (unit vector, created_at, robot id) or None) per record.
        """
        now = time.time()
        vectors = batch_embedder(records)  # one embedder and dimension per batch
        if vectors is not None:
            self._check_embedding(conn, *vectors)
        keys = list(dict.fromkeys(r.key for r in records))
        existing: dict[str, tuple[int, str, float | None]] = {}
        stored: dict[int, Merged] = {}  # importance and metadata of existing rows (re-adds)
        # Reads and writes of the add path go through the raw cursor (SQLAlchemy's
        # per-statement overhead is most of a single add otherwise). New rows get their
        # ids here (we hold the write lock, so max(id) + 1 onwards is what SQLite would
        # assign) and are written with executemany: one statement per table per batch.
        cur = conn.connection.cursor()
        try:
            for part in chunks(keys, 500):
                for row in cur.execute(
                        "SELECT key, id, content, forgotten_at, importance, metadata FROM memories "
                        f"WHERE key IN ({', '.join('?' * len(part))})", list(part)):
                    existing[row[0]] = (row[1], row[2], row[3])
                    stored[row[1]] = Merged(float(row[4]), as_dict(row[5]), set())
            # Ids are never reused: past the newest row and past every purged one.
            next_id = int(cur.execute(
                "SELECT max(coalesce((SELECT max(id) FROM memories), 0), coalesce((SELECT "
                "CAST(value AS INTEGER) FROM htm_meta WHERE key = 'id_high_water'), 0))"
            ).fetchone()[0]) + 1
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite read failed on {self.url}: {exc}") from exc
        finally:
            cur.close()
        units = _unit_rows(records)
        position = 0
        robot_ids: dict[str, int] = {}
        results: list[tuple[int, bool, tuple[np.ndarray, float, int] | None]] = []
        inserted: dict[str, tuple[int, str, None]] = {}  # keys new in this batch
        new_rows: list[tuple[Any, ...]] = []
        tag_links: list[tuple[int, str]] = []
        log_rows: list[tuple[Any, ...]] = []
        touched: list[tuple[float, int]] = []
        readds: list[tuple[int, int, NewMemory]] = []  # (log row, id, record) of each re-add
        for rec in records:
            rid = robot_ids.get(rec.robot)
            if rid is None:
                rid = robot_ids[rec.robot] = self._robot_id(conn, rec.robot)
            prior = existing.get(rec.key) or inserted.get(rec.key)
            if prior is not None:
                if rec.embedding is not None:
                    position += 1
                mid, old_content, forgotten = prior
                if old_content != rec.content:
                    state = " (forgotten; purge it to reuse the key)" if forgotten else ""
                    raise DuplicateKeyError(
                        f"key {rec.key!r} already holds different content{state}; choose "
                        "another key"
                    )
                made.pop(mid, None)  # touched (a row of this batch, or an old one): read it back
                touched.append((now, mid))
                readds.append((len(log_rows), mid, rec))
                log_rows.append((now, "restore" if forgotten else "touch", rid, mid, rec.key,
                                 '{"reason": "added again"}'))
                if forgotten:
                    self._bump_generation(conn)
                    revived.append(mid)
                results.append((mid, False, None))
                continue
            created = to_timestamp(rec.created_at)
            created_dt = utc_from_timestamp(created)
            blob, vec = None, None
            if rec.embedding is not None:
                unit = units[position]
                position += 1
                blob, vec = unit.tobytes(), (unit, created, rid)
            mid = next_id
            next_id += 1
            if rec.last_accessed is None:
                accessed, accessed_dt = created, created_dt
            else:
                accessed = to_timestamp(rec.last_accessed)
                accessed_dt = utc_from_timestamp(accessed)
            forgotten_ts = to_timestamp(rec.forgotten_at) if rec.forgotten_at else None
            metadata = json.dumps(rec.metadata) if rec.metadata else "{}"
            digest = rec.content_hash
            embedder_name = rec.embedder if blob is not None else None
            new_rows.append((
                mid, rec.key, rec.content, digest, rid, rec.importance, rec.token_count,
                created, accessed, rec.access_count, metadata, blob, embedder_name, forgotten_ts,
            ))
            made[mid] = Memory(
                id=mid, key=rec.key, content=rec.content, content_hash=digest,
                robot=rec.robot, importance=float(rec.importance), token_count=rec.token_count,
                created_at=created_dt, last_accessed=accessed_dt, access_count=rec.access_count,
                tags=tuple(sorted(set(rec.tags))) if rec.tags else (),
                metadata=json.loads(metadata) if rec.metadata else {}, embedder=embedder_name,
                forgotten_at=utc_from_timestamp(forgotten_ts) if forgotten_ts else None,
            )
            inserted[rec.key] = (mid, rec.content, None)
            if rec.tags:
                tag_links.extend((mid, tag) for tag in rec.tags)
            log_rows.append((now, "add", rid, mid, rec.key, "{}"))
            results.append((mid, True, vec))
            stored[mid] = Merged(float(rec.importance), dict(rec.metadata), set(rec.tags))
        merged_rows = self._merge_readds(conn, readds, stored, tag_links, log_rows)
        self._write_batch(conn, new_rows, tag_links, touched, log_rows)
        if merged_rows:
            conn.execute(text("UPDATE memories SET importance = :i, metadata = :m WHERE id = :id"),
                         [{"i": i, "m": m, "id": mid} for i, m, mid in merged_rows])
        return results

    @staticmethod
    def _merge_readds(conn: Connection, readds: Sequence[tuple[int, int, NewMemory]],
                      stored: dict[int, Merged], tag_links: list[tuple[int, str]],
                      log_rows: list[tuple[Any, ...]]) -> list[tuple[float, str, int]]:
        """Merge each re-add into its memory (see ``merge_readd``): new tags go to
        ``tag_links``, the log lines say what changed; return the rows to update."""
        if not readds:
            return []
        old = sorted({mid for _, mid, _ in readds})
        for mid, name in conn.execute(text(
                "SELECT mt.memory_id, t.name FROM memory_tags mt JOIN tags t ON t.id = mt.tag_id "
                f"WHERE mt.memory_id IN ({', '.join(str(int(m)) for m in old)})")):
            stored[mid].tags.add(name)
        changed: set[int] = set()
        for at, mid, rec in readds:
            now = stored[mid]
            step = merge_readd(Merged(now.importance, now.metadata, set(now.tags)), rec)
            stored[mid] = Merged(step.importance, step.metadata, step.tags)
            tag_links.extend((mid, tag) for tag in step.detail.get("tags", ()))
            if step.changed_row:
                changed.add(mid)
            row = log_rows[at]
            log_rows[at] = (*row[:5], json.dumps(touch_detail(step)))
        return [(stored[m].importance, json.dumps(stored[m].metadata), m) for m in sorted(changed)]

    def _write_batch(self, conn: Connection, new_rows: Sequence[tuple[Any, ...]],
                     tag_links: Sequence[tuple[int, str]], touched: Sequence[tuple[float, int]],
                     log_rows: Sequence[tuple[Any, ...]]) -> None:
        """Write a batch's new memories (ids ascending, consecutive), tags, touches and log.

        With the batched trigger (``_FTS_BATCH_KEY``) two or more new rows are indexed for
        full text by one statement over their id range instead of row by row.
        """
        cur = conn.connection.cursor()
        try:
            if new_rows:
                batched = self._fts_batched and len(new_rows) > 1  # one row: the trigger is cheaper
                if batched:
                    cur.execute("INSERT OR REPLACE INTO htm_meta(key, value) VALUES (?, '1')",
                                (_FTS_BATCH_KEY,))
                cur.executemany(
                    "INSERT INTO memories(id, key, content, content_hash, robot_id, importance, "
                    "token_count, created_at, last_accessed, access_count, metadata, embedding, "
                    "embedder, forgotten_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    new_rows)
                if batched:
                    cur.execute("INSERT INTO memories_fts(rowid, content) SELECT id, content "
                                "FROM memories WHERE id BETWEEN ? AND ?",
                                (new_rows[0][0], new_rows[-1][0]))
                    cur.execute("DELETE FROM htm_meta WHERE key = ?", (_FTS_BATCH_KEY,))
            if tag_links:
                names = sorted({tag for _mid, tag in tag_links})
                cur.executemany("INSERT OR IGNORE INTO tags(name) VALUES (?)",
                                [(n,) for n in names])
                tag_ids: dict[str, int] = {}
                for part in chunks(names, 500):
                    cur.execute(f"SELECT name, id FROM tags WHERE name IN ({', '.join('?' * len(part))})",
                                list(part))
                    tag_ids.update(cur.fetchall())
                cur.executemany("INSERT OR IGNORE INTO memory_tags(memory_id, tag_id) VALUES (?, ?)",
                                [(mid, tag_ids[tag]) for mid, tag in tag_links])
            if touched:
                cur.executemany("UPDATE memories SET last_accessed = ?, access_count = access_count + 1, "
                                "forgotten_at = NULL WHERE id = ?", touched)
            if log_rows:
                cur.executemany("INSERT INTO operations(at, op, robot_id, memory_id, key, detail) "
                                "VALUES (?, ?, ?, ?, ?, ?)", log_rows)
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite write failed on {self.url}: {exc}") from exc
        finally:
            cur.close()

    def _index_new(self, outcomes: Sequence[tuple[int, bool, tuple[np.ndarray, float, int] | None]]
                   ) -> None:
        rows = [(mid, vec) for mid, _c, vec in outcomes if vec is not None]
        if not rows:
            return
        if self._index is None:
            self._index = self._new_index(len(rows[0][1][0]))
        # Rows other writers committed before ours sit between the index's newest id and ours:
        # take them first, or the index's high-water mark would skip them for good.
        self._pull_new_rows(below=min(mid for mid, _ in rows))
        self._index.add_arrays(
            np.fromiter((mid for mid, _ in rows), dtype=np.int64, count=len(rows)),
            np.stack([vec[0] for _, vec in rows]),
            np.fromiter((vec[1] for _, vec in rows), dtype=np.float64, count=len(rows)),
            np.fromiter((vec[2] for _, vec in rows), dtype=np.int64, count=len(rows)),
        )

    def touch(self, ids: Sequence[int], *, at: datetime) -> None:
        if not ids:
            return
        with self._write() as conn:
            conn.execute(
                text("UPDATE memories SET last_accessed = max(last_accessed, :t), "
                     "access_count = access_count + 1 WHERE id = :id"),
                [{"t": to_timestamp(at), "id": i} for i in ids],
            )

    def set_embeddings(self, items: Sequence[tuple[int, Sequence[float]]], embedder: str) -> None:
        if not items:
            return
        units = [(mid, normalise(vec)) for mid, vec in items]
        dims = {len(u) for _, u in units}
        if len(dims) != 1:
            raise DimensionMismatchError(f"embeddings in one batch have different dimensions: {dims}")
        with self._write() as conn:
            self._check_embedding(conn, embedder, dims.pop())
            conn.execute(
                text("UPDATE memories SET embedding = :e, embedder = :n WHERE id = :id"),
                [{"e": u.tobytes(), "n": embedder, "id": mid} for mid, u in units],
            )
            clear_failures(conn, [mid for mid, _ in units])
            self._bump_generation(conn)
            meta = {
                r[0]: (r[1], r[2], r[3]) for part in chunks([m for m, _ in units], 500)
                for r in conn.execute(text(
                    "SELECT id, created_at, robot_id, forgotten_at FROM memories WHERE id IN ("
                    + ", ".join(str(int(m)) for m in part) + ")"))
            }
        if self._index is None:
            self._index = self._new_index(len(units[0][1]))
        self._index.add([(mid, u, meta[mid][0], meta[mid][1]) for mid, u in units if mid in meta])
        for mid, _u in units:
            if mid in meta and meta[mid][2] is not None:
                self._index.set_alive(mid, False)

    def add_tags(self, key: str, tags: Sequence[str], *, robot: str) -> Memory:
        with self._write() as conn:
            rid = self._robot_id(conn, robot)
            mid = self._row_for_key(conn, key).id
            for tag in tags:
                tag_id = conn.execute(text(
                    "INSERT INTO tags(name) VALUES (:n) ON CONFLICT(name) DO UPDATE "
                    "SET name = excluded.name RETURNING id"), {"n": tag}).scalar_one()
                conn.execute(text("INSERT OR IGNORE INTO memory_tags(memory_id, tag_id) "
                                  "VALUES (:m, :t)"), {"m": mid, "t": tag_id})
            self._log(conn, "tag", robot_id=rid, memory_id=mid, key=key,
                      detail={"tags": list(tags)})
        return self._one(key)

    def set_importance(self, key: str, importance: float, *, robot: str) -> Memory:
        with self._write() as conn:
            rid = self._robot_id(conn, robot)
            mid = self._row_for_key(conn, key).id
            conn.execute(text("UPDATE memories SET importance = :i WHERE id = :id"),
                         {"i": importance, "id": mid})
            self._log(conn, "importance", robot_id=rid, memory_id=mid, key=key,
                      detail={"importance": importance})
        return self._one(key)

    def _one(self, key: str) -> Memory:
        memory = self.get(key, include_forgotten=True)
        assert memory is not None
        return memory

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (write transactions through it take the lock up front)."""
        return self._engine

    def keys_with_prefix(self, prefix: str, *, include_forgotten: bool = False) -> list[str]:
        visible = "" if include_forgotten else " AND forgotten_at IS NULL"
        with self._read() as conn:
            rows = conn.execute(text(
                f"SELECT key FROM memories WHERE key LIKE :p ESCAPE '\\'{visible} ORDER BY key"),
                {"p": like_prefix(prefix)}).all()
        return [str(r[0]) for r in rows]

    def reset_embeddings(self) -> None:
        with self._write() as conn:
            conn.execute(text("UPDATE memories SET embedding = NULL, embedder = NULL"))
            conn.execute(text("DELETE FROM htm_meta WHERE key IN ('embedder', 'embedding_dim')"))
            clear_failures(conn)
            self._log(conn, "reset_embeddings", robot_id=None)
            self._bump_generation(conn)
        if isinstance(self._index, ApproximateIndex):
            self._index.discard()
        self._index = None

    # -- reading ---------------------------------------------------------------------

    def _to_memory(self, row: Any, tags: Sequence[str], embedding: bytes | None = None) -> Memory:
        return Memory(
            id=row.id, key=row.key, content=row.content, content_hash=row.content_hash,
            robot=row.robot, importance=row.importance, token_count=row.token_count,
            created_at=utc_from_timestamp(row.created_at),
            last_accessed=utc_from_timestamp(row.last_accessed),
            access_count=row.access_count, tags=tuple(tags), metadata=json.loads(row.metadata),
            embedder=row.embedder,
            embedding=np.frombuffer(embedding, dtype=np.float32).tolist() if embedding else None,
            forgotten_at=utc_from_timestamp(row.forgotten_at) if row.forgotten_at else None,
        )

    def _fetch(self, conn: Connection, where: str, params: dict[str, Any],
               include_embedding: bool) -> list[Memory]:
        cols = _MEMORY_COLUMNS + (", m.embedding" if include_embedding else "")
        rows = conn.execute(text(
            f"SELECT {cols} FROM memories m JOIN robots r ON r.id = m.robot_id WHERE {where}"
        ), params).all()
        if not rows:
            return []
        tags: dict[int, list[str]] = {}
        for part in chunks([r.id for r in rows], 500):
            for mid, name in conn.execute(text(
                "SELECT mt.memory_id, t.name FROM memory_tags mt JOIN tags t ON t.id = mt.tag_id "
                f"WHERE mt.memory_id IN ({', '.join(str(int(i)) for i in part)}) ORDER BY t.name"
            )):
                tags.setdefault(mid, []).append(name)
        return [self._to_memory(r, tags.get(r.id, ()), r.embedding if include_embedding else None)
                for r in rows]

    def get(self, key: str, *, include_forgotten: bool = False,
            include_embedding: bool = False) -> Memory | None:
        where = "m.key = :key" + ("" if include_forgotten else " AND m.forgotten_at IS NULL")
        with self._read() as conn:
            found = self._fetch(conn, where, {"key": key}, include_embedding)
        return found[0] if found else None

    def get_many(self, ids: Sequence[int], *, include_embedding: bool = False,
                 include_forgotten: bool = False) -> list[Memory]:
        if not ids:
            return []
        found: dict[int, Memory] = {}
        visible = "" if include_forgotten else " AND m.forgotten_at IS NULL"
        with self._read() as conn:
            for part in chunks(list(ids), 500):
                id_list = ", ".join(str(int(i)) for i in part)
                for m in self._fetch(conn, f"m.id IN ({id_list}){visible}", {},
                                     include_embedding):
                    found[m.id] = m
        return [found[i] for i in ids if i in found]

    def find_embedding(self, content_hash: str, embedder: str) -> list[float] | None:
        with self._read() as conn:
            row = conn.execute(text(
                "SELECT embedding FROM memories WHERE content_hash = :h AND embedder = :e "
                f"AND embedding IS NOT NULL AND NOT {CHUNK_SQLITE} LIMIT 1"),
                {"h": content_hash, "e": embedder}).first()
        return np.frombuffer(row[0], dtype=np.float32).tolist() if row else None

    def find_embeddings(self, content_hashes: Sequence[str], embedder: str
                        ) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        with self._read() as conn:
            for part in chunks(list(dict.fromkeys(content_hashes)), 500):
                params: dict[str, Any] = {f"h{i}": h for i, h in enumerate(part)}
                params["e"] = embedder
                marks = ", ".join(f":h{i}" for i in range(len(part)))
                for h, blob in conn.execute(text(
                        f"SELECT content_hash, embedding FROM memories WHERE content_hash IN ({marks}) "
                        f"AND embedder = :e AND embedding IS NOT NULL AND NOT {CHUNK_SQLITE}"),
                        params):
                    found.setdefault(h, np.frombuffer(blob, dtype=np.float32).tolist())
        return found

    def missing_embeddings(self, *, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        with self._read() as conn:
            rows = conn.execute(text(
                "SELECT m.id, m.content, m.metadata FROM memories m WHERE m.embedding IS NULL "
                f"AND m.forgotten_at IS NULL AND {NOT_FAILED} ORDER BY m.id LIMIT :l"),
                {"l": limit}).all()
        return [(r[0], r[1], json.loads(r[2]) if r[2] else {}) for r in rows]

    def mark_embedding_failures(self, failures: Sequence[tuple[int, str]], embedder: str) -> None:
        with self._write() as conn:
            mark_failures(conn, failures, embedder, time.time())

    def embedding_failures(self, *, limit: int = 100) -> list[EmbeddingFailure]:
        with self._read() as conn:
            rows = list_failures(conn, limit)
        return [EmbeddingFailure(key=k, embedder=e, error=r, failed_at=utc_from_timestamp(t))
                for k, e, r, t in rows]

    def retry_embedding_failures(self) -> int:
        with self._write() as conn:
            return clear_failures(conn)

    def iter_memories(self, *, batch_size: int = 1000, include_forgotten: bool = True,
                      include_embedding: bool = False, after_id: int = 0) -> Iterator[list[Memory]]:
        last = after_id
        visible = "" if include_forgotten else " AND m.forgotten_at IS NULL"
        while True:
            with self._read() as conn:
                batch = self._fetch(conn, f"m.id > :last{visible} ORDER BY m.id LIMIT :n",
                                    {"last": last, "n": batch_size}, include_embedding)
            if not batch:
                return
            yield batch
            last = batch[-1].id

    # -- searching -------------------------------------------------------------------

    def _filter_sql(self, filters: SearchFilters, params: dict[str, Any]) -> str:
        clauses = ["m.forgotten_at IS NULL"]
        if filters.start is not None:
            clauses.append("m.created_at >= :start")
            params["start"] = to_timestamp(filters.start)
        if filters.end is not None:
            clauses.append("m.created_at < :end")
            params["end"] = to_timestamp(filters.end)
        if filters.robot is not None:
            clauses.append("m.robot_id = (SELECT id FROM robots WHERE name = :robot)")
            params["robot"] = filters.robot
        if filters.tags:
            ors = []
            for i, tag in enumerate(filters.tags):
                exact, below = tag_patterns(tag)
                params[f"tag{i}"], params[f"tagp{i}"] = exact, below
                ors.append(f"lower(t.name) = :tag{i} OR lower(t.name) LIKE :tagp{i} ESCAPE '\\'")
            clauses.append(
                "EXISTS (SELECT 1 FROM memory_tags mt JOIN tags t ON t.id = mt.tag_id "
                f"WHERE mt.memory_id = m.id AND ({' OR '.join(ors)}))"
            )
        return " AND ".join(clauses)

    def search_arms(self, arms: Sequence[ArmQuery]) -> list[list[tuple[int, float]]]:
        """Each search in turn (an embedded database has no round trips to save)."""
        return [self.vector_search(a.vector, limit=a.limit, filters=a.filters)
                if a.vector is not None else
                self.fulltext_search(a.text or "", limit=a.limit, filters=a.filters)
                for a in arms]

    def fulltext_search(self, query: str, *, limit: int,
                        filters: SearchFilters) -> list[tuple[int, float]]:
        """Top ``limit`` (id, -bm25) for the words of ``query`` (``_text``'s rules), OR-ed,
        merged with the memories holding its CJK runs."""
        parsed = parse_query(query)
        if not parsed:
            return []
        try:
            # The raw cursor: a search is a few cheap statements, and SQLAlchemy's
            # per-statement overhead would be most of its time.
            with self._read() as conn:
                cur = conn.connection.cursor()
                try:
                    words = self._word_hits(cur, parsed.words, limit, filters)
                    runs = self._run_hits(cur, parsed.runs, limit, filters)
                finally:
                    cur.close()
        except sqlite3.Error as exc:
            raise StoreError(f"full-text search failed: {exc}") from exc
        return merge_hits(words, runs, limit)

    def _word_hits(self, cur: DBAPICursor, terms: Sequence[str], limit: int,
                   filters: SearchFilters) -> list[tuple[int, float]]:
        if not terms:
            return []

        def quoted(term: str) -> str:
            return '"' + term.replace('"', '""') + '"'

        params: dict[str, Any] = {"limit": limit}
        where = self._filter_sql(filters, params)
        sql = ("SELECT m.id, bm25(memories_fts) AS rank FROM memories_fts "
               "JOIN memories m ON m.id = memories_fts.rowid "
               f"WHERE memories_fts MATCH :match AND {where} ORDER BY rank, m.id LIMIT :limit")
        count_sql = ("SELECT count(*) FROM (SELECT 1 FROM memories_fts "
                     "WHERE memories_fts MATCH :t LIMIT :cap)")
        total = int(cur.execute("SELECT coalesce(max(id), 0) FROM memories").fetchone()[0])
        rare = informative_terms(terms, total, lambda t, cap: int(cur.execute(
            count_sql, {"t": quoted(t), "cap": cap + 1}).fetchone()[0]))
        match = " OR ".join(quoted(t) for t in rare)
        if len(rare) < len(terms):
            # Candidates must hold a rare word; bm25 still scores every query
            # word, so common ones (a speaker's name) break ties among them.
            match = f"({match}) AND ({' OR '.join(quoted(t) for t in terms)})"
        params["match"] = match
        return [(int(r[0]), -float(r[1])) for r in cur.execute(sql, params).fetchall()]

    def _run_hits(self, cur: DBAPICursor, runs: Sequence[str], limit: int,
                  filters: SearchFilters) -> list[tuple[int, float]]:
        """The memories holding CJK ``runs`` as substrings: score = how many they hold +
        1 / (1 + length). The trigram index answers runs of three characters or more;
        shorter ones are looked for in the CJK memories' text."""
        if not runs:
            return []
        params: dict[str, Any] = {"limit": limit}
        params.update({f"r{i}": run for i, run in enumerate(runs)})
        held = " + ".join(f"(instr(c.content, :r{i}) > 0)" for i in range(len(runs)))
        if min(map(len, runs)) >= 3:
            params["match"] = " OR ".join(f'"{run}"' for run in runs)
            found = "c.memories_cjk MATCH :match"
        else:
            found = " OR ".join(f"instr(c.content, :r{i}) > 0" for i in range(len(runs)))
        where = self._filter_sql(filters, params)
        sql = (f"SELECT m.id, {held} + 1.0 / (1 + length(c.content)) AS score "
               "FROM memories_cjk c JOIN memories m ON m.id = c.rowid "
               f"WHERE ({found}) AND {where} ORDER BY score DESC, m.id LIMIT :limit")
        return [(int(r[0]), float(r[1])) for r in cur.execute(sql, params).fetchall()]

    def _load_index(self) -> None:
        with self._read() as conn:
            dim = self._meta(conn, "embedding_dim")
            generation = int(self._meta(conn, "vector_generation") or 0)
        if isinstance(self._index, ApproximateIndex):
            self._index.close()
        self._seen_generation, self._index_stale = generation, False
        if dim is None:
            self._index = None
            return
        self._index = self._new_index(int(dim))
        self._pull_new_rows()

    def _new_index(self, dim: int) -> VectorIndex:
        path = None
        if not self._memory_db:
            db_file = self._url.split("///", 1)[-1].split("?", 1)[0]
            path = Path(db_file + "-vectors.usearch") if db_file else None
        return make_index(dim, path=path)

    def _sync_index(self) -> None:
        """Catch up with other writers: reload after their vector changes, else pull new rows."""
        if self._index is None:
            return
        with self._read() as conn:
            cur = conn.connection.cursor()  # one raw statement: this runs before every search
            try:
                generation, newest = cur.execute(
                    "SELECT (SELECT value FROM htm_meta WHERE key = 'vector_generation'), "
                    "(SELECT coalesce(max(id), 0) FROM memories)").fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite read failed on {self.url}: {exc}") from exc
            finally:
                cur.close()
        if int(generation or 0) != self._seen_generation or self._index_stale:
            self._load_index()
        elif int(newest) > self._index.max_id:
            self._pull_new_rows()

    def _pull_new_rows(self, *, below: int | None = None) -> None:
        """Add rows written since the index last saw the table (only ids under ``below``).

        Rows are streamed in chunks straight into the index's arrays, so opening a large
        store never holds every row as a Python object.
        """
        index = self._index
        if index is None:
            return
        dim = index.dim
        width = dim * 4
        with self._read() as conn:
            # The raw cursor: at 100,000 rows SQLAlchemy's row objects cost more than the read.
            cur = conn.connection.cursor()
            try:
                cur.arraysize = 2048  # small chunks: little heap left behind after the load
                newest = cur.execute("SELECT max(id) FROM memories").fetchone()[0]
                upto = int(newest or 0) if below is None else min(int(newest or 0), below - 1)
                # Allocate once, not by doubling, with a quarter to spare: otherwise the first
                # add after opening a large store copies every vector to grow the matrix
                # (0.6 s at 100k). Spare rows are zero pages never touched: not resident.
                backlog = upto - index.max_id
                index.reserve(backlog + backlog // 4)
                cur.execute("SELECT id, embedding, created_at, robot_id, forgotten_at FROM memories "
                            "WHERE id > ? AND id <= ? AND embedding IS NOT NULL ORDER BY id",
                            (index.max_id, upto))
                while part := cur.fetchmany():
                    ids, blobs, created, robots, forgotten = zip(*part, strict=True)
                    if any(len(b) != width for b in blobs):
                        blobs = tuple(bytes(b[:width]) for b in blobs)
                    index.add_arrays(
                        np.array(ids, dtype=np.int64),
                        np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(part), dim),
                        np.array(created, dtype=np.float64),
                        np.array(robots, dtype=np.int64),
                        np.array([f is None for f in forgotten], dtype=bool),
                    )
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite read failed on {self.url}: {exc}") from exc
            finally:
                cur.close()

    def vector_search(self, vector: Sequence[float], *, limit: int,
                      filters: SearchFilters) -> list[tuple[int, float]]:
        if self._index is None:
            self._load_index()
        else:
            self._sync_index()  # may replace the index when another writer changed vectors
        index = self._index
        if index is None:
            return []
        query = normalise(vector)
        if query.shape[0] != index.dim:
            raise DimensionMismatchError(
                f"query vector has dimension {query.shape[0]} but the store holds "
                f"{index.dim}-dimensional vectors; use the store's embedder")
        robot_id = None
        if filters.robot is not None:
            robot_id = self._known_robot_id(filters.robot)
            if robot_id is None:
                return []
        allowed = None
        if filters.tags:
            params: dict[str, Any] = {}
            where = self._filter_sql(SearchFilters(tags=filters.tags), params)
            with self._read() as conn:
                ids = [r[0] for r in conn.execute(text(f"SELECT m.id FROM memories m WHERE {where}"),
                                                  params)]
            allowed = np.asarray(ids, dtype=np.int64)
        return index.search(
            query, limit,
            start=to_timestamp(filters.start) if filters.start else None,
            end=to_timestamp(filters.end) if filters.end else None,
            robot=robot_id, allowed_ids=allowed,
        )

    def briefs(self, ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        if not ids:
            return {}
        params: dict[str, Any] = {}
        where = self._filter_sql(filters, params)
        out: dict[int, Brief] = {}
        try:
            with self._read() as conn:
                cur = conn.connection.cursor()
                try:
                    for part in chunks(sorted(set(ids)), 500):
                        id_list = ", ".join(str(int(i)) for i in part)
                        for mid, content, robot, created in cur.execute(
                                "SELECT m.id, m.content, r.name, m.created_at FROM memories m "
                                "JOIN robots r ON r.id = m.robot_id "
                                f"WHERE m.id IN ({id_list}) AND {where}", params):
                            out[mid] = Brief(mid, content, robot, utc_from_timestamp(created))
                finally:
                    cur.close()
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite read failed on {self.url}: {exc}") from exc
        return out

    def vector_centroid(self) -> list[float] | None:
        if self._index is None:
            self._load_index()
        # No sync with other writers here: the vector search that follows does it, and an
        # estimate one query behind them is fine for centring.
        centroid = self._index.centroid() if self._index is not None else None
        return None if centroid is None else centroid.tolist()

    # -- never forget ----------------------------------------------------------------

    def _row_for_key(self, conn: Connection, key: str) -> Any:
        row = conn.execute(text("SELECT id, forgotten_at FROM memories WHERE key = :k"),
                           {"k": key}).first()
        if row is None:
            raise NotFoundError(f"no memory with key {key!r}: it was never stored, or it has "
                                "been purged (a purge cannot be undone)")
        return row

    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        with self._write() as conn:
            rid = self._robot_id(conn, robot)
            row = self._row_for_key(conn, key)
            if row.forgotten_at is None:
                conn.execute(text("UPDATE memories SET forgotten_at = :t WHERE id = :id"),
                             {"t": to_timestamp(at), "id": row.id})
                self._unhold(conn, [row.id])
                self._log(conn, "forget", robot_id=rid, memory_id=row.id, key=key)
                self._bump_generation(conn)
        if self._index is not None:
            self._index.set_alive(row.id, False)
        memory = self.get(key, include_forgotten=True)
        assert memory is not None
        return memory

    def restore(self, key: str, *, robot: str) -> Memory:
        with self._write() as conn:
            rid = self._robot_id(conn, robot)
            row = self._row_for_key(conn, key)
            if row.forgotten_at is not None:
                conn.execute(text("UPDATE memories SET forgotten_at = NULL WHERE id = :id"),
                             {"id": row.id})
                self._log(conn, "restore", robot_id=rid, memory_id=row.id, key=key)
                self._bump_generation(conn)
        if self._index is not None:
            self._index.set_alive(row.id, True)
        memory = self.get(key)
        assert memory is not None
        return memory

    def purge(self, *, robot: str, key: str | None = None) -> int:
        with self._write() as conn:
            rid = self._robot_id(conn, robot)
            if key is not None:
                row = self._row_for_key(conn, key)
                if row.forgotten_at is None:
                    from ..errors import ConfirmationRequiredError

                    raise ConfirmationRequiredError(
                        f"memory {key!r} is not forgotten; forget(key, confirm=True) it before "
                        "purging")
                targets = [(row.id, key)]
            else:
                targets = [(r[0], r[1]) for r in conn.execute(text(
                    "SELECT id, key FROM memories WHERE forgotten_at IS NOT NULL"))]
            self._unhold(conn, [mid for mid, _ in targets])
            for mid, mkey in targets:
                conn.execute(text("DELETE FROM memories WHERE id = :id"), {"id": mid})
                self._log(conn, "purge", robot_id=rid, memory_id=mid, key=mkey)
            if targets:
                self._bump_generation(conn)
                # The ids of purged memories are never handed out again (see _add_many).
                high = max(int(self._meta(conn, "id_high_water") or 0), *(m for m, _ in targets))
                self._set_meta(conn, "id_high_water", str(high))
        if self._index is not None:
            for mid, _ in targets:
                self._index.remove(mid)
        return len(targets)

    # -- catalogue -------------------------------------------------------------------

    def tags(self) -> dict[str, int]:
        with self._read() as conn:
            rows = conn.execute(text(
                "SELECT t.name, count(m.id) FROM tags t JOIN memory_tags mt ON mt.tag_id = t.id "
                "JOIN memories m ON m.id = mt.memory_id AND m.forgotten_at IS NULL "
                "GROUP BY t.name ORDER BY t.name")).all()
        return {r[0]: int(r[1]) for r in rows}

    def counts(self, robot: str) -> StoreCounts:
        with self._read() as conn:
            row = conn.execute(text(
                "SELECT "
                " (SELECT count(*) FROM memories WHERE forgotten_at IS NULL),"
                " (SELECT count(*) FROM memories m JOIN robots r ON r.id = m.robot_id "
                "   WHERE r.name = :robot AND m.forgotten_at IS NULL),"
                " (SELECT count(*) FROM memories WHERE forgotten_at IS NOT NULL),"
                " (SELECT count(*) FROM robots),"
                " (SELECT count(*) FROM memories m WHERE m.embedding IS NULL AND "
                f"  m.forgotten_at IS NULL AND {NOT_FAILED}),"
                f" ({FAILED_COUNT})"
            ), {"robot": robot}).first()
        assert row is not None
        return StoreCounts(total=row[0], robot=row[1], forgotten=row[2], robots=row[3],
                           missing_embeddings=row[4], failed_embeddings=row[5])
