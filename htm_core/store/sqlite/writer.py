"""SQLite's writes of memory rows: ``add_many`` in one transaction (FTS5 indexed once per
batch, re-adds merged), access statistics and embeddings (:class:`SQLiteWriter`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...clock import to_timestamp, utc_from_timestamp
from ...errors import (
    DimensionMismatchError,
    DuplicateKeyError,
)
from ...models import Memory
from ...text import CJK_REGEX
from .._coherence import Merged, as_dict, merge_readd, touch_detail
from .._common import chunks
from .._sql.parts import RowListener
from ..base import (
    AddResult,
    NewMemory,
    WorkingChange,
    WorkingResult,
)
from ..one_embedder import (
    batch_embedder,
    clear_failures,
)
from ..values import checked_instance, content_crc, unit_embeddings
from ..vector_index import finite_unit
from ._schema import _FTS_BATCH_KEY, _LARGE_BATCH, _LARGE_BATCH_CACHE_KIB
from .engine import SQLiteDatabase
from .mirror import NewVectors, VectorMirror
from .rows import SQLiteRows
from .working import SQLiteWorkingSet


def _stamped(when: datetime) -> tuple[float, datetime]:
    """POSIX seconds of ``when`` and ``when`` as reading them back gives it
    (``utc_from_timestamp``).

    An aware UTC ``datetime`` within 2**31 s of 1970 is that already: ``timestamp()`` is
    its microseconds over 10**6, correctly rounded (off by under 0.12 µs), and reading it
    back rounds to the nearest microsecond. Other zones, subclasses and far dates are
    converted (the round trip takes 1.6 µs, this 0.8 µs).
    """
    if type(when) is datetime and when.tzinfo is timezone.utc and not when.fold:
        ts = when.timestamp()
        if -2**31 < ts < 2**31:
            return ts, when
    else:
        ts = to_timestamp(when)
    return ts, utc_from_timestamp(ts)


#: What the CJK insert trigger's ``GLOB`` matches (the same ranges).
_CJK = re.compile(CJK_REGEX)


def _rows_exist(raw: Any, made: dict[int, Memory]) -> bool:
    """Whether the rows this batch created are in the database (see ``_write``'s ``landed``)."""
    if not made:
        return False
    mid, memory = max(made.items())
    row = raw.execute("SELECT key FROM memories WHERE id = ?", (mid,)).fetchone()
    return row is not None and row[0] == memory.key


class _Batch:
    """What an ``add_many`` writes, gathered record by record: the new rows (and the
    memories as written, in ``made``), tag links, touches and log lines, the re-adds to
    merge, and the new rows' part of the vector index."""

    def __init__(self, now: float, units: npt.NDArray[np.float32],
                 made: dict[int, Memory]) -> None:
        self.now = now
        self.units, self.made = units, made
        # The rows' bytes at once: a slice of them per row (a row's ``tobytes`` is 3× that).
        self.blobs, self.width = units.tobytes(), units.shape[1] * units.itemsize
        self.position = 0  # the row of ``units`` of the next record with a vector
        self.results: list[tuple[int, bool]] = []
        self.inserted: dict[str, tuple[int, str, None]] = {}  # keys new in this batch
        self.new_rows: list[tuple[Any, ...]] = []
        self.tag_links: list[tuple[int, str]] = []
        self.log_rows: list[tuple[Any, ...]] = []
        self.touched: list[tuple[float, int]] = []
        self.readds: list[tuple[int, int, NewMemory]] = []  # (log row, id, record) of each
        # The index's part of each new row with a vector: its id, row of ``units``, creation
        # time and robot id (plain lists: one numpy array each after the loop).
        self.vec_ids: list[int] = []
        self.vec_rows: list[int] = []
        self.vec_created: list[float] = []
        self.vec_robots: list[int] = []

    def readd(self, rec: NewMemory, rid: int, prior: tuple[int, str, float | None],
              stored: dict[int, Merged]) -> bool:
        """``rec`` again under a key the store (or this batch) holds as ``prior`` (id,
        content, forgotten); refused when its content differs. Whether it was forgotten."""
        if rec.embedding is not None:
            self.position += 1
        mid, old_content, forgotten = prior
        if old_content != rec.content:
            state = " (forgotten; purge it to reuse the key)" if forgotten else ""
            raise DuplicateKeyError(
                f"key {rec.key!r} already holds different content{state}; choose another key")
        first = self.made.pop(mid, None)  # touched (a row of this batch, or an old one): read it back
        if first is not None:  # a row of this batch: merge into it as written
            stored[mid] = Merged(first.importance, dict(first.metadata), set(first.tags))
        self.touched.append((self.now, mid))
        self.readds.append((len(self.log_rows), mid, rec))
        self.log_rows.append((self.now, "restore" if forgotten else "touch", rid, mid, rec.key,
                              '{"reason": "added again"}'))
        self.results.append((mid, False))
        return bool(forgotten)

    def insert(self, rec: NewMemory, rid: int, mid: int) -> None:
        """``rec`` as the new row ``mid``, and as the memory it returns (in ``made``)."""
        key, content = rec.key, rec.content
        created, created_dt = _stamped(rec.created_at)
        if rec.embedding is not None:
            blob: bytes | None = self.blobs[self.position * self.width:
                                            (self.position + 1) * self.width]
            embedder_name = rec.embedder
            self.vec_ids.append(mid)
            self.vec_rows.append(self.position)
            self.vec_created.append(created)
            self.vec_robots.append(rid)
            self.position += 1
        else:
            blob = embedder_name = None
        if rec.last_accessed is None:
            accessed, accessed_dt = created, created_dt
        else:
            accessed, accessed_dt = _stamped(rec.last_accessed)
        forgotten_ts = to_timestamp(rec.forgotten_at) if rec.forgotten_at else None
        metadata = json.dumps(rec.metadata) if rec.metadata else "{}"
        digest, tags = rec.content_hash, rec.tags
        self.new_rows.append((
            mid, key, content, digest, content_crc(content), rid, rec.importance,
            rec.token_count, created, accessed, rec.access_count, metadata, blob,
            embedder_name, forgotten_ts, rec.kind, rec.source, rec.confidence,
        ))
        self.made[mid] = checked_instance(Memory,
            id=mid, key=key, content=content, content_hash=digest, robot=rec.robot,
            importance=float(rec.importance), token_count=rec.token_count,
            created_at=created_dt, last_accessed=accessed_dt, access_count=rec.access_count,
            tags=tuple(sorted(set(tags))) if tags else (), embedding=None, version=1,
            metadata=json.loads(metadata) if rec.metadata else {}, embedder=embedder_name,
            forgotten_at=utc_from_timestamp(forgotten_ts) if forgotten_ts else None,
            kind=rec.kind, source=rec.source, confidence=rec.confidence)
        self.inserted[key] = (mid, content, None)
        if tags:
            self.tag_links.extend((mid, tag) for tag in tags)
        self.log_rows.append((self.now, "add", rid, mid, key, "{}"))
        self.results.append((mid, True))

    def new_vectors(self) -> NewVectors | None:
        """The new rows with a vector, as the index takes them (None: none)."""
        if not self.vec_ids:
            return None
        return NewVectors(
            np.array(self.vec_ids, dtype=np.int64), self.units[self.vec_rows],
            np.array(self.vec_created, dtype=np.float64),
            np.array(self.vec_robots, dtype=np.int64))


class IdHighWater(RowListener):
    """Keeps the ids of purged memories from being handed out again (see ``_add_many``)."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    def purged(self, conn: Connection, ids: Sequence[int]) -> None:
        high = max(int(self._db.meta(conn, "id_high_water") or 0), *ids)
        self._db.set_meta(conn, "id_high_water", str(high))


class SQLiteWriter:
    """The add path and the other writes of memory rows."""

    def __init__(self, db: SQLiteDatabase, rows: SQLiteRows, mirror: VectorMirror,
                 working: SQLiteWorkingSet) -> None:
        self._db, self._rows, self._mirror, self._working = db, rows, mirror, working

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
        with self._db.write(cache_kib=_LARGE_BATCH_CACHE_KIB if big else None,
                            landed=lambda raw: _rows_exist(raw, made)) as conn:
            outcomes, vectors = self._add_many(conn, records, made, revived)
            # New rows are returned as written (no read-back); touched ones are re-read.
            again = [mid for mid, _created in outcomes if mid not in made]
            by_id = {m.id: m for part in chunks(again, 500) for m in self._rows.fetch(
                conn, f"m.id IN ({', '.join(str(int(i)) for i in part)})", {}, False)}
            by_id.update(made)
            results = [AddResult(by_id[mid], created) for mid, created in outcomes]
            change = working(results) if working is not None else None
            if change is not None:
                written = {r.memory.key: (r.memory.id, r.created) for r in results}
                applied = self._working.apply_in(conn, change, expected_version, written)
        # The in-process index follows only once the transaction has committed.
        self._mirror.add_new(vectors)
        self._mirror.set_alive(revived, True)
        self._mirror.set_alive([mid for rec, (mid, created) in zip(records, outcomes, strict=True)
                                if created and rec.forgotten_at is not None],
                               False)  # imported forgotten: hidden until restored
        return results, applied

    def _existing_rows(self, conn: Connection, records: Sequence[NewMemory]) -> tuple[
                       dict[str, tuple[int, str, float | None]], dict[int, Merged], int]:
        """The rows already holding the batch's keys (key -> id, content, forgotten_at),
        their importance and metadata (for re-adds), and the first id for new rows.

        Reads and writes of the add path go through the raw cursor (SQLAlchemy's
        per-statement overhead is most of a single add otherwise). New rows get their ids
        here (we hold the write lock, so max(id) + 1 onwards is what SQLite would assign).
        """
        keys = list(dict.fromkeys(r.key for r in records))
        existing: dict[str, tuple[int, str, float | None]] = {}
        stored: dict[int, Merged] = {}
        cur = conn.connection.cursor()
        try:
            for part in chunks(keys, 500):
                # A join from the list, not ``key IN (SELECT ...)``, which would first build
                # a temporary index of the list (0.4 µs a key, most of the lookup of a new one).
                for row in cur.execute(
                        "SELECT m.key, m.id, m.content, m.forgotten_at, m.importance, m.metadata "
                        "FROM json_each(?) j JOIN memories m ON m.key = j.value",
                        (json.dumps(part),)):
                    existing[row[0]] = (row[1], row[2], row[3])
                    stored[row[1]] = Merged(float(row[4]), as_dict(row[5]), set())
            if len(existing) < len(keys):
                self._rows.check_key_index(cur)  # new keys: would the index let a duplicate in?
            # Ids are never reused: past the newest row and past every purged one.
            next_id = int(cur.execute(
                "SELECT max(coalesce((SELECT max(id) FROM memories), 0), coalesce((SELECT "
                "CAST(value AS INTEGER) FROM htm_meta WHERE key = 'id_high_water'), 0))"
            ).fetchone()[0]) + 1
        finally:
            cur.close()
        return existing, stored, next_id

    def _add_many(self, conn: Connection, records: Sequence[NewMemory], made: dict[int, Memory],
                  revived: list[int]) -> tuple[list[tuple[int, bool]], NewVectors | None]:
        """Write the batch on ``conn``; fill ``made`` (new rows) and ``revived`` (restored ids).

        Returns (id, created) per record and the new rows' vectors for the index.
        """
        now = time.time()
        vectors = batch_embedder(records)  # one embedder and dimension per batch
        if vectors is not None:
            self._db.check_embedding(conn, *vectors)
        existing, stored, next_id = self._existing_rows(conn, records)
        batch = _Batch(now, unit_embeddings(records)[1], made)
        robot_ids: dict[str, int] = {}
        for rec in records:
            rid = robot_ids.get(rec.robot)
            if rid is None:
                rid = robot_ids[rec.robot] = self._db.robot_id(conn, rec.robot)
            prior = existing.get(rec.key) or batch.inserted.get(rec.key)
            if prior is None:
                batch.insert(rec, rid, next_id)
                next_id += 1
            elif batch.readd(rec, rid, prior, stored):  # a forgotten one, restored
                self._mirror.bump_generation(conn)
                revived.append(prior[0])
        merged_rows = self._merge_readds(conn, batch.readds, stored, batch.tag_links,
                                         batch.log_rows)
        self._write_batch(conn, batch.new_rows, batch.tag_links, batch.touched, batch.log_rows)
        if merged_rows:
            conn.execute(text("UPDATE memories SET importance = :i, metadata = :m WHERE id = :id"),
                         [{"i": i, "m": m, "id": mid} for i, m, mid in merged_rows])
        return batch.results, batch.new_vectors()

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
                batched = self._db.fts_batched and len(new_rows) > 1  # one row: the trigger is cheaper
                if batched:
                    cur.execute("INSERT OR REPLACE INTO htm_meta(key, value) VALUES (?, '1')",
                                (_FTS_BATCH_KEY,))
                cur.executemany(
                    "INSERT INTO memories(id, key, content, content_hash, content_crc, "
                    "robot_id, importance, token_count, created_at, last_accessed, "
                    "access_count, metadata, embedding, embedder, forgotten_at, kind, "
                    "source, confidence) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    new_rows)
                if batched:
                    cur.execute("INSERT INTO memories_fts(rowid, content) SELECT id, content "
                                "FROM memories WHERE id BETWEEN ? AND ?",
                                (new_rows[0][0], new_rows[-1][0]))
                    # The CJK trigger stood aside too: the batch's CJK rows, picked here.
                    cjk = [(row[0], row[2]) for row in new_rows
                           if not row[2].isascii() and _CJK.search(row[2])]
                    if cjk:
                        cur.executemany("INSERT INTO memories_cjk(rowid, content) VALUES (?, ?)",
                                        cjk)
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
            if log_rows and not touched and len(new_rows) > 1:
                # Only adds (no re-add interleaves its line): one statement copies them from
                # the rows just written, in id order, as the rows would have been bound.
                cur.execute("INSERT INTO operations(at, op, robot_id, memory_id, key, detail) "
                            "SELECT ?, 'add', robot_id, id, key, '{}' FROM memories "
                            "WHERE id BETWEEN ? AND ? ORDER BY id",
                            (log_rows[0][0], new_rows[0][0], new_rows[-1][0]))
            elif log_rows:
                cur.executemany("INSERT INTO operations(at, op, robot_id, memory_id, key, detail) "
                                "VALUES (?, ?, ?, ?, ?, ?)", log_rows)
        finally:
            cur.close()

    def touch(self, ids: Sequence[int], *, at: datetime) -> None:
        if not ids:
            return

        def write() -> None:
            with self._db.write() as conn:
                conn.execute(
                    text("UPDATE memories SET last_accessed = max(last_accessed, :t), "
                         "access_count = access_count + 1 WHERE id = :id"),
                    [{"t": to_timestamp(at), "id": i} for i in ids],
                )

        self._db.optional_write("access statistics", write, lambda: None)

    def set_embeddings(self, items: Sequence[tuple[int, Sequence[float]]], embedder: str) -> None:
        if not items:
            return
        units = [(mid, finite_unit(vec, f"embedding for memory {mid}")) for mid, vec in items]
        dims = {len(u) for _, u in units}
        if len(dims) != 1:
            raise DimensionMismatchError(f"embeddings in one batch have different dimensions: {dims}")
        with self._db.write() as conn:
            self._db.check_embedding(conn, embedder, dims.pop())
            conn.execute(
                text("UPDATE memories SET embedding = :e, embedder = :n WHERE id = :id"),
                [{"e": u.tobytes(), "n": embedder, "id": mid} for mid, u in units],
            )
            clear_failures(conn, [mid for mid, _ in units])
            self._mirror.bump_generation(conn)
            meta = {
                r[0]: (r[1], r[2], r[3]) for part in chunks([m for m, _ in units], 500)
                for r in conn.execute(text(
                    "SELECT id, created_at, robot_id, forgotten_at FROM memories WHERE id IN ("
                    + ", ".join(str(int(m)) for m in part) + ")"))
            }
        self._mirror.set_vectors(units, meta)

    def reset_embeddings(self) -> None:
        with self._db.write() as conn:
            conn.execute(text("UPDATE memories SET embedding = NULL, embedder = NULL"))
            conn.execute(text("UPDATE memory_versions SET embedding = NULL, embedder = NULL "
                              "WHERE embedding IS NOT NULL"))
            conn.execute(text("DELETE FROM htm_meta WHERE key IN ('embedder', 'embedding_dim')"))
            clear_failures(conn)
            self._db.log(conn, "reset_embeddings", robot_id=None)
            self._mirror.bump_generation(conn)
        self._mirror.discard()
