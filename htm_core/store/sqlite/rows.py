"""SQLite's memory rows: reading them (by a ``WHERE`` clause, by id, cached vectors by
content hash), linking tags and deleting rows (:class:`SQLiteRows`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...clock import utc_from_timestamp
from ...errors import DatabaseCorruptError
from ...models import Memory
from .._common import chunks
from ..one_embedder import (
    CHUNK_SQLITE,
    NOT_FAILED,
    EmbeddingFailure,
    list_failures,
)
from ..values import check_stored_text, checked_from
from ._schema import _HASH_INDEX_EXISTS, _HASH_PREFIX, _MEMORY_COLUMNS
from .engine import SQLiteDatabase
from .reads import SQLiteReads

__all__ = ["SQLiteRows"]

#: Stored vectors by one embedder for a JSON list of content hashes, found through the
#: index on the hashes' prefix (``_HASH_PREFIX``); the caller compares the whole hash. A
#: join from the list: ``IN (SELECT ... FROM json_each(?))`` would first build a temporary
#: index of the list (0.3-0.7 µs more a hash, most of the lookup for a hash not stored).
_FIND_EMBEDDINGS = (
    "SELECT m.content_hash, m.embedding FROM json_each(?) j JOIN memories m "
    f"ON {_HASH_PREFIX} = substr(j.value, 1, 16) WHERE m.embedder = ? "
    f"AND m.embedding IS NOT NULL AND NOT {CHUNK_SQLITE}")

#: The same without that index (dropped by a ``bulk_load`` in this process or another):
#: one pass over the table for the whole list. The join above would scan it once a hash.
_SCAN_EMBEDDINGS = (
    "SELECT content_hash, embedding FROM memories WHERE content_hash IN "
    "(SELECT value FROM json_each(?)) AND embedder = ? AND embedding IS NOT NULL "
    f"AND NOT {CHUNK_SQLITE}")

#: The memories the index of keys (the ``UNIQUE`` constraint's) holds, counted through it.
_COUNT_KEYS_INDEXED = "SELECT count(key) FROM memories INDEXED BY sqlite_autoindex_memories_1"


class SQLiteRows:
    """The :class:`~htm_core.store._sql.parts.Rows` of SQLite, and its other row reads."""

    def __init__(self, db: SQLiteDatabase, reads: SQLiteReads) -> None:
        self._db, self._reads = db, reads
        #: What :meth:`check_key_index` found: None not checked yet, "" sound, else the damage.
        self._key_index_damage: str | None = None

    def to_memory(self, row: Sequence[Any], tags: Sequence[str],
                  embedding: bytes | None = None) -> Memory:
        """``row``: the columns of ``_MEMORY_COLUMNS``, in order."""
        (mid, key, content, content_hash, robot, importance, token_count, created_at,
         last_accessed, access_count, metadata, embedder, forgotten_at, version,
         crc, kind, source, confidence) = row[:18]
        check_stored_text(key, mid, content, crc, content_hash, self._db.url)
        return checked_from(Memory, {
            "id": mid, "key": key, "content": content, "content_hash": content_hash,
            "robot": robot, "importance": importance, "token_count": token_count,
            "created_at": utc_from_timestamp(created_at),
            "last_accessed": utc_from_timestamp(last_accessed),
            "access_count": access_count, "tags": tuple(tags),
            "metadata": json.loads(metadata) if metadata != "{}" else {},
            "embedder": embedder,
            "embedding": np.frombuffer(embedding, dtype=np.float32).tolist() if embedding
            else None,
            "forgotten_at": utc_from_timestamp(forgotten_at) if forgotten_at else None,
            "version": int(version), "kind": kind, "source": source, "confidence": confidence})

    def fetch(self, conn: Connection, where: str, params: dict[str, Any],
              include_embedding: bool) -> list[Memory]:
        """The memories matching ``where``, each with its tags (sorted by name)."""
        cur = conn.connection.cursor()
        try:
            found = self.fetch_raw(cur, where, params, include_embedding)
        finally:
            cur.close()
        if not found and where.startswith("m.key = :key") and self._key_index_damage != "":
            self.check_key_index()  # a miss by key (``get``): is the index of keys whole?
        return found

    def fetch_raw(self, cur: Any, where: str, params: dict[str, Any],
                  include_embedding: bool) -> list[Memory]:
        # One statement on the raw cursor: this is on every recall's path, and SQLAlchemy's
        # per-statement overhead would be most of its time.
        cols = _MEMORY_COLUMNS + (", m.embedding" if include_embedding else ", NULL")
        rows = cur.execute(
            f"SELECT {cols}, (SELECT json_group_array(t.name) FROM memory_tags mt "
            "JOIN tags t ON t.id = mt.tag_id WHERE mt.memory_id = m.id) "
            f"FROM memories m JOIN robots r ON r.id = m.robot_id WHERE {where}",
            params).fetchall()
        # Python's order of str is SQLite's BINARY order of their UTF-8 bytes.
        return [self.to_memory(r, sorted(json.loads(r[19])) if r[19] != "[]" else (), r[18])
                for r in rows]

    def check_key_index(self, cur: Any = None) -> None:
        """On the first miss by key (``get``, or an add of a key the index does not hold),
        whether the index of keys holds every memory (one count through it, one of the
        table), read through ``cur`` or a read cursor; raises :class:`DatabaseCorruptError`
        on this and every later miss if it does not, since a miss may then be a memory the
        index lost (and an add would write a second memory under its key). Checked once
        per store: a sound index costs nothing more."""
        if self._key_index_damage is None:
            if cur is None:
                with self._reads.cursor("checking the index of keys") as read:
                    self._key_index_damage = self._count_key_index(read)
            else:
                self._key_index_damage = self._count_key_index(cur)
        if self._key_index_damage:
            raise DatabaseCorruptError(self._key_index_damage)

    def _count_key_index(self, cur: Any) -> str:
        """"" when the index of keys holds every memory, else what is wrong with it."""
        try:
            indexed = cur.execute(_COUNT_KEYS_INDEXED).fetchone()[0]
        except sqlite3.OperationalError:  # no such index: nothing to check
            indexed = None
        rows = cur.execute("SELECT count(*) FROM memories NOT INDEXED").fetchone()[0]
        return "" if indexed in (None, rows) else (
            f"the index of keys of SQLite database {self._db.url} holds {indexed} of its "
            f"{rows} memories, so a lookup by key can miss a memory that exists; run "
            "`htm check`, then rebuild the index (`REINDEX memories` in the sqlite3 "
            "shell) or restore the store from an export")

    def get_many(self, ids: Sequence[int], *, include_embedding: bool = False,
                 include_forgotten: bool = False) -> list[Memory]:
        if not ids:
            return []
        found: dict[int, Memory] = {}
        visible = "" if include_forgotten else " AND m.forgotten_at IS NULL"
        parts = chunks(list(ids), 500)
        with self._reads.cursor(snapshot=len(parts) > 1) as cur:
            # What is read now is as new as the last mark read or newer: labelled with that
            # mark (an older one than the newest only makes the next check read again), the
            # visible ids spare the recall check a read, with no data_version read here.
            seen = None if include_forgotten else self._reads.seen(
                self._reads.mark(cur) if len(parts) > 1 else self._reads.last_mark)
            for part in parts:
                # The ids as one JSON parameter: the statement's text is always the same,
                # so the driver's statement cache spares compiling it on every recall.
                for m in self.fetch_raw(cur, f"m.id IN (SELECT value FROM json_each(:ids))"
                                         f"{visible}", {"ids": json.dumps(list(map(int, part)))},
                                         include_embedding):
                    found[m.id] = m
        if seen is not None:  # for recall_check, which follows on every recall
            seen.visible.update(found)
        return [found[i] for i in ids if i in found]

    def find_embeddings(self, content_hashes: Sequence[str], embedder: str
                        ) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        # The raw cursor and the hashes as one JSON parameter: this runs for every
        # add_many batch, and a statement of 500 named parameters costs more to build in
        # SQLAlchemy than to run. The index holds each hash's prefix (``_HASH_PREFIX``):
        # the prefixes find the rows, the whole hash is compared here (``content_hash IN``
        # in the statement would let SQLite rewrite the prefix expression so that it no
        # longer matches the index).
        hashes = list(dict.fromkeys(content_hashes))
        with self._reads.cursor("reading cached embeddings") as cur:
            indexed = cur.execute(_HASH_INDEX_EXISTS).fetchone() is not None
            for part in chunks(hashes, 500) if indexed else [hashes]:
                wanted = set(part)
                for h, blob in cur.execute(_FIND_EMBEDDINGS if indexed else _SCAN_EMBEDDINGS,
                                           (json.dumps(part), embedder)):
                    if h in wanted and h not in found:
                        found[h] = np.frombuffer(blob, dtype=np.float32).tolist()
        return found

    def missing_embeddings(self, *, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        with self._db.read() as conn:
            rows = conn.execute(text(
                "SELECT m.id, m.content, m.metadata FROM memories m WHERE m.embedding IS NULL "
                f"AND m.forgotten_at IS NULL AND {NOT_FAILED} ORDER BY m.id LIMIT :l"),
                {"l": limit}).all()
        return [(r[0], r[1], json.loads(r[2]) if r[2] else {}) for r in rows]

    def embedding_failures(self, *, limit: int = 100) -> list[EmbeddingFailure]:
        with self._db.read() as conn:
            rows = list_failures(conn, limit)
        return [EmbeddingFailure(key=k, embedder=e, error=r, failed_at=utc_from_timestamp(t))
                for k, e, r, t in rows]

    # -- the writes of the shared roles ----------------------------------------------

    @staticmethod
    def link_tags(conn: Connection, items: Sequence[tuple[int, Sequence[str]]]) -> None:
        for mid, tags in items:
            for tag in tags:
                tag_id = conn.execute(text(
                    "INSERT INTO tags(name) VALUES (:n) ON CONFLICT(name) DO UPDATE "
                    "SET name = excluded.name RETURNING id"), {"n": tag}).scalar_one()
                conn.execute(text("INSERT OR IGNORE INTO memory_tags(memory_id, tag_id) "
                                  "VALUES (:m, :t)"), {"m": mid, "t": tag_id})

    @staticmethod
    def delete_rows(conn: Connection, ids: Sequence[int]) -> None:
        for mid in ids:
            conn.execute(text("DELETE FROM memories WHERE id = :id"), {"id": mid})
