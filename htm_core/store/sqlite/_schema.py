"""SQLite DDL: the versioned schema, FTS5 tables and triggers, and the add path's tuning constants."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy.engine import Connection

from ...text import CJK_GLOB
from ..one_embedder import (
    FAILURES_DDL,
)
from ..values import content_crc

#: A schema step: a statement, or a function of the migrating connection.
Step = str | Callable[[Connection], None]

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

#: The CJK trigram index's insert trigger stands aside under the same key: its ``GLOB`` costs
#: about 0.1 µs per character of every row inserted (7 µs for a 70-character memory, more
#: than the rest of the row's insert), where the add path picks a batch's CJK rows with a
#: regular expression of the same ranges (``_text.CJK_REGEX``) and inserts only those.
#: The key comes first: SQLite stops at the first false condition.
_CJK_INSERT_TRIGGER = f"""CREATE TRIGGER IF NOT EXISTS memories_cjk_ai AFTER INSERT ON memories
        WHEN NOT EXISTS (SELECT 1 FROM htm_meta WHERE key = '{_FTS_BATCH_KEY}')
        AND new.content GLOB '{CJK_GLOB}' BEGIN
        INSERT INTO memories_cjk(rowid, content) VALUES (new.id, new.content); END"""

#: The insert triggers that stand aside for a batch: name -> (definition, migrate log field).
_GATED_TRIGGERS = {"memories_fts_ai": (_FTS_INSERT_TRIGGER, "fts_insert_trigger"),
                   "memories_cjk_ai": (_CJK_INSERT_TRIGGER, "cjk_insert_trigger")}

#: A batch of at least this many records gets a page cache of _LARGE_BATCH_CACHE_KIB for its
#: transaction (the default 2 MB spills dirty pages of a 1,000-row batch to the WAL early).
_LARGE_BATCH = 256
_LARGE_BATCH_CACHE_KIB = 32_768

#: What the embedding-cache index (``memories_hash``) holds of a row: the first 16 hex digits
#: (64 bits) of its content hash. Lookups (``find_embeddings``) go through this expression
#: and then compare the whole hash and the embedder on the row, so the meaning is the full
#: (content hash, embedder) match of schema 1-4 (and of PostgreSQL's index).
_HASH_PREFIX = "substr(content_hash, 1, 16)"

#: The index behind the embedding cache. Its keys are random, so each batch of adds dirties
#: pages all over it, more of them as the store grows; an entry of 16 characters and the
#: rowid (about 25 bytes, where ``(content_hash, embedder)`` took about 95) makes it a
#: quarter of the size, and a batch's commit writes that many fewer pages. ``bulk_load``
#: builds it once at the end instead.
_HASH_INDEX = f"CREATE INDEX IF NOT EXISTS memories_hash ON memories({_HASH_PREFIX})"
_HASH_INDEX_EXISTS = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'memories_hash'"

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
    "CREATE INDEX IF NOT EXISTS memories_hash ON memories(content_hash, embedder)",
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
    _CJK_INSERT_TRIGGER,
    """CREATE TRIGGER IF NOT EXISTS memories_cjk_ad AFTER DELETE ON memories BEGIN
        DELETE FROM memories_cjk WHERE rowid = old.id; END""",
    f"""CREATE TRIGGER IF NOT EXISTS memories_cjk_au AFTER UPDATE OF content ON memories BEGIN
        DELETE FROM memories_cjk WHERE rowid = old.id;
        INSERT INTO memories_cjk(rowid, content) SELECT new.id, new.content
        WHERE new.content GLOB '{CJK_GLOB}'; END""",
    f"""INSERT INTO memories_cjk(rowid, content) SELECT id, content FROM memories
        WHERE content GLOB '{CJK_GLOB}' AND id NOT IN (SELECT rowid FROM memories_cjk)""",
    # An index of folded tag names, dropped again by version 6 (tags compare exactly).
    "CREATE INDEX IF NOT EXISTS tags_name_folded ON tags(lower(name))",
]

#: Version 3, ``HTM.update``: each memory's version number (1 for every existing one) and
#: the superseded versions (``memory_versions``, deleted with their memory by a purge),
#: with a full-text index of their content for ``recall(..., include_history=True)``.
_V3_UPDATE = [
    "ALTER TABLE memories ADD COLUMN version INTEGER NOT NULL DEFAULT 1",
    """CREATE TABLE IF NOT EXISTS memory_versions (
        id INTEGER PRIMARY KEY,
        memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        version INTEGER NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        importance REAL NOT NULL,
        token_count INTEGER NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        tags TEXT NOT NULL DEFAULT '[]',
        embedding BLOB,
        embedder TEXT,
        written_at REAL NOT NULL,
        superseded_at REAL NOT NULL,
        superseded_by INTEGER,
        UNIQUE (memory_id, version))""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS memory_versions_fts USING fts5(
        content, content='memory_versions', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER IF NOT EXISTS memory_versions_fts_ai AFTER INSERT ON memory_versions
        BEGIN INSERT INTO memory_versions_fts(rowid, content) VALUES (new.id, new.content); END""",
    """CREATE TRIGGER IF NOT EXISTS memory_versions_fts_ad AFTER DELETE ON memory_versions
        BEGIN INSERT INTO memory_versions_fts(memory_versions_fts, rowid, content)
        VALUES ('delete', old.id, old.content); END""",
]

#: Version 4, long memories embedded in windows (``htm_core._windows``): one row per
#: window vector. Triggers keep them their memory's: a new content or vector, or a purge,
#: deletes them; every deletion bumps ``window_generation`` (other processes' in-process
#: window indexes reload). Existing memories get theirs from the catch-up.
_V4_WINDOWS = [
    """CREATE TABLE IF NOT EXISTS memory_windows (
        id INTEGER PRIMARY KEY,
        memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        n INTEGER NOT NULL,
        embedding BLOB,
        UNIQUE (memory_id, n))""",
    "INSERT OR IGNORE INTO htm_meta(key, value) VALUES ('window_generation', '0')",
    """CREATE TRIGGER IF NOT EXISTS memory_windows_ad AFTER DELETE ON memory_windows BEGIN
        UPDATE htm_meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)
        WHERE key = 'window_generation'; END""",
    """CREATE TRIGGER IF NOT EXISTS memories_windows_au AFTER UPDATE OF content, embedding
        ON memories WHEN old.content IS NOT new.content OR old.embedding IS NOT new.embedding
        BEGIN DELETE FROM memory_windows WHERE memory_id = old.id; END""",
    """CREATE TRIGGER IF NOT EXISTS memories_windows_ad AFTER DELETE ON memories BEGIN
        DELETE FROM memory_windows WHERE memory_id = old.id; END""",
]

#: Version 5, the embedding-cache index on a 64-bit prefix of the content hash (see
#: ``_HASH_INDEX``); the stored hashes are unchanged.
_V5_HASH_INDEX = ["DROP INDEX IF EXISTS memories_hash", _HASH_INDEX]

#: Version 6, exact ids (:mod:`htm_core.identity`): tag filters compare names exactly, as
#: ranges in code point order that the unique index on ``tags.name`` serves, so the index of
#: folded names goes.
_V6_EXACT = ["DROP INDEX IF EXISTS tags_name_folded"]

def _add_column(conn: Connection, table: str, column: str, declared: str) -> None:
    """Add ``table.column`` unless it is there (SQLite has no ``IF NOT EXISTS`` for columns)."""
    if column not in {row[1] for row in conn.exec_driver_sql(f"PRAGMA table_info({table})")}:
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {declared}")


def _add_v7_columns(conn: Connection) -> None:
    """``robots.working_memory_tokens``, and ``memories.content_crc`` filled for every row."""
    _add_column(conn, "robots", "working_memory_tokens", "INTEGER")
    _add_column(conn, "memories", "content_crc", "INTEGER")
    conn.connection.driver_connection.create_function(  # type: ignore[union-attr]
        "htm_crc32", 1, content_crc, deterministic=True)
    conn.exec_driver_sql(
        "UPDATE memories SET content_crc = htm_crc32(content) WHERE content_crc IS NULL")


#: Version 7, the CRC-32 of each memory's text (:func:`~htm_core.store.values.content_crc`),
#: which every read compares (existing rows get theirs here), and the working-memory budget
#: each robot's ``HTM`` runs with.
_V7: list[Step] = [_add_v7_columns]


def _add_v8_columns(conn: Connection) -> None:
    """What each memory (and each superseded version) is, and where it came from."""
    for table in ("memories", "memory_versions"):
        _add_column(conn, table, "kind", "TEXT NOT NULL DEFAULT 'episodic'")
        _add_column(conn, table, "source", "TEXT")
        _add_column(conn, table, "confidence", "REAL")


#: Version 8, memory kinds with provenance (:mod:`htm_core.consolidation.kinds`): ``kind``
#: (``episodic`` for every existing memory), ``source`` and ``confidence`` on each memory
#: and each superseded version. Adding a column with a constant default rewrites no row;
#: the index serves kind filters alone, with a robot and with a time range.
_V8: list[Step] = [
    _add_v8_columns,
    "CREATE INDEX IF NOT EXISTS memories_kind ON memories(kind, robot_id, created_at)"]

_MIGRATIONS: dict[int, Sequence[Step]] = {
    1: _SCHEMA_V1, 2: [*_V2_COHERENCE, *_V2_VECTORS, *_V2_FTS], 3: [*_V3_UPDATE],
    4: [*_V4_WINDOWS], 5: [*_V5_HASH_INDEX], 6: [*_V6_EXACT], 7: [*_V7], 8: [*_V8]}

_MEMORY_COLUMNS = (
    "m.id, m.key, m.content, m.content_hash, r.name AS robot, m.importance, m.token_count, "
    "m.created_at, m.last_accessed, m.access_count, m.metadata, m.embedder, m.forgotten_at, "
    "m.version, m.content_crc, m.kind, m.source, m.confidence"
)
