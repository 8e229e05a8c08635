"""PostgreSQL batch writer: arrays for small batches, binary COPY for large ones, embeddings."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import DimensionMismatchError, DuplicateKeyError
from ...models import Memory
from .._sql.parts import LogLine
from ..base import AddResult, NewMemory, WorkingChange, WorkingResult
from ..one_embedder import batch_embedder, clear_failures
from ..vector_index import finite_unit
from ._codec import _COPY_OPERATIONS, _COPY_OPERATIONS_TYPES, _EMPTY_JSON, _units
from ._copy import KeyRace, aware, copy_rows
from ._inserts import (
    existing_rows,
    insert_copy,
    insert_statement,
    inserted_memories,
    merge_readds,
    normalised,
)
from ._schema import _DIMENSION_LOCK, _HNSW_INDEX
from .engine import PostgresDatabase
from .indexes import VectorColumns
from .rows import PostgresRows
from .working import PostgresWorkingSet
from .write_locks import lock_for_writing

__all__ = ["PostgresWriter"]

#: What the caller does with a batch's results as soon as they are final.
Enter = Callable[[list[AddResult]], None]


@dataclass
class _Batch:
    """One ``add_many`` batch on its way in: which record of each key is inserted, the
    rows its keys already had (locked), and what the insert made."""

    records: Sequence[NewMemory]
    robot_ids: dict[str, int]
    #: key -> index of the record inserted (the first with that key).
    first: dict[str, int]
    #: key -> (id, content, forgotten) of the memories already under the batch's keys.
    existing: dict[str, tuple[int, str, bool]]
    #: Indexes of the records that create their memory (before any race).
    new: list[int]
    inserted: dict[str, int] = field(default_factory=dict)
    copied: bool = False
    hashes: dict[int, str] = field(default_factory=dict)
    rank: dict[str, int] = field(default_factory=dict)
    metas: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: The results, when a COPY of only new memories gave them while it ran.
    early: list[AddResult] = field(default_factory=list)

    def creates(self, i: int) -> bool:
        """Whether record ``i`` is the one that created its memory."""
        key = self.records[i].key
        return self.first[key] == i and key in self.inserted

    def created(self) -> dict[int, int]:
        """id -> index of the record that created it."""
        return {self.inserted[self.records[i].key]: i for i in self.new
                if self.records[i].key in self.inserted}


def _first_of_each_key(records: Sequence[NewMemory]) -> dict[str, int]:
    """key -> index of its first record; a later one with other content is refused."""
    first: dict[str, int] = {}
    for i, rec in enumerate(records):
        if rec.key in first:
            if records[first[rec.key]].content != rec.content:
                raise DuplicateKeyError(
                    f"key {rec.key!r} is given twice in one batch with different content; "
                    "choose another key")
        else:
            first[rec.key] = i
    return first


def _plan(batch: _Batch) -> tuple[list[int], dict[int, int], list[LogLine]]:
    """Each record's memory id, the touches (id -> count) of the records that did not
    create their memory (content checked), and the log lines, in the batch's order."""
    records, inserted, first = batch.records, batch.inserted, batch.first
    touches: dict[int, int] = {}
    log: list[LogLine] = []
    restored: set[int] = set()
    ids: list[int] = []
    for i, rec in enumerate(records):
        rid = batch.robot_ids[rec.robot]
        if batch.creates(i):
            ids.append(inserted[rec.key])
            log.append(("add", rid, inserted[rec.key], rec.key, None))
            continue
        if rec.key in inserted:
            mid, forgotten = inserted[rec.key], records[first[rec.key]].forgotten_at is not None
        else:
            mid, old_content, was_forgotten = batch.existing[rec.key]
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
    return ids, touches, log


