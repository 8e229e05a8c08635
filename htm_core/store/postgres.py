"""The PostgreSQL + pgvector long-term store: one memory shared by many processes and robots.

How it works:

- SQLAlchemy 2 engine on psycopg 3 (``postgresql+psycopg``) with a ``QueuePool``, so a
  process opens a handful of connections and reuses them. Connections are not pinged
  before use (a round trip on every call); a pooled connection found dead (the server
  restarted) is replaced and the call retried once, which is safe because the failure
  came before anything was committed: a read, or a transaction before its ``COMMIT``.
- ``memories.embedding`` is a pgvector ``vector`` column. Its dimension is fixed when the
  first vector arrives (``ALTER ... TYPE vector(dim)``), and the HNSW cosine index
  (``vector_cosine_ops``, ``m`` / ``ef_construction`` configurable) is created then. Rows
  are stored L2-normalised, as on SQLite. ``hnsw.ef_search`` is set on a pooled
  connection when it holds another value than the search asks for. The index is partial
  (``forgotten_at IS NULL``), so forgotten memories never take a slot in an approximate
  result. Reads run in autocommit mode (no BEGIN / ROLLBACK round trips on the recall
  path).
- Full text: a generated ``tsvector`` column (``to_tsvector('english', ...)`` of
  :data:`~htm_core.store._text.PG_INDEX_TEXT`: punctuation as spaces, Latin diacritics
  removed) with a GIN index, ranked by ``ts_rank`` (``ts_rank_cd`` cost twice as much per
  matching row and ranked no better on the recall-quality set). User text is reduced to
  words and phrases (:func:`~htm_core.store._text.parse_query`, the rules SQLite follows
  too) and each goes through ``phraseto_tsquery`` as a bound value; they are OR-ed,
  except that a word in more than a tenth of the memories (by the table's statistics)
  only breaks ties. CJK runs are substrings (``strpos``) of the memories a partial index
  lists. Nothing the user types is ever parsed as tsquery syntax. A search is one
  statement.
- Timeframe (B-tree on ``created_at``), robot and tag filters are part of each SQL query.
  An HNSW scan applies filters after it has walked ``ef_search`` candidates, so when a
  filtered approximate search comes back short, the store re-runs it as an exact search
  (index scans off, bitmap scans on the filter indexes still allowed): a filter never
  starves the result.
- A batch of adds is a fixed number of statements whatever its size, in one transaction.
  Small batches send the rows as arrays (``INSERT ... SELECT FROM unnest(...) ... ON
  CONFLICT (key) DO NOTHING RETURNING``); batches of ``copy_min_rows`` new rows or more
  stream them with a binary ``COPY`` into a temporary staging table and insert from there
  with the same ``ON CONFLICT``. Vectors travel in pgvector's binary form, not as text.
- :meth:`PostgresStore.bulk_load` is a context manager for very large loads: it drops the
  HNSW index (and by default the GIN full-text index) while the rows go in and builds
  them once at the end with a larger ``maintenance_work_mem``, also when the load fails.
  Searches meanwhile stay correct (exact scans). A marker in ``htm_meta`` plus an
  advisory lock let the next store that opens rebuild the indexes of a loader that died.
  Concurrent writers never lose or duplicate a memory: the unique key decides, and a key
  another process inserted first is treated as an existing memory (touched, or a
  ``DuplicateKeyError`` when its content differs). Deadlocks and serialisation failures
  are retried.
- Schema versioning in ``htm_meta`` like SQLite's; ``migrate()`` runs under an advisory
  lock so processes starting together do not race; it never drops anything.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import re
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

try:
    import psycopg  # the driver SQLAlchemy loads for postgresql+psycopg; COPY goes through it
    from psycopg.adapt import Dumper
    from psycopg.pq import Format
except ImportError:
    from ..errors import missing_extra

    raise missing_extra("psycopg", "postgres") from None

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from ..errors import (
    ConfirmationRequiredError,
    DatabaseUnavailableError,
    DimensionMismatchError,
    DuplicateKeyError,
    NotFoundError,
    SchemaError,
    StoreError,
    ValidationError,
)
from ..models import Memory, Operation, Robot
from . import _common
from ._coherence import Merged, as_dict, merge_readd, touch_detail
from ._common import mask_url
from ._postgres_working import PostgresWorkingSet
from ._text import CJK_REGEX, PG_INDEX_TEXT, TextQuery, parse_query, tag_patterns
from ._vectors import (
    CHUNK_POSTGRES,
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
from .vector_index import normalise

if TYPE_CHECKING:
    from ..enrich.jobs import JobQueue

__all__ = ["DEFAULT_COPY_MIN_ROWS", "DEFAULT_EF_SEARCH", "PostgresStore", "postgres_url"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: ``hnsw.ef_search`` used when none is given. Chosen from ``benchmarks/hnsw_recall.py``
#: (recall@10 against exact search on 20k clustered 384-d vectors); see docs/postgres.md.
DEFAULT_EF_SEARCH = 64

#: Batches with at least this many new rows are written with COPY rather than arrays of
#: parameters. Chosen from ``benchmarks/postgres_ops.py``; see docs/postgres.md.
DEFAULT_COPY_MIN_ROWS = 16

#: Advisory-lock keys (per database): schema migration, fixing the vector dimension, bulk
#: loads (held shared by every running ``bulk_load``; taken exclusively to clean up after one).
_MIGRATE_LOCK = 0x68746D_0001
_DIMENSION_LOCK = 0x68746D_0002
_BULK_LOCK = 0x68746D_0003

#: ``htm_meta`` key present while a bulk load has the search indexes dropped.
_BULK_MARKER = "bulk_load"

#: SQLSTATEs worth retrying the whole transaction for: deadlock, serialisation failure.
_RETRYABLE = {"40P01", "40001"}
_RETRIES = 5

_HNSW_INDEX = "memories_embedding_hnsw"
_GIN_INDEX = "memories_tsv_gin"
_GIN_DDL = f"CREATE INDEX IF NOT EXISTS {_GIN_INDEX} ON memories USING gin (tsv)"

#: Columns and binary types of a COPY into ``memories`` (``vector`` is resolved per database).
_COPY_MEMORIES = (
    "COPY memories(id, key, content, content_hash, robot_id, importance, token_count, "
    "created_at, last_accessed, access_count, metadata, embedding, embedder, forgotten_at) "
    "FROM STDIN (FORMAT BINARY)")
_COPY_MEMORIES_TYPES: tuple[str, ...] = (
    "int8", "text", "text", "text", "int8", "float8", "int4", "timestamptz", "timestamptz",
    "int4", "jsonb", "vector", "text", "timestamptz")
_JSONB_OID = 3802  # built-in type oids are fixed
_COPY_OPERATIONS = ("COPY operations(op, robot_id, memory_id, key, detail) "
                    "FROM STDIN (FORMAT BINARY)")
_COPY_OPERATIONS_TYPES: tuple[str, ...] = ("text", "int8", "int8", "text", "jsonb")

_SCHEMA_V1 = [
    """CREATE TABLE IF NOT EXISTS htm_meta (
        key text PRIMARY KEY, value text NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS robots (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        name text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL DEFAULT now(),
        last_active timestamptz)""",
    """CREATE TABLE IF NOT EXISTS memories (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        key text NOT NULL UNIQUE,
        content text NOT NULL,
        content_hash text NOT NULL,
        robot_id bigint NOT NULL REFERENCES robots(id),
        importance double precision NOT NULL DEFAULT 1.0
            CHECK (importance >= 0 AND importance <= 10),
        token_count integer NOT NULL CHECK (token_count >= 0),
        created_at timestamptz NOT NULL,
        last_accessed timestamptz NOT NULL,
        access_count integer NOT NULL DEFAULT 0,
        metadata jsonb NOT NULL DEFAULT '{}',
        embedding vector,
        embedder text,
        forgotten_at timestamptz,
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED
    ) WITH (fillfactor = 90)""",
    "CREATE INDEX IF NOT EXISTS memories_created_at ON memories (created_at)",
    "CREATE INDEX IF NOT EXISTS memories_hash ON memories (content_hash, embedder)",
    "CREATE INDEX IF NOT EXISTS memories_robot ON memories (robot_id)",
    _GIN_DDL,
    """CREATE INDEX IF NOT EXISTS memories_missing_embedding ON memories (id)
        WHERE embedding IS NULL AND forgotten_at IS NULL""",
    """CREATE TABLE IF NOT EXISTS tags (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        name text NOT NULL UNIQUE)""",
    """CREATE TABLE IF NOT EXISTS memory_tags (
        memory_id bigint NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        tag_id bigint NOT NULL REFERENCES tags(id),
        PRIMARY KEY (memory_id, tag_id))""",
    "CREATE INDEX IF NOT EXISTS memory_tags_tag ON memory_tags (tag_id)",
    """CREATE TABLE IF NOT EXISTS working_memory (
        robot_id bigint NOT NULL REFERENCES robots(id),
        memory_id bigint NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        added_at timestamptz NOT NULL,
        PRIMARY KEY (robot_id, memory_id))""",
    "CREATE INDEX IF NOT EXISTS working_memory_memory ON working_memory (memory_id)",
    """CREATE TABLE IF NOT EXISTS operations (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        at timestamptz NOT NULL DEFAULT clock_timestamp(),
        op text NOT NULL,
        robot_id bigint,
        memory_id bigint,
        key text,
        detail jsonb NOT NULL DEFAULT '{}')""",
    "CREATE INDEX IF NOT EXISTS operations_at ON operations (at)",
]

#: Schema version 2, coherence part: per-robot working-memory item state (the robot's own
#: last access and count, entry and access order) so a restart restores the exact order, and
#: a per-robot working-set version every membership change bumps. (Ids come from an
#: identity sequence, which never hands out a number twice.)
_V2_COHERENCE = [
    """ALTER TABLE working_memory ADD COLUMN IF NOT EXISTS last_accessed timestamptz,
        ADD COLUMN IF NOT EXISTS access_count integer NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS seq bigint NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS access_seq bigint NOT NULL DEFAULT 0""",
    "ALTER TABLE robots ADD COLUMN IF NOT EXISTS working_version bigint NOT NULL DEFAULT 0",
    """UPDATE working_memory w SET last_accessed = o.last_accessed,
        access_count = o.access_count, seq = o.s, access_seq = o.a
        FROM (SELECT w2.robot_id, w2.memory_id, m.last_accessed, m.access_count,
                     row_number() OVER (PARTITION BY w2.robot_id
                                        ORDER BY w2.added_at, w2.memory_id) AS s,
                     row_number() OVER (PARTITION BY w2.robot_id
                                        ORDER BY m.last_accessed, w2.memory_id) AS a
              FROM working_memory w2 JOIN memories m ON m.id = w2.memory_id) o
        WHERE o.robot_id = w.robot_id AND o.memory_id = w.memory_id""",
]

#: Schema version 2, this branch's part: the marks of memories whose embedding failed.
_V2_VECTORS = [FAILURES_DDL.format(id_type="bigint", time_type="timestamptz")]

#: Version 2, full text (``_text``'s rules): the ``tsvector`` indexes the content with
#: ASCII punctuation as spaces and Latin diacritics removed (the generated column is
#: derived data, re-created with the new expression; its GIN index with it), and a
#: partial index lists the memories holding CJK characters, whose substrings a CJK
#: query looks for.
_V2_FTS = [
    "ALTER TABLE memories DROP COLUMN IF EXISTS tsv",
    "ALTER TABLE memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
    f"(to_tsvector('english'::regconfig, {PG_INDEX_TEXT})) STORED",
    _GIN_DDL,
    f"CREATE INDEX IF NOT EXISTS memories_cjk ON memories (id) WHERE content ~ '{CJK_REGEX}'",
    # Tag filters compare the name with A-Z lower-cased (``_text.fold_tag``).
    'CREATE INDEX IF NOT EXISTS tags_name_folded ON tags (lower(name COLLATE "C"))',
    "ANALYZE memories",
]

_MIGRATIONS: dict[int, list[str]] = {
    1: _SCHEMA_V1, 2: [*_V2_COHERENCE, *_V2_VECTORS, *_V2_FTS]}

_MEMORY_COLUMNS = (
    "m.id, m.key, m.content, m.content_hash, r.name AS robot, m.importance, m.token_count, "
    "m.created_at, m.last_accessed, m.access_count, m.metadata, m.embedder, m.forgotten_at, "
    "ARRAY(SELECT t.name FROM memory_tags mt JOIN tags t ON t.id = mt.tag_id "
    "WHERE mt.memory_id = m.id ORDER BY t.name) AS tags"
)

_VISIBLE = "m.forgotten_at IS NULL"


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


def _vector_literal(unit: np.ndarray) -> str:
    """pgvector's text form; 9 significant digits round-trip a float32 exactly."""
    return "[" + ",".join(f"{x:.9g}" for x in unit.tolist()) + "]"


#: A ``text()`` placeholder (``:name``), not a ``::`` cast.
_PARAM = re.compile(r"(?<![:\w]):(\w+)")


@functools.lru_cache(maxsize=512)
def _pyformat(sql: str) -> str:
    """``text()``'s ``:name`` placeholders as the driver's ``%(name)s`` (``::`` casts and
    literal ``%`` kept), for the reads on every recall's path, which skip SQLAlchemy's
    statement compilation (a tenth of a millisecond per statement here)."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


def _fetch(conn: Connection, sql: str, params: dict[str, Any]) -> list[Any]:
    return list(conn.exec_driver_sql(_pyformat(sql), params).all())


def _unit(vector: Sequence[float], what: str) -> np.ndarray:
    unit = normalise(vector)
    if not np.isfinite(unit).all():
        raise DimensionMismatchError(f"embedding for {what} contains NaN or infinity")
    return unit


class _VectorBinaryDumper(Dumper):
    """pgvector's binary input: int16 dimension, int16 unused, big-endian float4 values."""

    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        unit = np.asarray(obj, dtype=np.float32)
        return struct.pack("!HH", unit.shape[0], 0) + unit.astype(">f4").tobytes()


class _JsonTextDumper(Dumper):
    """``jsonb``'s binary input from JSON text already made by ``json.dumps`` (version 1)."""

    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return b"\x01" + str(obj).encode("utf-8")


_EMPTY_JSON = "{}"


def _vector_dumper(oid: int) -> type[Dumper]:
    """The binary vector dumper bound to this database's ``vector`` type oid."""
    return type("VectorBinaryDumper", (_VectorBinaryDumper,), {"oid": oid})


class _KeyRace(Exception):
    """A COPY met a key another writer committed after the batch looked (retry by statement)."""


def _units(records: Sequence[NewMemory]) -> list[np.ndarray | None]:
    """Each record's embedding as a float32 unit vector (None without one), in one pass.

    The caller has checked that all embeddings have one dimension.
    """
    have = [i for i, r in enumerate(records) if r.embedding is not None]
    out: list[np.ndarray | None] = [None] * len(records)
    if not have:
        return out
    matrix = np.asarray([records[i].embedding for i in have], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1)
    matrix = matrix / np.where(norms > 0, norms, 1.0).astype(np.float32)[:, None]
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        bad = records[have[int(np.argmin(finite))]]
        raise DimensionMismatchError(f"embedding for {bad.key!r} contains NaN or infinity")
    for row, i in enumerate(have):
        out[i] = matrix[row]
    return out


def _aware(*values: datetime | None) -> bool:
    return all(v is None or v.utcoffset() is not None for v in values)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


def _sqlstate(exc: DBAPIError) -> str | None:
    return getattr(exc.orig, "sqlstate", None)


def _check_int(name: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return value


class PostgresStore(PostgresWorkingSet):
    """The PostgreSQL + pgvector backend. See the module docstring for how it works.

    Args:
        url: ``postgresql://user:password@host:port/database`` (``postgres://`` and
            ``postgresql+psycopg://`` work too).
        migrate: create or upgrade the schema on open (default). With False, an
            unmigrated database is a :class:`~htm_core.errors.SchemaError` naming
            ``htm migrate``.
        pool_size: connections kept open by this process.
        max_overflow: extra connections allowed under load beyond ``pool_size``.
        pool_timeout: seconds to wait for a free connection.
        connect_timeout: seconds to wait for the server when connecting.
        hnsw_m: HNSW ``m`` (links per node), used when the index is created.
        hnsw_ef_construction: HNSW ``ef_construction``, used when the index is created.
        ef_search: HNSW ``ef_search`` for vector queries (per query override in
            :meth:`vector_search`); higher is more exact and slower.
        copy_min_rows: batches with at least this many new rows are streamed with a
            binary ``COPY`` (faster for large batches); smaller ones are sent as arrays.

    Example::

        store = PostgresStore("postgresql://htm:secret@localhost/htm")
        store.ensure_robot("assistant")
    """

    backend = "postgres"

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = True,
        pool_size: int = 5,
        max_overflow: int = 10,
        pool_timeout: float = 30.0,
        connect_timeout: int = 10,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        ef_search: int = DEFAULT_EF_SEARCH,
        copy_min_rows: int = DEFAULT_COPY_MIN_ROWS,
    ) -> None:
        self._url = postgres_url(url)
        self.url = mask_url(self._url)
        self.hnsw_m = _check_int("hnsw_m", hnsw_m, 2, 100)
        self.hnsw_ef_construction = _check_int("hnsw_ef_construction", hnsw_ef_construction,
                                               4, 1000)
        if self.hnsw_ef_construction < 2 * self.hnsw_m:
            raise ValidationError(
                f"hnsw_ef_construction ({hnsw_ef_construction}) must be at least 2 * hnsw_m "
                f"({2 * hnsw_m}); pgvector refuses a smaller one")
        self.ef_search = _check_int("ef_search", ef_search, 1, 1000)
        self.copy_min_rows = _check_int("copy_min_rows", copy_min_rows, 1, 2**31 - 1)
        self._robot_ids: dict[str, int] = {}
        # (newest id, monotonic time, embedder, centroid) of vector_centroid's last estimate.
        self._centroid: tuple[int, float, str | None, list[float] | None] | None = None
        # The vector dimension once vectors exist (see _prepare_vector_query).
        self._dim: int | None = None
        # (monotonic time, lexemes) of _common_lexemes' last read.
        self._common: tuple[float, list[str] | None] | None = None
        self._engine: Engine = create_engine(
            self._url,
            pool_size=_check_int("pool_size", pool_size, 1, 1000),
            max_overflow=_check_int("max_overflow", max_overflow, 0, 1000),
            pool_timeout=pool_timeout,
            pool_recycle=1800,
            connect_args={"connect_timeout": _check_int("connect_timeout", connect_timeout, 1, 3600),
                          "application_name": "htm"},
        )
        try:
            version = self.schema_version()
            if version > SCHEMA_VERSION:
                raise SchemaError(
                    f"database {self.url} has schema version {version}, newer than this htm "
                    f"understands ({SCHEMA_VERSION}); upgrade htm")
            if version < SCHEMA_VERSION:
                if not migrate:
                    raise SchemaError(
                        f"database {self.url} has schema version {version}; run "
                        "HTM(...).migrate() or `htm migrate` to create or upgrade it")
                self.migrate()
            self._recover_bulk_load()
        except BaseException:
            self._engine.dispose()
            raise

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"

    # -- transactions ----------------------------------------------------------------

    def _error(self, exc: DBAPIError, what: str) -> StoreError:
        """Map a driver error to the htm error a user can act on."""
        code = _sqlstate(exc) or ""
        message = str(exc.orig).strip()
        lost = isinstance(exc, (OperationalError, InterfaceError)) and not code
        if lost or code.startswith(("08", "57P", "53")):
            return DatabaseUnavailableError(
                f"cannot reach PostgreSQL at {self.url} ({what}): {message}; check the server "
                "is running and accepts connections from this host, and that the host, port, "
                "database, user and password in the URL are right")
        if code == "22000" and "dimension" in message:
            return DimensionMismatchError(
                f"{message}; this store holds vectors of another dimension: use the store's "
                "embedder or re-embed the store (HTM.reembed())")
        return StoreError(f"PostgreSQL {what} failed on {self.url}: {message}")

    def _pool_exhausted(self, exc: PoolTimeoutError, what: str) -> DatabaseUnavailableError:
        return DatabaseUnavailableError(
            f"no free connection to {self.url} ({what}) within pool_timeout: {exc}; raise "
            "pool_size / max_overflow / pool_timeout of PostgresStore, or check for "
            "long-running work holding connections")

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
                if _sqlstate(exc) in _RETRYABLE and attempt < _RETRIES - 1:
                    time.sleep(random.uniform(0.005, 0.02) * 2**attempt)
                    continue
                if before_commit and exc.connection_invalidated and not reconnected:
                    reconnected = True  # nothing was committed: run it again, once
                    continue
                raise self._error(exc, what) from exc
            except PoolTimeoutError as exc:
                raise self._pool_exhausted(exc, what) from exc
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
                raise self._error(exc, what) from exc
            except PoolTimeoutError as exc:
                raise self._pool_exhausted(exc, what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

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
            if current > SCHEMA_VERSION:
                raise SchemaError(
                    f"database {self.url} has schema version {current}, newer than this htm "
                    f"understands ({SCHEMA_VERSION}); upgrade htm")
            if current == SCHEMA_VERSION:
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

        try:
            with self._engine.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATE_LOCK})
                conn.commit()
                try:
                    with conn.begin():
                        return step(conn)
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATE_LOCK})
                    conn.commit()
        except DBAPIError as exc:
            raise self._error(exc, "migrating the schema") from exc
        except PoolTimeoutError as exc:
            raise self._pool_exhausted(exc, "migrating the schema") from exc

    def close(self) -> None:
        """Release every pooled connection."""
        self._engine.dispose()

    def open_job_queue(self) -> JobQueue:
        """The enrichment job queue on this store's database (see ``LongTermStore``)."""
        from ..enrich.jobs import job_queue_on

        return job_queue_on(self._engine)

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

    def ensure_robot(self, name: str) -> Robot:
        """Register ``name`` if new; return it."""
        self._robot_id(name)
        return next(r for r in self.robots() if r.name == name)

    def robots(self) -> list[Robot]:
        """Every robot on the store, with its count of visible memories."""
        def read(conn: Connection) -> list[Robot]:
            rows = conn.execute(text(
                "SELECT r.id, r.name, r.created_at, r.last_active, "
                "(SELECT count(*) FROM memories m WHERE m.robot_id = r.id "
                " AND m.forgotten_at IS NULL) FROM robots r ORDER BY r.name")).all()
            return [Robot(id=int(r[0]), name=r[1], created_at=r[2].astimezone(timezone.utc),
                          last_active=_utc(r[3]), memory_count=int(r[4])) for r in rows]

        return self._read("listing robots", read)

    # -- log -------------------------------------------------------------------------

    @staticmethod
    def _log_many(conn: Connection,
                  entries: Sequence[tuple[str, int | None, int | None, str | None,
                                          dict[str, Any] | None]]) -> None:
        """Append (op, robot id, memory id, key, detail) lines in one statement."""
        if not entries:
            return
        conn.execute(text(
            "INSERT INTO operations(op, robot_id, memory_id, key, detail) "
            "SELECT op, rid, mid, k, CAST(d AS jsonb) FROM unnest("
            "CAST(:ops AS text[]), CAST(:rids AS bigint[]), CAST(:mids AS bigint[]), "
            "CAST(:keys AS text[]), CAST(:details AS text[])) WITH ORDINALITY "
            "AS e(op, rid, mid, k, d, ord) ORDER BY ord"),
            {"ops": [e[0] for e in entries], "rids": [e[1] for e in entries],
             "mids": [e[2] for e in entries], "keys": [e[3] for e in entries],
             "details": [json.dumps(e[4] or {}) for e in entries]})

    def log(self, op: str, *, robot: str | None, key: str | None = None,
            detail: dict[str, Any] | None = None) -> None:
        """Append a line to the operations log."""
        rid = self._robot_id(robot) if robot else None
        self._run("writing the operations log",
                  lambda conn: self._log_many(conn, [(op, rid, None, key, detail)]))

    def operations(self, *, limit: int = 100, robot: str | None = None,
                   op: str | None = None) -> list[Operation]:
        """The newest operations first."""
        where: list[str] = []
        params: dict[str, Any] = {"limit": limit}
        if robot is not None:
            where.append("r.name = :robot")
            params["robot"] = robot
        if op is not None:
            where.append("o.op = :op")
            params["op"] = op
        sql = ("SELECT o.id, o.at, o.op, r.name, o.key, o.detail FROM operations o "
               "LEFT JOIN robots r ON r.id = o.robot_id "
               + (f"WHERE {' AND '.join(where)} " if where else "")
               + "ORDER BY o.id DESC LIMIT :limit")
        rows = self._read("reading the operations log",
                          lambda conn: conn.execute(text(sql), params).all())
        return [Operation(id=int(r[0]), at=r[1].astimezone(timezone.utc), op=r[2], robot=r[3],
                          key=r[4], detail=dict(r[5] or {})) for r in rows]

    # -- writing ---------------------------------------------------------------------

    def add_many(self, records: Sequence[NewMemory]) -> list[AddResult]:
        """Write ``records`` in one transaction, in a fixed number of statements.

        A key that exists with the same content is touched (and restored if forgotten);
        with different content it is a ``DuplicateKeyError`` and nothing is written. The
        same holds for a key another process inserts while this batch is being written.
        With ``copy_min_rows`` new rows or more the rows are streamed with a binary COPY
        (see the module docstring); the outcome is the same either way.
        """
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
        vectors = batch_embedder(records)  # one embedder and dimension per batch
        dims = {vectors[1]} if vectors is not None else set()
        units = _units(records)
        robot_ids = self._robot_id_map([r.robot for r in records])

        def write(conn: Connection, allow_copy: bool
                  ) -> tuple[list[AddResult], WorkingResult | None]:
            results = self._add_many(conn, records, units, robot_ids, dims, allow_copy=allow_copy)
            change = working(results) if working is not None else None
            if change is None:
                return results, None
            return results, self._apply_working(conn, change, expected_version)

        try:
            return self._run("adding memories", lambda conn: write(conn, True))
        except _KeyRace:  # rolled back; the statement path's ON CONFLICT sorts out the race
            return self._run("adding memories", lambda conn: write(conn, False))

    def _add_many(self, conn: Connection, records: Sequence[NewMemory],
                  units: Sequence[np.ndarray | None], robot_ids: dict[str, int],
                  dims: set[int], *, allow_copy: bool) -> list[AddResult]:
        if dims:
            embedder = next(r.embedder for r in records if r.embedding is not None)
            self._check_embedding(conn, embedder or "unknown", next(iter(dims)))
        # The first record of each key is the one inserted; later ones with that key touch it.
        first: dict[str, int] = {}
        for i, rec in enumerate(records):
            if rec.key in first:
                if records[first[rec.key]].content != rec.content:
                    raise DuplicateKeyError(
                        f"key {rec.key!r} is given twice in one batch with different content; "
                        "choose another key")
            else:
                first[rec.key] = i
        existing = self._existing(conn, list(first))
        new = [i for k, i in first.items() if k not in existing]
        inserted: dict[str, int] = {}
        copied = False
        hashes: dict[int, str] = {}
        if new:
            fresh = [records[i] for i in new]
            vectors = [units[i] for i in new]
            copied = allow_copy and len(fresh) >= self.copy_min_rows and all(
                _aware(r.created_at, r.last_accessed, r.forgotten_at) for r in fresh)
            if copied:
                hashes = {i: records[i].content_hash for i in new}
                inserted = self._insert_copy(conn, fresh, [hashes[i] for i in new], vectors,
                                             robot_ids)
            else:  # naive datetimes go as parameters: the server reads them in its time zone
                inserted = self._insert_statement(conn, fresh, vectors, robot_ids)
            raced = [records[i].key for i in new if records[i].key not in inserted]
            if raced:  # another process committed these keys after our first look
                existing.update(self._existing(conn, raced))
        # Every record that did not create its memory touches it: check content, count.
        touches: dict[int, int] = {}
        log: list[tuple[str, int | None, int | None, str | None, dict[str, Any] | None]] = []
        restored: set[int] = set()
        ids: list[int] = []
        for i, rec in enumerate(records):
            rid = robot_ids[rec.robot]
            if first[rec.key] == i and rec.key in inserted:
                ids.append(inserted[rec.key])
                log.append(("add", rid, inserted[rec.key], rec.key, None))
                continue
            if rec.key in inserted:
                mid, forgotten = inserted[rec.key], records[first[rec.key]].forgotten_at is not None
            else:
                mid, old_content, was_forgotten = existing[rec.key]
                if old_content != rec.content:
                    state = " (forgotten; purge it to reuse the key)" if was_forgotten else ""
                    raise DuplicateKeyError(
                        f"key {rec.key!r} already holds different content{state}; choose "
                        "another key")
                forgotten = was_forgotten
            forgotten = forgotten and mid not in restored
            restored.add(mid)
            touches[mid] = touches.get(mid, 0) + 1
            log.append(("restore" if forgotten else "touch", rid, mid, rec.key,
                        {"reason": "added again"}))
            ids.append(mid)
        if touches:
            conn.execute(text(
                "UPDATE memories m SET last_accessed = GREATEST(m.last_accessed, now()), "
                "access_count = m.access_count + t.n, forgotten_at = NULL "
                "FROM unnest(CAST(:ids AS bigint[]), CAST(:ns AS integer[])) AS t(id, n) "
                "WHERE m.id = t.id"),
                {"ids": list(touches), "ns": list(touches.values())})
        self._link_tags(conn, [(inserted[records[i].key], records[i].tags) for i in new
                               if records[i].key in inserted])
        self._merge_readds(conn, [(n, ids[i], rec) for n, (i, rec) in enumerate(
            (i, rec) for i, rec in enumerate(records)
            if not (first[rec.key] == i and rec.key in inserted))], log)
        created = {inserted[records[i].key]: i for i in new if records[i].key in inserted}
        by_id: dict[int, Memory] = {}
        if copied:
            self._copy_rows(conn, _COPY_OPERATIONS, _COPY_OPERATIONS_TYPES, (
                (e[0], e[1], e[2], e[3], json.dumps(e[4]) if e[4] else _EMPTY_JSON) for e in log))
            by_id = self._inserted_memories(conn, records, units, hashes, {
                mid: i for mid, i in created.items() if mid not in touches})
        else:
            self._log_many(conn, log)
        rest = sorted({mid for mid in ids if mid not in by_id})
        if rest:
            by_id.update((m.id, m) for m in self._fetch(conn, "m.id = ANY(:ids)", {"ids": rest},
                                                          False))
        return [AddResult(by_id[mid], created.get(mid) == i) for i, mid in enumerate(ids)]

    @staticmethod
    def _merge_readds(conn: Connection, readds: Sequence[tuple[int, int, NewMemory]],
                      log: list[tuple[str, int | None, int | None, str | None,
                                      dict[str, Any] | None]]) -> None:
        """Merge each re-add ``(n, id, record)`` into its memory (see ``merge_readd``); the
        n-th re-add's line in ``log`` says what it changed."""
        if not readds:
            return
        state = {int(r[0]): Merged(float(r[1]), as_dict(r[2]), set(r[3])) for r in conn.execute(
            text("SELECT m.id, m.importance, m.metadata, ARRAY(SELECT t.name FROM memory_tags mt "
                 "JOIN tags t ON t.id = mt.tag_id WHERE mt.memory_id = m.id) FROM memories m "
                 "WHERE m.id = ANY(:ids)"), {"ids": sorted({mid for _, mid, _ in readds})})}
        lines = [i for i, entry in enumerate(log) if entry[0] != "add"]
        changed: set[int] = set()
        links: list[tuple[int, Sequence[str]]] = []
        for n, mid, rec in readds:
            now = state[mid]
            step = merge_readd(Merged(now.importance, now.metadata, set(now.tags)), rec)
            state[mid] = Merged(step.importance, step.metadata, step.tags)
            if step.detail.get("tags"):
                links.append((mid, step.detail["tags"]))
            if step.changed_row:
                changed.add(mid)
            entry = log[lines[n]]
            log[lines[n]] = (*entry[:4], touch_detail(step))
        PostgresStore._link_tags(conn, links)
        if changed:
            rows = sorted(changed)
            conn.execute(text(
                "UPDATE memories m SET importance = v.i, metadata = CAST(v.meta AS jsonb) "
                "FROM unnest(CAST(:ids AS bigint[]), CAST(:imps AS double precision[]), "
                "CAST(:metas AS text[])) AS v(id, i, meta) WHERE m.id = v.id"),
                {"ids": rows, "imps": [state[m].importance for m in rows],
                 "metas": [json.dumps(state[m].metadata) for m in rows]})

    @staticmethod
    def _insert_statement(conn: Connection, records: Sequence[NewMemory],
                          units: Sequence[np.ndarray | None],
                          robot_ids: dict[str, int]) -> dict[str, int]:
        """Insert ``records`` as arrays of parameters; key -> id of the rows inserted."""
        literals = [None if u is None else _vector_literal(u) for u in units]
        rows = conn.execute(text(
            "INSERT INTO memories(key, content, content_hash, robot_id, importance, "
            "token_count, created_at, last_accessed, access_count, metadata, embedding, "
            "embedder, forgotten_at) "
            "SELECT k, c, h, rid, imp, tok, created, accessed, cnt, CAST(meta AS jsonb), "
            "CAST(emb AS vector), embn, forgotten FROM unnest("
            "CAST(:keys AS text[]), CAST(:contents AS text[]), CAST(:hashes AS text[]), "
            "CAST(:rids AS bigint[]), CAST(:imps AS double precision[]), "
            "CAST(:toks AS integer[]), CAST(:created AS timestamptz[]), "
            "CAST(:accessed AS timestamptz[]), CAST(:counts AS integer[]), "
            "CAST(:metas AS text[]), CAST(:embs AS text[]), CAST(:embns AS text[]), "
            "CAST(:forgotten AS timestamptz[])) WITH ORDINALITY AS v(k, c, h, rid, imp, tok, "
            "created, accessed, cnt, meta, emb, embn, forgotten, ord) ORDER BY ord "
            "ON CONFLICT (key) DO NOTHING RETURNING id, key"),
            {"keys": [r.key for r in records],
             "contents": [r.content for r in records],
             "hashes": [r.content_hash for r in records],
             "rids": [robot_ids[r.robot] for r in records],
             "imps": [float(r.importance) for r in records],
             "toks": [int(r.token_count) for r in records],
             "created": [r.created_at for r in records],
             "accessed": [r.last_accessed or r.created_at for r in records],
             "counts": [int(r.access_count) for r in records],
             "metas": [json.dumps(r.metadata or {}) for r in records],
             "embs": literals,
             "embns": [r.embedder if v is not None else None
                       for r, v in zip(records, literals, strict=True)],
             "forgotten": [r.forgotten_at for r in records]}).all()
        return {str(r[1]): int(r[0]) for r in rows}

    @staticmethod
    def _copy_rows(conn: Connection, statement: str, types: Sequence[str],
                   rows: Iterator[tuple[Any, ...]] | Sequence[tuple[Any, ...]]) -> None:
        """Stream ``rows`` with a binary COPY on the transaction's own connection."""
        driver = conn.connection.driver_connection
        assert driver is not None  # a checked-out connection always has one
        oid: int | None = None
        if "vector" in types:
            oid = int(conn.execute(text("SELECT CAST('vector' AS regtype)::oid")).scalar_one())
        try:
            with driver.cursor() as cur:
                if oid is not None:
                    cur.adapters.register_dumper(None, _vector_dumper(oid))
                jsonb = type("JsonTextDumper", (_JsonTextDumper,), {"oid": _JSONB_OID})
                cur.adapters.register_dumper(None, jsonb)
                with cur.copy(statement) as copy:
                    copy.set_types([oid if t == "vector" and oid is not None else t
                                    for t in types])
                    for row in rows:
                        copy.write_row(row)
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name == "memories_key_key":
                raise _KeyRace() from exc
            raise DBAPIError.instance(statement, None, exc, psycopg.Error) from exc
        except psycopg.Error as exc:
            raise DBAPIError.instance(statement, None, exc, psycopg.Error) from exc

    def _insert_copy(self, conn: Connection, records: Sequence[NewMemory], hashes: Sequence[str],
                     units: Sequence[np.ndarray | None],
                     robot_ids: dict[str, int]) -> dict[str, int]:
        """Stream ``records`` into ``memories`` with a binary COPY; key -> id.

        Ids are drawn from the table's identity sequence first, so no row needs to come
        back. The batch has locked the keys that exist; a key another writer commits in
        between makes the COPY fail (``_KeyRace``), and the batch is re-run by statement.
        """
        ids = sorted(int(i) for i in conn.execute(text(
            "SELECT nextval(pg_get_serial_sequence('memories', 'id')) "
            "FROM generate_series(1, :n)"), {"n": len(records)}).scalars())
        self._copy_rows(conn, _COPY_MEMORIES, _COPY_MEMORIES_TYPES, (
            (mid, r.key, r.content, h, robot_ids[r.robot], float(r.importance),
             int(r.token_count), r.created_at, r.last_accessed or r.created_at,
             int(r.access_count), json.dumps(r.metadata) if r.metadata else _EMPTY_JSON, unit,
             r.embedder if unit is not None else None, r.forgotten_at)
            for mid, r, h, unit in zip(ids, records, hashes, units, strict=True)))
        return {r.key: mid for mid, r in zip(ids, records, strict=True)}

    @staticmethod
    def _inserted_memories(conn: Connection, records: Sequence[NewMemory],
                           units: Sequence[np.ndarray | None], hashes: dict[int, str],
                           chosen: dict[int, int]) -> dict[int, Memory]:
        """The memories just copied in (id -> index of their record), built from the records.

        What the database adds is read back: the order of tags (its collation, as
        ``_fetch`` returns them) and metadata as ``jsonb`` normalises it.
        """
        names = sorted({t for i in chosen.values() for t in records[i].tags})
        rank: dict[str, int] = {}
        if names:
            rank = {str(r[0]): n for n, r in enumerate(conn.execute(text(
                "SELECT n FROM unnest(CAST(:names AS text[])) AS n ORDER BY n"),
                {"names": names}))}
        with_meta = [mid for mid, i in chosen.items() if records[i].metadata]
        metas: dict[int, dict[str, Any]] = {}
        if with_meta:
            metas = {int(r[0]): dict(r[1]) for r in conn.execute(text(
                "SELECT id, metadata FROM memories WHERE id = ANY(:ids)"), {"ids": with_meta})}
        out: dict[int, Memory] = {}
        for mid, i in chosen.items():
            r = records[i]
            out[mid] = Memory(
                id=mid, key=r.key, content=r.content, content_hash=hashes[i], robot=r.robot,
                importance=float(r.importance), token_count=int(r.token_count),
                created_at=r.created_at.astimezone(timezone.utc),
                last_accessed=(r.last_accessed or r.created_at).astimezone(timezone.utc),
                access_count=int(r.access_count),
                tags=tuple(sorted(set(r.tags), key=rank.__getitem__)) if r.tags else (),
                metadata=metas.get(mid, {}),
                embedder=r.embedder if units[i] is not None else None,
                forgotten_at=_utc(r.forgotten_at))
        return out

    @staticmethod
    def _existing(conn: Connection, keys: Sequence[str]) -> dict[str, tuple[int, str, bool]]:
        """key -> (id, content, forgotten) of the memories already holding ``keys``.

        The rows are locked (in key order, so writers cannot deadlock on them) until the
        batch commits: a concurrent forget or purge cannot slip between check and touch.
        """
        rows = conn.execute(text(
            "SELECT key, id, content, forgotten_at IS NOT NULL FROM memories "
            "WHERE key = ANY(:keys) ORDER BY key FOR UPDATE"), {"keys": list(keys)})
        return {str(r[0]): (int(r[1]), str(r[2]), bool(r[3])) for r in rows}

    @staticmethod
    def _link_tags(conn: Connection, items: Sequence[tuple[int, Sequence[str]]]) -> None:
        pairs = [(mid, tag) for mid, tags in items for tag in tags]
        if not pairs:
            return
        # Sorted, so concurrent writers take the tag rows' locks in the same order.
        conn.execute(text(
            "INSERT INTO tags(name) SELECT DISTINCT n FROM unnest(CAST(:names AS text[])) AS n "
            "ORDER BY n ON CONFLICT (name) DO NOTHING"),
            {"names": sorted({tag for _mid, tag in pairs})})
        conn.execute(text(
            "INSERT INTO memory_tags(memory_id, tag_id) SELECT p.mid, t.id FROM unnest("
            "CAST(:mids AS bigint[]), CAST(:names AS text[])) AS p(mid, name) "
            "JOIN tags t ON t.name = p.name ON CONFLICT DO NOTHING"),
            {"mids": [p[0] for p in pairs], "names": [p[1] for p in pairs]})

    def touch(self, ids: Sequence[int], *, at: datetime) -> None:
        """Record an access: ``last_accessed`` (never moved back) and ``access_count``."""
        if not ids:
            return
        self._run("recording an access", lambda conn: conn.execute(text(
            "UPDATE memories SET last_accessed = GREATEST(last_accessed, :t), "
            "access_count = access_count + 1 WHERE id = ANY(:ids)"),
            {"t": at, "ids": sorted({int(i) for i in ids})}))

    def set_embeddings(self, items: Sequence[tuple[int, Sequence[float]]], embedder: str) -> None:
        """Store vectors for existing memories in one statement."""
        if not items:
            return
        units = [(int(mid), _unit(vec, f"memory {mid}")) for mid, vec in items]
        dims = {len(u) for _, u in units}
        if len(dims) != 1:
            raise DimensionMismatchError(
                f"embeddings in one batch have different dimensions: {sorted(dims)}")

        dim = next(iter(dims))

        def write(conn: Connection) -> None:
            self._check_embedding(conn, embedder, dim)
            conn.execute(text(
                "UPDATE memories m SET embedding = CAST(v.e AS vector), embedder = :n "
                "FROM unnest(CAST(:ids AS bigint[]), CAST(:embs AS text[])) AS v(id, e) "
                "WHERE m.id = v.id"),
                {"ids": [mid for mid, _ in units], "embs": [_vector_literal(u) for _, u in units],
                 "n": embedder})
            clear_failures(conn, [mid for mid, _ in units])

        self._run("storing embeddings", write)

    def reset_embeddings(self) -> None:
        """Drop every vector, the HNSW index and the fixed dimension, to re-embed from scratch.

        Every vector write reads ``htm_meta`` first (the embedder check), so locking that
        table first waits for the writes in flight and holds back new ones until the reset
        commits: a write checked against the old embedder can never land after the reset.
        """
        def write(conn: Connection) -> None:
            conn.execute(text("LOCK TABLE htm_meta IN ACCESS EXCLUSIVE MODE"))
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _DIMENSION_LOCK})
            conn.execute(text("UPDATE memories SET embedding = NULL, embedder = NULL "
                              "WHERE embedding IS NOT NULL OR embedder IS NOT NULL"))
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {_HNSW_INDEX}")
            conn.exec_driver_sql("ALTER TABLE memories ALTER COLUMN embedding TYPE vector")
            conn.execute(text("DELETE FROM htm_meta WHERE key IN ('embedder', 'embedding_dim')"))
            clear_failures(conn)
            self._log_many(conn, [("reset_embeddings", None, None, None, None)])

        self._run("resetting embeddings", write)
        self._centroid = None
        self._dim = None

    # -- bulk loading ----------------------------------------------------------------

    @contextmanager
    def bulk_load(self, *, maintenance_work_mem_mb: int = 1024,
                  parallel_workers: int | None = None,
                  defer_fulltext: bool = True) -> Iterator[PostgresStore]:
        """Load many memories with the search indexes built once at the end.

        Keeping the HNSW graph (and the GIN full-text index) up to date row by row is
        what limits large loads; inside this block they are dropped, and on the way out
        (also when the block raises) the table is vacuumed, the indexes are built again
        over all the rows with ``maintenance_work_mem_mb`` of memory and up to
        ``parallel_workers`` parallel workers (None: the server's
        ``max_parallel_maintenance_workers``), and the table is analysed. Every
        ``add_many`` keeps its usual guarantees; searches meanwhile are exact scans, so
        they stay correct, only slower. The build at the end blocks
        writers (not readers) for its duration. With ``defer_fulltext=False`` the GIN
        index is kept and maintained as rows arrive. The block keeps one pooled
        connection for itself (it holds the advisory lock that marks the load as alive).

        Example::

            with store.bulk_load():
                for batch in batches:          # lists of NewMemory, e.g. 10,000 each
                    store.add_many(batch)
        """
        memory = _check_int("maintenance_work_mem_mb", maintenance_work_mem_mb, 1, 2**31 - 1)
        workers = None if parallel_workers is None else _check_int(
            "parallel_workers", parallel_workers, 0, 1024)

        def start(conn: Connection) -> None:
            self._set_meta(conn, _BULK_MARKER, json.dumps({"defer_fulltext": defer_fulltext}))
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {_HNSW_INDEX}")
            if defer_fulltext:
                conn.exec_driver_sql(f"DROP INDEX IF EXISTS {_GIN_INDEX}")
            self._log_many(conn, [("bulk_load", None, None, None, {"phase": "start"})])

        try:
            holder = self._engine.connect()
        except DBAPIError as exc:
            raise self._error(exc, "starting a bulk load") from exc
        except PoolTimeoutError as exc:
            raise self._pool_exhausted(exc, "starting a bulk load") from exc
        try:
            try:
                # Held for the whole load: tells other stores this loader is alive.
                holder.execute(text("SELECT pg_advisory_lock_shared(:k)"), {"k": _BULK_LOCK})
                holder.commit()
            except DBAPIError as exc:
                raise self._error(exc, "starting a bulk load") from exc
            try:
                self._run("starting a bulk load", start)
                yield self
            finally:
                try:
                    holder.execute(text("SELECT pg_advisory_unlock_shared(:k)"),
                                   {"k": _BULK_LOCK})
                    holder.commit()
                except DBAPIError:
                    holder.invalidate()  # closing the session releases the lock too
                self._vacuum()
                self.rebuild_indexes(maintenance_work_mem_mb=memory, parallel_workers=workers)
        finally:
            holder.close()

    def _vacuum(self) -> None:
        """VACUUM the table after a load, before the big indexes exist again.

        The load's inserts would otherwise set off autovacuum soon after, a full pass
        over the new rows competing with the first searches (and, by then, visiting the
        rebuilt indexes too). A failure here only costs that later pass: it is logged.
        """
        try:
            with self._engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM memories")
        except (DBAPIError, PoolTimeoutError) as exc:
            logger.warning("%s: VACUUM after a bulk load failed (autovacuum will do it): %s",
                           self.url, exc)

    def rebuild_indexes(self, *, maintenance_work_mem_mb: int = 1024,
                        parallel_workers: int | None = None) -> list[str]:
        """Build the GIN and HNSW search indexes if they are missing; return those built.

        :meth:`bulk_load` calls this on its way out; call it yourself after a load was
        interrupted. Clears the bulk-load marker unless another load is still running.
        """
        memory = _check_int("maintenance_work_mem_mb", maintenance_work_mem_mb, 1, 2**31 - 1)
        workers = None if parallel_workers is None else _check_int(
            "parallel_workers", parallel_workers, 0, 1024)
        return self._run("rebuilding the search indexes",
                         lambda conn: self._rebuild(conn, memory, workers, abandoned_only=False))

    def _rebuild(self, conn: Connection, memory_mb: int, workers: int | None, *,
                 abandoned_only: bool) -> list[str]:
        alone = bool(conn.execute(text("SELECT pg_try_advisory_xact_lock(:k)"),
                                  {"k": _BULK_LOCK}).scalar())
        if abandoned_only and not alone:
            return []  # a bulk load is running; it builds the indexes when it ends
        conn.execute(text("SELECT set_config('maintenance_work_mem', :m, true)"),
                     {"m": f"{memory_mb}MB"})
        if workers is not None:
            conn.execute(text("SELECT set_config('max_parallel_maintenance_workers', :w, true)"),
                         {"w": str(workers)})
        present = {str(r[0]) for r in conn.execute(text(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' "
            "AND schemaname = current_schema()"))}
        built: list[str] = []
        if _GIN_INDEX not in present:
            conn.exec_driver_sql(_GIN_DDL)
            built.append(_GIN_INDEX)
        if _HNSW_INDEX not in present and self._info(self._meta(conn)) is not None:
            conn.exec_driver_sql(self._hnsw_ddl())
            built.append(_HNSW_INDEX)
        if alone:
            conn.execute(text("DELETE FROM htm_meta WHERE key = :k"), {"k": _BULK_MARKER})
        if built:
            conn.exec_driver_sql("ANALYZE memories")
        self._log_many(conn, [("bulk_load", None, None, None,
                               {"phase": "indexes built", "built": built})])
        return built

    def _recover_bulk_load(self) -> None:
        """Build the indexes a bulk load dropped when that load's process died mid-way."""
        marker = self._read("reading the bulk-load marker", lambda conn: conn.execute(
            text("SELECT value FROM htm_meta WHERE key = :k"), {"k": _BULK_MARKER}).scalar())
        if marker is None:
            return
        built = self._run("rebuilding the search indexes", lambda conn: self._rebuild(
            conn, 1024, None, abandoned_only=True))
        if built:
            logger.warning("%s: a bulk load ended without rebuilding its indexes; rebuilt %s",
                           self.url, ", ".join(built))

    # -- reading ---------------------------------------------------------------------

    @staticmethod
    def _to_memory(row: Any, include_embedding: bool) -> Memory:
        return Memory(
            id=int(row.id), key=row.key, content=row.content, content_hash=row.content_hash,
            robot=row.robot, importance=float(row.importance), token_count=int(row.token_count),
            created_at=row.created_at.astimezone(timezone.utc),
            last_accessed=row.last_accessed.astimezone(timezone.utc),
            access_count=int(row.access_count), tags=tuple(row.tags),
            metadata=dict(row.metadata or {}), embedder=row.embedder,
            embedding=[float(x) for x in row.embedding]
            if include_embedding and row.embedding is not None else None,
            forgotten_at=_utc(row.forgotten_at),
        )

    def _fetch(self, conn: Connection, where: str, params: dict[str, Any],
               include_embedding: bool, *, join: str = "") -> list[Memory]:
        cols = _MEMORY_COLUMNS + (", CAST(m.embedding AS real[]) AS embedding"
                                  if include_embedding else "")
        rows = conn.execute(text(
            f"SELECT {cols} FROM memories m JOIN robots r ON r.id = m.robot_id {join} "
            f"WHERE {where}"), params).all()
        return [self._to_memory(r, include_embedding) for r in rows]

    def get(self, key: str, *, include_forgotten: bool = False,
            include_embedding: bool = False) -> Memory | None:
        """The memory under ``key``, or None (forgotten ones only when asked)."""
        where = "m.key = :key" + ("" if include_forgotten else f" AND {_VISIBLE}")
        found = self._read("reading a memory",
                           lambda conn: self._fetch(conn, where, {"key": key}, include_embedding))
        return found[0] if found else None

    def get_many(self, ids: Sequence[int], *, include_embedding: bool = False,
                 include_forgotten: bool = False) -> list[Memory]:
        """Memories with these ids (visible ones unless asked), in the order of ``ids``."""
        if not ids:
            return []
        where = "m.id = ANY(:ids)" + ("" if include_forgotten else f" AND {_VISIBLE}")
        found = self._read("reading memories", lambda conn: self._fetch(
            conn, where, {"ids": [int(i) for i in ids]}, include_embedding))
        by_id = {m.id: m for m in found}
        return [by_id[i] for i in ids if i in by_id]

    def find_embedding(self, content_hash: str, embedder: str) -> list[float] | None:
        """A stored vector for this content by this embedder, if any (the store cache)."""
        row = self._read("looking up an embedding", lambda conn: conn.execute(text(
            "SELECT CAST(embedding AS real[]) FROM memories WHERE content_hash = :h "
            f"AND embedder = :e AND embedding IS NOT NULL AND NOT {CHUNK_POSTGRES} LIMIT 1"),
            {"h": content_hash, "e": embedder}).first())
        return [float(x) for x in row[0]] if row else None

    def find_embeddings(self, content_hashes: Sequence[str], embedder: str
                        ) -> dict[str, list[float]]:
        """Stored vectors by this embedder for any of these contents, by content hash."""
        if not content_hashes:
            return {}
        rows = self._read("looking up embeddings", lambda conn: conn.execute(text(
            "SELECT DISTINCT ON (content_hash) content_hash, CAST(embedding AS real[]) "
            "FROM memories WHERE content_hash = ANY(:h) AND embedder = :e "
            f"AND embedding IS NOT NULL AND NOT {CHUNK_POSTGRES}"),
            {"h": list(dict.fromkeys(content_hashes)), "e": embedder}).all())
        return {str(r[0]): [float(x) for x in r[1]] for r in rows}

    def missing_embeddings(self, *, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        """Up to ``limit`` (id, content, metadata) of visible memories without a vector and
        not marked as failing, oldest id first."""
        rows = self._read("listing memories without embeddings", lambda conn: conn.execute(text(
            "SELECT m.id, m.content, m.metadata FROM memories m WHERE m.embedding IS NULL "
            f"AND m.forgotten_at IS NULL AND {NOT_FAILED} ORDER BY m.id LIMIT :l"),
            {"l": limit}).all())
        return [(int(r[0]), str(r[1]), dict(r[2] or {})) for r in rows]

    def mark_embedding_failures(self, failures: Sequence[tuple[int, str]], embedder: str) -> None:
        """Mark memories ``(id, reason)`` whose text ``embedder`` rejects."""
        now = datetime.now(timezone.utc)
        self._run("marking failed embeddings",
                  lambda conn: mark_failures(conn, failures, embedder, now))

    def embedding_failures(self, *, limit: int = 100) -> list[EmbeddingFailure]:
        """The memories marked as failing, with the reason, oldest mark first."""
        rows = self._read("listing failed embeddings", lambda conn: list_failures(conn, limit))
        return [EmbeddingFailure(key=k, embedder=e, error=r, failed_at=t) for k, e, r, t in rows]

    def retry_embedding_failures(self) -> int:
        """Clear every failure mark (the memories are pending again); return how many."""
        return self._run("clearing failed embeddings", clear_failures)

    def iter_memories(self, *, batch_size: int = 1000, include_forgotten: bool = True,
                      include_embedding: bool = False, after_id: int = 0) -> Iterator[list[Memory]]:
        """Every memory in id order, in batches of ``batch_size`` (keyset pagination)."""
        last = after_id
        visible = "" if include_forgotten else f" AND {_VISIBLE}"
        where = f"m.id > :last{visible} ORDER BY m.id LIMIT :n"
        while True:
            params = {"last": last, "n": batch_size}
            batch = self._read("reading memories", functools.partial(
                self._fetch, where=where, params=params, include_embedding=include_embedding))
            if not batch:
                return
            yield batch
            last = batch[-1].id

    # -- searching -------------------------------------------------------------------

    @staticmethod
    def _filter_sql(filters: SearchFilters, params: dict[str, Any]) -> str:
        clauses = [_VISIBLE]
        if filters.start is not None:
            clauses.append("m.created_at >= :start")
            params["start"] = filters.start
        if filters.end is not None:
            clauses.append("m.created_at < :end")
            params["end"] = filters.end
        if filters.robot is not None:
            clauses.append("m.robot_id = (SELECT id FROM robots WHERE name = :robot)")
            params["robot"] = filters.robot
        if filters.tags:
            ors = []
            for i, tag in enumerate(filters.tags):
                exact, below = tag_patterns(tag)
                params[f"tag{i}"], params[f"tagp{i}"] = exact, below
                ors.append(f"lower(t.name COLLATE \"C\") = :tag{i} "
                           f"OR lower(t.name COLLATE \"C\") LIKE :tagp{i} ESCAPE '\\'")
            clauses.append(
                "EXISTS (SELECT 1 FROM memory_tags mt JOIN tags t ON t.id = mt.tag_id "
                f"WHERE mt.memory_id = m.id AND ({' OR '.join(ors)}))")
        return " AND ".join(clauses)

    def _vector_sql(self, unit: np.ndarray, limit: int,
                    filters: SearchFilters) -> tuple[str, dict[str, Any]]:
        # ORDER BY the distance alone: a second sort key would stop the HNSW index scan.
        params: dict[str, Any] = {"q": _vector_literal(unit), "limit": limit}
        where = self._filter_sql(filters, params)
        return (
            "SELECT m.id, 1 - (m.embedding <=> CAST(:q AS vector)) AS score FROM memories m "
            f"WHERE m.embedding IS NOT NULL AND {where} "
            "ORDER BY m.embedding <=> CAST(:q AS vector) LIMIT :limit", params)

    def _fulltext_sql(self, parsed: TextQuery, limit: int, filters: SearchFilters,
                      common: Sequence[str] | None) -> tuple[str, dict[str, Any]]:
        """The words' hits and the CJK runs' hits, merged as
        :func:`~htm_core.store._text.merge_hits` merges them, in one statement."""
        params: dict[str, Any] = {"limit": limit}
        if not parsed.runs:
            return self._words_sql(parsed.words, filters, common, params), params
        held = " + ".join(f"CAST(strpos(m.content, :r{i}) > 0 AS integer)"
                          for i in range(len(parsed.runs)))
        found = " OR ".join(f"strpos(m.content, :r{i}) > 0" for i in range(len(parsed.runs)))
        params.update({f"r{i}": run for i, run in enumerate(parsed.runs)})
        where = self._filter_sql(filters, params)
        # The CJK condition is the partial index's, so the scan reads only CJK memories.
        runs = (f"SELECT m.id, CAST({held} AS double precision) "
                "+ CAST(1 AS double precision) / (1 + char_length(m.content)) AS rank "
                f"FROM memories m WHERE m.content ~ '{CJK_REGEX}' AND ({found}) AND {where} "
                "ORDER BY rank DESC, m.id LIMIT :limit")
        if not parsed.words:
            return runs, params
        words = self._words_sql(parsed.words, filters, common, params)
        return (
            "SELECT u.id, sum(u.s) AS rank FROM ("
            f"SELECT w.id, w.rank / (1 + abs(w.rank)) AS s FROM ({words}) w "
            f"UNION ALL SELECT r.id, r.rank AS s FROM ({runs}) r) u "
            "GROUP BY u.id ORDER BY rank DESC, u.id LIMIT :limit", params)

    def _words_sql(self, terms: Sequence[str], filters: SearchFilters,
                   common: Sequence[str] | None, params: dict[str, Any]) -> str:
        """Rank by every term; match only the informative ones, all in one statement.

        The rule is :func:`~htm_core.store._common.informative_terms`'s, worked out in the
        database: a word found in more than ``COMMON_TERM_SHARE`` of the memories does not
        widen the candidates, it only breaks ties among those holding a rarer word; a
        single word, a small store, or a query of common words only matches on every word.
        ``common`` is :meth:`_common_lexemes`: a word is common when each of its lexemes
        is among them. Without statistics (None), each word's matches are counted,
        stopping one past the threshold. A term with no lexeme is never the rare one (it
        would leave the match empty).
        """
        # Each term is a bound value through phraseto_tsquery: no tsquery syntax can get
        # in; a term of several words (``v2 1``) is a phrase.
        params.update({f"w{i}": t for i, t in enumerate(terms)})
        words = [f"phraseto_tsquery('english', :w{i})" for i in range(len(terms))]
        query = " || ".join(words)
        match = query
        if len(terms) > 1:
            params["share"] = _common.COMMON_TERM_SHARE
            params["small"] = _common.MIN_MEMORIES_FOR_COMMON
            if common is None:
                # `SELECT FROM` (no columns) lets the count skip the heap's all-visible pages.
                rare = [f"numnode({w}) > 0 AND (SELECT count(*) FROM (SELECT FROM memories "
                        f"WHERE tsv @@ {w} LIMIT n.cap + 1) s) <= n.cap" for w in words]
            else:
                params["common"] = list(common)
                lexemes = [f"tsvector_to_array(to_tsvector('english', :w{i}))"
                           for i in range(len(terms))]
                rare = [f"cardinality({x}) > 0 AND NOT ({x} <@ CAST(:common AS text[]))"
                        for x in lexemes]
            kept = " || ".join(f"CASE WHEN c.k[{i + 1}] THEN {w} ELSE ''::tsquery END"
                               for i, w in enumerate(words))
            match = (
                "(SELECT CASE WHEN c.total < :small OR NOT (true = ANY(c.k)) "
                f"THEN {query} ELSE {kept} END "
                f"FROM (SELECT n.total, ARRAY[{', '.join(f'({r})' for r in rare)}] AS k "
                "FROM (SELECT t.total, floor(t.total * :share)::bigint AS cap "
                "FROM (SELECT coalesce(max(id), 0) AS total FROM memories) t) n "
                # OFFSET 0 keeps the counts from being inlined into (and run again by)
                # each CASE branch.
                "OFFSET 0) c)")
        where = self._filter_sql(filters, params)
        return (
            # double precision, like the vector score: the two can share one statement.
            f"SELECT m.id, CAST(ts_rank(m.tsv, {query}) AS double precision) AS rank "
            f"FROM memories m WHERE m.tsv @@ {match} AND {where} "
            "ORDER BY rank DESC, m.id LIMIT :limit")

    def _common_lexemes(self) -> list[str] | None:
        """The lexemes found in more than ``COMMON_TERM_SHARE`` of the memories, from the
        table's statistics (``ANALYZE`` keeps the share of rows holding each of the most
        frequent lexemes, so this costs no scan); read at most once a minute. None while
        the table has no statistics yet."""
        cached = self._common
        now = time.monotonic()
        if cached is not None and now - cached[0] < 60.0:
            return cached[1]

        def read(conn: Connection) -> list[str] | None:
            row = conn.execute(text(
                "SELECT CAST(CAST(most_common_elems AS text) AS text[]), most_common_elem_freqs "
                "FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'memories' "
                "AND attname = 'tsv'")).first()
            if row is None or row[0] is None:
                return None
            # The frequencies end with three summary numbers; zip stops at the lexemes.
            return [str(e) for e, f in zip(row[0], row[1], strict=False)
                    if f > _common.COMMON_TERM_SHARE]

        common = self._read("reading the full-text statistics", read)
        self._common = (now, common)
        return common

    def _prepare_vector_query(self, conn: Connection, vector: Sequence[float],
                              ef_search: int, *, local: bool = True) -> np.ndarray | None:
        """Check the query vector and set ``hnsw.ef_search``.

        ``local``: for this transaction only; else for the connection's session, and only
        when the connection holds another value (every vector search goes through here,
        so a pooled connection's value never matters, and a warm one costs no trip). The
        store's dimension is cached once vectors exist (it changes only when the vectors
        are reset; a query of another dimension re-reads it before it is refused).
        Returns the unit query vector, or None when the store holds no vectors yet.
        """
        query = normalise(vector)
        dim = self._dim
        if dim is None or dim != query.shape[0]:
            dim = self._dim = self._stored_dim(conn)
            if dim is None:
                return None
        if query.shape[0] != dim:
            raise DimensionMismatchError(
                f"query vector has dimension {query.shape[0]} but the store holds "
                f"{dim}-dimensional vectors; use the store's embedder")
        if not np.isfinite(query).all():
            raise DimensionMismatchError("query vector contains NaN or infinity")
        if local:
            conn.execute(text("SELECT set_config('hnsw.ef_search', :v, true)"),
                         {"v": str(ef_search)})
        elif conn.connection.info.get("hnsw.ef_search") != ef_search:
            conn.execute(text("SELECT set_config('hnsw.ef_search', :v, false)"),
                         {"v": str(ef_search)})
            conn.connection.info["hnsw.ef_search"] = ef_search
        return query

    @staticmethod
    def _stored_dim(conn: Connection) -> int | None:
        value = conn.execute(text(
            "SELECT value FROM htm_meta WHERE key = 'embedding_dim'")).scalar()
        return None if value is None else int(value)

    def briefs(self, ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        """Id, content, robot and creation time of the visible ``ids`` that pass ``filters``."""
        if not ids:
            return {}
        params: dict[str, Any] = {"ids": sorted({int(i) for i in ids})}
        where = self._filter_sql(filters, params)
        rows = self._read("reading memories", lambda conn: _fetch(
            conn, "SELECT m.id, m.content, r.name, m.created_at FROM memories m "
            f"JOIN robots r ON r.id = m.robot_id WHERE m.id = ANY(:ids) AND {where}", params))
        return {int(r[0]): Brief(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows}

    def vector_centroid(self) -> list[float] | None:
        """The mean direction of the newest 20,000 vectors (an estimate), cached: once it
        covers 1,000 memories it is checked at most once a minute and read again when the
        store has grown by a twentieth or its embedder changed; smaller stores are checked
        on every call."""
        cached = self._centroid
        now = time.monotonic()
        if cached is not None and cached[0] >= 1000 and now - cached[1] < 60.0:
            return cached[3]

        def read(conn: Connection) -> tuple[int, str | None, list[float] | None]:
            newest, embedder = conn.execute(text(
                "SELECT (SELECT coalesce(max(id), 0) FROM memories), "
                "(SELECT value FROM htm_meta WHERE key = 'embedder')")).one()
            newest = int(newest)
            if (cached is not None and cached[3] is not None and embedder == cached[2]
                    and newest <= cached[0] + cached[0] // 20):
                return cached[0], embedder, cached[3]
            row = conn.execute(text(
                "SELECT CAST(avg(embedding) AS real[]) FROM (SELECT embedding FROM memories "
                "WHERE embedding IS NOT NULL ORDER BY id DESC LIMIT 20000) s")).first()
            if row is None or row[0] is None:
                return newest, embedder, None
            mean = np.asarray(row[0], dtype=np.float64)
            norm = float(np.linalg.norm(mean))
            return newest, embedder, (mean / norm).tolist() if norm > 0 else None

        newest, embedder, centroid = self._read("estimating the vector centroid", read)
        self._centroid = (newest, now, embedder, centroid)
        return centroid

    def vector_search(self, vector: Sequence[float], *, limit: int, filters: SearchFilters,
                      ef_search: int | None = None) -> list[tuple[int, float]]:
        """Top ``limit`` (id, cosine similarity), best first, filters applied in SQL.

        Uses the HNSW index with ``hnsw.ef_search`` = ``ef_search`` (default the store's,
        raised to ``limit`` when smaller). When the approximate search returns fewer than
        ``limit`` rows (a selective filter, or a small store), it is re-run exactly.
        """
        ef = _check_int("ef_search", ef_search if ef_search is not None else self.ef_search,
                        1, 1000)
        return self._search([ArmQuery(vector=vector, limit=limit, filters=filters)], ef)[0]

    def fulltext_search(self, query: str, *, limit: int,
                        filters: SearchFilters) -> list[tuple[int, float]]:
        """Top ``limit`` (id, ``ts_rank``) for the words of ``query``, OR-ed, best first."""
        return self._search([ArmQuery(text=query, limit=limit, filters=filters)],
                            self.ef_search)[0]

    def search_arms(self, arms: Sequence[ArmQuery]) -> list[list[tuple[int, float]]]:
        """All the searches in one statement (one round trip), results in the order asked."""
        return self._search(arms, self.ef_search)

    def _search(self, arms: Sequence[ArmQuery], ef: int) -> list[list[tuple[int, float]]]:
        parts: dict[int, tuple[str, dict[str, Any]]] = {}
        # Read (at most once a minute) before taking a connection for the searches.
        common = self._common_lexemes() if any(a.text for a in arms) else None
        deepest = max((a.limit for a in arms if a.vector is not None), default=0)

        def run(conn: Connection) -> list[Any]:
            parts.clear()
            for k, arm in enumerate(arms):
                if arm.vector is not None:
                    unit = self._prepare_vector_query(conn, arm.vector, min(1000, max(ef, deepest)),
                                                      local=False)
                    if unit is not None and np.any(unit):
                        parts[k] = self._vector_sql(unit, arm.limit, arm.filters)
                else:
                    parsed = parse_query(arm.text or "")
                    if parsed:
                        parts[k] = self._fulltext_sql(parsed, arm.limit, arm.filters, common)
            if not parts:
                return []
            if len(parts) == 1:
                (k, (sql, params)), = parts.items()
                return [(k, *row) for row in _fetch(conn, sql, params)]
            union, merged = [], {}
            for k, (sql, params) in parts.items():
                # Each arm's parameters get a prefix of their own.
                renamed = _PARAM.sub(rf":a{k}_\1", sql)
                merged.update({f"a{k}_{name}": value for name, value in params.items()})
                union.append(f"SELECT {k} AS arm, s.* FROM ({renamed}) s")
            sql = " UNION ALL ".join(f"({part})" for part in union)
            return _fetch(conn, sql, merged)

        rows = self._read("search", run)
        found: list[list[tuple[int, float]]] = [[] for _ in arms]
        for row in rows:
            found[int(row[0])].append((int(row[1]), float(row[2])))
        for k, arm in enumerate(arms):
            if arm.vector is not None and k in parts and len(found[k]) < arm.limit:
                found[k] = self._exact_vector_search(*parts[k])
            elif arm.vector is not None:
                # Each arm's own order (by distance; a stable sort keeps the index's order
                # of equal scores), whatever order the union handed its rows back in.
                found[k].sort(key=lambda hit: -hit[1])
            else:
                found[k].sort(key=lambda hit: (-hit[1], hit[0]))  # its ORDER BY
        return found

    def _exact_vector_search(self, sql: str, params: dict[str, Any]) -> list[tuple[int, float]]:
        """The vector search again with index scans off (this transaction only): a filter
        or a small store left the approximate search short."""
        def exact(conn: Connection) -> list[Any]:
            conn.execute(text("SELECT set_config('enable_indexscan', 'off', true)"))
            return list(conn.execute(text(sql), params).all())

        return [(int(r[0]), float(r[1])) for r in self._run("vector search", exact)]

    def explain_search(self, *, vector: Sequence[float] | None = None, query: str | None = None,
                       limit: int = 10, filters: SearchFilters | None = None,
                       ef_search: int | None = None, seqscan: bool = True) -> str:
        """The PostgreSQL plan of the vector (``vector=``) or full-text (``query=``) search.

        The statement is the one :meth:`vector_search` / :meth:`fulltext_search` run, so
        the plan shows whether the HNSW and GIN indexes are used. ``seqscan=False`` sets
        ``enable_seqscan = off`` for the explain (useful on small tables, where a
        sequential scan is cheaper and the planner rightly prefers it).
        """
        if (vector is None) == (query is None):
            raise ValidationError("explain_search needs exactly one of vector= or query=")
        chosen = filters or SearchFilters()

        def explain(conn: Connection) -> str:
            if not seqscan:
                conn.execute(text("SELECT set_config('enable_seqscan', 'off', true)"))
            if vector is not None:
                unit = self._prepare_vector_query(conn, vector, ef_search or self.ef_search)
                if unit is None:
                    raise SchemaError("the store holds no vectors yet; add some before explaining")
                sql, params = self._vector_sql(unit, limit, chosen)
            else:
                parsed = parse_query(query or "") or TextQuery(words=("_",))
                sql, params = self._fulltext_sql(parsed, limit, chosen, self._common_lexemes())
            return "\n".join(str(r[0]) for r in conn.execute(text("EXPLAIN " + sql), params))

        return self._run("explaining a search", explain)

    # -- never forget ----------------------------------------------------------------

    @staticmethod
    def _row_for_key(conn: Connection, key: str) -> tuple[int, bool]:
        row = conn.execute(text(
            "SELECT id, forgotten_at IS NOT NULL FROM memories WHERE key = :k FOR UPDATE"),
            {"k": key}).first()
        if row is None:
            raise NotFoundError(f"no memory with key {key!r}: it was never stored, or it has "
                                "been purged (a purge cannot be undone)")
        return int(row[0]), bool(row[1])

    def add_tags(self, key: str, tags: Sequence[str], *, robot: str) -> Memory:
        """Link more tags to a memory (merged with its own; logged). ``NotFoundError``."""
        rid = self._robot_id(robot)

        def write(conn: Connection) -> Memory:
            mid, _forgotten = self._row_for_key(conn, key)
            self._link_tags(conn, [(mid, list(tags))])
            self._log_many(conn, [("tag", rid, mid, key, {"tags": list(tags)})])
            return self._fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        return self._run("tagging a memory", write)

    def set_importance(self, key: str, importance: float, *, robot: str) -> Memory:
        """Change a memory's importance (enrichment; logged). ``NotFoundError``."""
        rid = self._robot_id(robot)

        def write(conn: Connection) -> Memory:
            mid, _forgotten = self._row_for_key(conn, key)
            conn.execute(text("UPDATE memories SET importance = :i WHERE id = :id"),
                         {"i": importance, "id": mid})
            self._log_many(conn, [("importance", rid, mid, key, {"importance": importance})])
            return self._fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        return self._run("setting importance", write)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for companions such as the enrichment job queue)."""
        return self._engine

    def keys_with_prefix(self, prefix: str, *, include_forgotten: bool = False) -> list[str]:
        """Keys starting with ``prefix``, sorted."""
        visible = "" if include_forgotten else f" AND {_VISIBLE.replace('m.', '')}"
        rows = self._read("listing keys", lambda conn: conn.execute(text(
            f"SELECT key FROM memories WHERE key LIKE :p ESCAPE '\\'{visible} ORDER BY key"),
            {"p": like_prefix(prefix)}).all())
        return [str(r[0]) for r in rows]

    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        """Hide the memory from recall, recoverably. Raises ``NotFoundError``."""
        rid = self._robot_id(robot)

        def write(conn: Connection) -> Memory:
            mid, forgotten = self._row_for_key(conn, key)
            if not forgotten:
                conn.execute(text("UPDATE memories SET forgotten_at = :t WHERE id = :id"),
                             {"t": at, "id": mid})
                self._unhold(conn, [mid])
                self._log_many(conn, [("forget", rid, mid, key, None)])
            return self._fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        return self._run("forgetting a memory", write)

    def restore(self, key: str, *, robot: str) -> Memory:
        """Undo ``forget``. Raises ``NotFoundError`` when no such memory exists."""
        rid = self._robot_id(robot)

        def write(conn: Connection) -> Memory:
            mid, forgotten = self._row_for_key(conn, key)
            if forgotten:
                conn.execute(text("UPDATE memories SET forgotten_at = NULL WHERE id = :id"),
                             {"id": mid})
                self._log_many(conn, [("restore", rid, mid, key, None)])
            return self._fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        return self._run("restoring a memory", write)

    def purge(self, *, robot: str, key: str | None = None) -> int:
        """Delete forgotten memories for good (one, or all); return how many."""
        rid = self._robot_id(robot)

        def write(conn: Connection) -> int:
            if key is not None:
                mid, forgotten = self._row_for_key(conn, key)
                if not forgotten:
                    raise ConfirmationRequiredError(
                        f"memory {key!r} is not forgotten; forget(key, confirm=True) it before "
                        "purging")
                targets = [(mid, key)]
            else:
                targets = [(int(r[0]), str(r[1])) for r in conn.execute(text(
                    "SELECT id, key FROM memories WHERE forgotten_at IS NOT NULL "
                    "ORDER BY id FOR UPDATE"))]
            if targets:
                self._unhold(conn, [t[0] for t in targets])
                conn.execute(text("DELETE FROM memories WHERE id = ANY(:ids)"),
                             {"ids": [t[0] for t in targets]})
                self._log_many(conn, [("purge", rid, mid, mkey, None) for mid, mkey in targets])
            return len(targets)

        return self._run("purging memories", write)

    # -- catalogue -------------------------------------------------------------------

    def tags(self) -> dict[str, int]:
        """Every tag with the number of visible memories carrying it."""
        rows = self._read("listing tags", lambda conn: conn.execute(text(
            "SELECT t.name, count(m.id) FROM tags t JOIN memory_tags mt ON mt.tag_id = t.id "
            "JOIN memories m ON m.id = mt.memory_id AND m.forgotten_at IS NULL "
            "GROUP BY t.name ORDER BY t.name")).all())
        return {str(r[0]): int(r[1]) for r in rows}

    def counts(self, robot: str) -> StoreCounts:
        """Figures for ``stats()``: global, this robot's, forgotten, robots, unembedded."""
        row = self._read("counting memories", lambda conn: conn.execute(text(
            "SELECT "
            " (SELECT count(*) FROM memories WHERE forgotten_at IS NULL),"
            " (SELECT count(*) FROM memories m JOIN robots r ON r.id = m.robot_id "
            "   WHERE r.name = :robot AND m.forgotten_at IS NULL),"
            " (SELECT count(*) FROM memories WHERE forgotten_at IS NOT NULL),"
            " (SELECT count(*) FROM robots),"
            " (SELECT count(*) FROM memories m WHERE m.embedding IS NULL AND "
            f"  m.forgotten_at IS NULL AND {NOT_FAILED}),"
            f" ({FAILED_COUNT})"
        ), {"robot": robot}).first())
        assert row is not None
        return StoreCounts(total=int(row[0]), robot=int(row[1]), forgotten=int(row[2]),
                           robots=int(row[3]), missing_embeddings=int(row[4]),
                           failed_embeddings=int(row[5]))