class PostgresWriter:
    """The add path and the other writes of memory rows.

    ``working`` writes the working-memory change an ``add_and_enter`` makes in the batch's
    transaction; ``after_reset`` runs once every vector is dropped (the searcher forgets
    what it cached about them). Batches of ``copy_min_rows`` new rows or more go by COPY.
    """

    def __init__(self, db: PostgresDatabase, rows: PostgresRows, columns: VectorColumns,
                 working: PostgresWorkingSet, *, after_reset: Callable[[], None],
                 copy_min_rows: int) -> None:
        self.db = db
        self.rows = rows
        self.columns = columns
        self.working = working
        self.after_reset = after_reset
        self.copy_min_rows = copy_min_rows

    # -- adding ----------------------------------------------------------------------

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
        robot_ids = self.db.robot_ids([r.robot for r in records])

        def write(conn: Connection, allow_copy: bool
                  ) -> tuple[list[AddResult], WorkingResult | None]:
            staged: list[WorkingChange | None] = []
            lock_for_writing(conn, robot_ids=robot_ids.values() if working is not None else (),
                             keys=[r.key for r in records])

            def enter(results: list[AddResult]) -> None:
                staged.append(working(results) if working is not None else None)

            results = self._add_many(conn, records, robot_ids, dims,
                                     allow_copy=allow_copy, enter=enter)
            if not staged:
                enter(results)
            if staged[0] is None:
                return results, None
            # Every memory of the batch is locked by it and its visibility known (a new
            # row, or an existing one locked and touched, which restores it).
            held = {r.memory.key: r.memory.id for r in results if r.memory.forgotten_at is None}
            return results, self.working.apply(conn, staged[0], expected_version, held,
                                               frozenset(r.memory.id for r in results
                                                         if r.created))

        try:
            return self.db.run("adding memories", lambda conn: write(conn, True))
        except KeyRace:  # rolled back; the statement path's ON CONFLICT sorts out the race
            return self.db.run("adding memories", lambda conn: write(conn, False))

    def _add_many(self, conn: Connection, records: Sequence[NewMemory],
                  robot_ids: dict[str, int], dims: set[int], *, allow_copy: bool,
                  enter: Enter | None = None) -> list[AddResult]:
        """The batch's writes on ``conn``; its results, also given to ``enter`` as soon as
        they are final: for a COPY of new memories only, while the server is still working
        through the rows (the caller's own work overlaps the server's). The caller calls
        ``enter`` itself when this did not."""
        if dims:
            embedder = next(r.embedder for r in records if r.embedding is not None)
            self.columns.check_embedding(conn, embedder or "unknown", next(iter(dims)))
        first = _first_of_each_key(records)
        existing = existing_rows(conn, list(first))
        batch = _Batch(records, robot_ids, first, existing,
                       [i for k, i in first.items() if k not in existing])
        fresh_at = set(batch.new)  # a vector of a record that touches is not stored, but checked
        _units([r for i, r in enumerate(records) if i not in fresh_at and r.embedding is not None])
        if batch.new:
            self._insert(conn, batch, allow_copy, enter)
        ids, touches, log = _plan(batch)
        if touches:
            conn.execute(text(
                "UPDATE memories m SET last_accessed = GREATEST(m.last_accessed, now()), "
                "access_count = m.access_count + t.n, forgotten_at = NULL "
                "FROM unnest(CAST(:ids AS bigint[]), CAST(:ns AS integer[])) AS t(id, n) "
                "WHERE m.id = t.id"),
                {"ids": list(touches), "ns": list(touches.values())})
        self.rows.link_tags(conn, [(batch.inserted[records[i].key], records[i].tags)
                                   for i in batch.new if records[i].key in batch.inserted])
        merge_readds(conn, [(n, ids[i], rec) for n, (i, rec) in enumerate(
            (i, rec) for i, rec in enumerate(records) if not batch.creates(i))], log)
        return self._results(conn, batch, ids, touches, log)

    def _insert(self, conn: Connection, batch: _Batch, allow_copy: bool,
                enter: Enter | None) -> None:
        """Insert the batch's new records: by COPY when there are enough of them (and all
        their times carry a zone), else as arrays of parameters. Keys another process
        committed after the first look are read (and locked) as existing."""
        records, new = batch.records, batch.new
        fresh = [records[i] for i in new]
        batch.copied = allow_copy and len(fresh) >= self.copy_min_rows and all(
            aware(r.created_at, r.last_accessed, r.forgotten_at) for r in fresh)
        if batch.copied:
            batch.hashes = {i: records[i].content_hash for i in new}
            batch.rank, batch.metas = normalised(conn, records, new)

            def during(mids: Sequence[int]) -> None:  # all new: the results are final
                by_new = inserted_memories(records, batch.hashes, dict(zip(
                    mids, range(len(records)), strict=True)), batch.rank, batch.metas)
                batch.early.extend(AddResult(by_new[mid], True) for mid in mids)
                assert enter is not None
                enter(batch.early)

            batch.inserted = insert_copy(
                conn, fresh, [batch.hashes[i] for i in new], batch.robot_ids,
                during if enter is not None and len(new) == len(records) else None)
        else:  # naive datetimes go as parameters: the server reads them in its time zone
            batch.inserted = insert_statement(conn, fresh, _units(fresh), batch.robot_ids)
        raced = [records[i].key for i in new if records[i].key not in batch.inserted]
        if raced:  # another process committed these keys after our first look
            batch.existing.update(existing_rows(conn, raced))

    def _results(self, conn: Connection, batch: _Batch, ids: list[int],
                 touches: dict[int, int], log: list[LogLine]) -> list[AddResult]:
        """Write the log lines; each record's result (built from the records for rows
        copied in, read back for the others)."""
        created = batch.created()
        by_id: dict[int, Memory] = {}
        if batch.copied:
            copy_rows(conn, _COPY_OPERATIONS, _COPY_OPERATIONS_TYPES, (
                (e[0], e[1], e[2], e[3], json.dumps(e[4]) if e[4] else _EMPTY_JSON) for e in log))
            if batch.early:
                return batch.early
            by_id = inserted_memories(batch.records, batch.hashes, {
                mid: i for mid, i in created.items() if mid not in touches},
                batch.rank, batch.metas)
        else:
            self.db.log_lines(conn, log)
        rest = sorted({mid for mid in ids if mid not in by_id})
        if rest:
            by_id.update((m.id, m) for m in self.rows.fetch(conn, "m.id = ANY(:ids)",
                                                            {"ids": rest}, False))
        return [AddResult(by_id[mid], created.get(mid) == i) for i, mid in enumerate(ids)]

    # -- the other writes ------------------------------------------------------------

    def touch(self, ids: Sequence[int], *, at: datetime) -> None:
        """Record an access: ``last_accessed`` (never moved back) and ``access_count``."""
        if not ids:
            return
        self.db.run("recording an access", lambda conn: conn.execute(text(
            "UPDATE memories SET last_accessed = GREATEST(last_accessed, :t), "
            "access_count = access_count + 1 WHERE id = ANY(:ids)"),
            {"t": at, "ids": sorted({int(i) for i in ids})}))

    def set_embeddings(self, items: Sequence[tuple[int, Sequence[float]]], embedder: str) -> None:
        """Store vectors for existing memories in one statement."""
        if not items:
            return
        units = [(int(mid), finite_unit(vec, f"embedding for memory {mid}")) for mid, vec in items]
        dims = {len(u) for _, u in units}
        if len(dims) != 1:
            raise DimensionMismatchError(
                f"embeddings in one batch have different dimensions: {sorted(dims)}")

        dim = next(iter(dims))

        def write(conn: Connection) -> None:
            self.columns.check_embedding(conn, embedder, dim)
            conn.execute(text(
                "UPDATE memories m SET embedding = v.e, embedder = :n "
                "FROM unnest(CAST(:ids AS bigint[]), CAST(:embs AS vector[])) AS v(id, e) "
                "WHERE m.id = v.id"),
                {"ids": [mid for mid, _ in units], "embs": [u for _, u in units],
                 "n": embedder})
            clear_failures(conn, [mid for mid, _ in units])

        self.db.run("storing embeddings", write)

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
            conn.execute(text("UPDATE memory_versions SET embedding = NULL, embedder = NULL "
                              "WHERE embedding IS NOT NULL"))
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {_HNSW_INDEX}")
            conn.exec_driver_sql("ALTER TABLE memories ALTER COLUMN embedding TYPE vector")
            conn.execute(text("DELETE FROM htm_meta WHERE key IN ('embedder', 'embedding_dim')"))
            clear_failures(conn)
            self.db.log_lines(conn, [("reset_embeddings", None, None, None, None)])

        self.db.run("resetting embeddings", write)
        self.after_reset()
