"""PostgreSQL batch writer: arrays for small batches, binary COPY for large ones, embeddings."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import (
    DimensionMismatchError,
    DuplicateKeyError,
)
from ...models import Memory
from .._coherence import Merged, as_dict, merge_readd, touch_detail
from .._vectors import (
    batch_embedder,
    clear_failures,
)
from ..base import (
    AddResult,
    NewMemory,
    WorkingChange,
    WorkingResult,
)
from ..values import checked_instance
from ..vector_index import finite_unit
from ._codec import (
    _COPY_MEMORIES,
    _COPY_MEMORIES_TYPES,
    _COPY_OPERATIONS,
    _COPY_OPERATIONS_TYPES,
    _EMPTY_JSON,
    _units,
    _vectors_binary,
)
from ._engine import _aware, _copy_rows, _KeyRace, _utc
from ._schema import _DIMENSION_LOCK, _HNSW_INDEX
from ._search import _PostgresSearch

#: Rows of a COPY whose vectors are converted together (see ``_insert_copy``).
_COPY_CHUNK = 64


class _PostgresWriter(_PostgresSearch):
    """The add path and the other writes of memory rows."""

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
        robot_ids = self._robot_id_map([r.robot for r in records])

        def write(conn: Connection, allow_copy: bool
                  ) -> tuple[list[AddResult], WorkingResult | None]:
            staged: list[WorkingChange | None] = []

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
            return results, self._apply_working(conn, staged[0], expected_version, held,
                                                frozenset(r.memory.id for r in results
                                                          if r.created))

        try:
            return self._run("adding memories", lambda conn: write(conn, True))
        except _KeyRace:  # rolled back; the statement path's ON CONFLICT sorts out the race
            return self._run("adding memories", lambda conn: write(conn, False))

    def _add_many(self, conn: Connection, records: Sequence[NewMemory],
                  robot_ids: dict[str, int], dims: set[int], *, allow_copy: bool,
                  enter: Callable[[list[AddResult]], None] | None = None) -> list[AddResult]:
        """The batch's writes on ``conn``; its results, also given to ``enter`` as soon as
        they are final: for a COPY of new memories only, while the server is still working
        through the rows (the caller's own work overlaps the server's). The caller calls
        ``enter`` itself when this did not."""
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
        fresh_at = set(new)  # a vector of a record that touches is not stored, but checked
        _units([r for i, r in enumerate(records) if i not in fresh_at and r.embedding is not None])
        inserted: dict[str, int] = {}
        copied = False
        hashes: dict[int, str] = {}
        rank: dict[str, int] = {}
        metas: dict[int, dict[str, Any]] = {}
        early: list[AddResult] = []
        if new:
            fresh = [records[i] for i in new]
            copied = allow_copy and len(fresh) >= self.copy_min_rows and all(
                _aware(r.created_at, r.last_accessed, r.forgotten_at) for r in fresh)
            if copied:
                hashes = {i: records[i].content_hash for i in new}
                rank, metas = self._normalised(conn, records, new)

                def during(mids: Sequence[int]) -> None:  # all new: the results are final
                    by_new = self._inserted_memories(records, hashes, dict(zip(
                        mids, range(len(records)), strict=True)), rank, metas)
                    early.extend(AddResult(by_new[mid], True) for mid in mids)
                    assert enter is not None
                    enter(early)

                inserted = self._insert_copy(
                    conn, fresh, [hashes[i] for i in new], robot_ids,
                    during if enter is not None and len(new) == len(records) else None)
            else:  # naive datetimes go as parameters: the server reads them in its time zone
                inserted = self._insert_statement(conn, fresh, _units(fresh), robot_ids)
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
            _copy_rows(conn, _COPY_OPERATIONS, _COPY_OPERATIONS_TYPES, (
                (e[0], e[1], e[2], e[3], json.dumps(e[4]) if e[4] else _EMPTY_JSON) for e in log))
            if early:
                return early
            by_id = self._inserted_memories(records, hashes, {
                mid: i for mid, i in created.items() if mid not in touches}, rank, metas)
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
        _PostgresWriter._link_tags(conn, links)
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
        rows = conn.execute(text(
            "INSERT INTO memories(key, content, content_hash, content_crc, robot_id, "
            "importance, token_count, created_at, last_accessed, access_count, metadata, "
            "embedding, embedder, forgotten_at) "
            "SELECT k, c, h, crc, rid, imp, tok, created, accessed, cnt, CAST(meta AS jsonb), "
            "emb, embn, forgotten FROM unnest("
            "CAST(:keys AS text[]), CAST(:contents AS text[]), CAST(:hashes AS text[]), "
            "CAST(:crcs AS bigint[]), "
            "CAST(:rids AS bigint[]), CAST(:imps AS double precision[]), "
            "CAST(:toks AS integer[]), CAST(:created AS timestamptz[]), "
            "CAST(:accessed AS timestamptz[]), CAST(:counts AS integer[]), "
            "CAST(:metas AS text[]), CAST(:embs AS vector[]), CAST(:embns AS text[]), "
            "CAST(:forgotten AS timestamptz[])) WITH ORDINALITY AS v(k, c, h, crc, rid, imp, tok, "
            "created, accessed, cnt, meta, emb, embn, forgotten, ord) ORDER BY ord "
            "ON CONFLICT (key) DO NOTHING RETURNING id, key"),
            {"keys": [r.key for r in records],
             "contents": [r.content for r in records],
             "hashes": [r.content_hash for r in records],
             "crcs": [r.content_crc for r in records],
             "rids": [robot_ids[r.robot] for r in records],
             "imps": [float(r.importance) for r in records],
             "toks": [int(r.token_count) for r in records],
             "created": [r.created_at for r in records],
             "accessed": [r.last_accessed or r.created_at for r in records],
             "counts": [int(r.access_count) for r in records],
             "metas": [json.dumps(r.metadata or {}) for r in records],
             "embs": list(units),
             "embns": [r.embedder if u is not None else None
                       for r, u in zip(records, units, strict=True)],
             "forgotten": [r.forgotten_at for r in records]}).all()
        return {str(r[1]): int(r[0]) for r in rows}

    def _insert_copy(self, conn: Connection, records: Sequence[NewMemory], hashes: Sequence[str],
                     robot_ids: dict[str, int],
                     during: Callable[[Sequence[int]], None] | None = None) -> dict[str, int]:
        """Stream ``records`` into ``memories`` with a binary COPY; key -> id.

        Ids are drawn from the table's identity sequence first (one array), so no row
        needs to come back; ``during`` gets them (in the order of ``records``) once the
        rows are sent (see ``_copy_rows``). The batch has locked the keys that exist; a
        key another writer commits in between makes the COPY fail (``_KeyRace``), and the
        batch is re-run by statement.
        """
        ids = sorted(int(i) for i in conn.execute(text(
            "SELECT ARRAY(SELECT nextval(pg_get_serial_sequence('memories', 'id')) "
            "FROM generate_series(1, :n))"), {"n": len(records)}).scalar_one())

        def rows() -> Iterator[tuple[Any, ...]]:
            # Vectors are made a chunk at a time as the rows go out (a vector that is not
            # finite fails the COPY, and so the batch), so the conversion overlaps the
            # server's inserting the rows already sent.
            for at in range(0, len(records), _COPY_CHUNK):
                part = records[at:at + _COPY_CHUNK]
                for mid, r, h, vector in zip(ids[at:at + _COPY_CHUNK], part,
                                             hashes[at:at + _COPY_CHUNK],
                                             _vectors_binary(_units(part)), strict=True):
                    yield (mid, r.key, r.content, h, r.content_crc, robot_ids[r.robot],
                           float(r.importance),
                           int(r.token_count), r.created_at, r.last_accessed or r.created_at,
                           int(r.access_count),
                           json.dumps(r.metadata) if r.metadata else _EMPTY_JSON, vector,
                           r.embedder if vector is not None else None, r.forgotten_at)

        _copy_rows(conn, _COPY_MEMORIES, _COPY_MEMORIES_TYPES, rows(),
                   None if during is None else lambda: during(ids))
        return {r.key: mid for mid, r in zip(ids, records, strict=True)}

    @staticmethod
    def _normalised(conn: Connection, records: Sequence[NewMemory], chosen: Sequence[int]
                    ) -> tuple[dict[str, int], dict[int, dict[str, Any]]]:
        """What the database makes of the ``chosen`` records' tags and metadata, asked
        before they are copied: the rank of each tag name in its collation (the order
        ``_fetch`` returns tags in) and each record's metadata as ``jsonb`` normalises it."""
        names = sorted({t for i in chosen for t in records[i].tags})
        rank: dict[str, int] = {}
        if names:
            rank = {str(r[0]): n for n, r in enumerate(conn.execute(text(
                "SELECT n FROM unnest(CAST(:names AS text[])) AS n ORDER BY n"),
                {"names": names}))}
        with_meta = [i for i in chosen if records[i].metadata]
        metas: dict[int, dict[str, Any]] = {}
        if with_meta:
            metas = {with_meta[int(r[0]) - 1]: dict(r[1]) for r in conn.execute(text(
                "SELECT v.ord, CAST(v.m AS jsonb) FROM unnest(CAST(:metas AS text[])) "
                "WITH ORDINALITY AS v(m, ord)"),
                {"metas": [json.dumps(records[i].metadata) for i in with_meta]})}
        return rank, metas

    @staticmethod
    def _inserted_memories(records: Sequence[NewMemory], hashes: dict[int, str],
                           chosen: dict[int, int],
                           rank: dict[str, int], metas: dict[int, dict[str, Any]]
                           ) -> dict[int, Memory]:
        """The memories copied in (id -> index of their record), built from the records
        and what ``_normalised`` read."""
        out: dict[int, Memory] = {}
        for mid, i in chosen.items():
            r = records[i]
            out[mid] = checked_instance(Memory,
                id=mid, key=r.key, content=r.content, content_hash=hashes[i],
                robot=r.robot, importance=float(r.importance),
                token_count=int(r.token_count),
                created_at=r.created_at.astimezone(timezone.utc),
                last_accessed=(r.last_accessed or r.created_at).astimezone(timezone.utc),
                access_count=int(r.access_count),
                tags=tuple(sorted(set(r.tags), key=rank.__getitem__)) if r.tags else (),
                metadata=metas.get(i, {}),
                embedder=r.embedder if r.embedding is not None else None,
                embedding=None, forgotten_at=_utc(r.forgotten_at), version=1)
        return out

    @staticmethod
    def _existing(conn: Connection, keys: Sequence[str]) -> dict[str, tuple[int, str, bool]]:
        """key -> (id, content, forgotten) of the memories already holding ``keys``.

        The rows are locked (in key order, so writers cannot deadlock on them) until the
        batch commits: a concurrent forget or purge cannot slip between check and touch.
        """
        rows = conn.execute(text(  # the keys as one JSON text (see ``_apply_working``)
            "SELECT key, id, content, forgotten_at IS NOT NULL FROM memories "
            "WHERE key = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)))) "
            "ORDER BY key FOR UPDATE"), {"keys": json.dumps(list(keys))})
        return {str(r[0]): (int(r[1]), str(r[2]), bool(r[3])) for r in rows}


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
        units = [(int(mid), finite_unit(vec, f"embedding for memory {mid}")) for mid, vec in items]
        dims = {len(u) for _, u in units}
        if len(dims) != 1:
            raise DimensionMismatchError(
                f"embeddings in one batch have different dimensions: {sorted(dims)}")

        dim = next(iter(dims))

        def write(conn: Connection) -> None:
            self._check_embedding(conn, embedder, dim)
            conn.execute(text(
                "UPDATE memories m SET embedding = v.e, embedder = :n "
                "FROM unnest(CAST(:ids AS bigint[]), CAST(:embs AS vector[])) AS v(id, e) "
                "WHERE m.id = v.id"),
                {"ids": [mid for mid, _ in units], "embs": [u for _, u in units],
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
            conn.execute(text("UPDATE memory_versions SET embedding = NULL, embedder = NULL "
                              "WHERE embedding IS NOT NULL"))
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {_HNSW_INDEX}")
            conn.exec_driver_sql("ALTER TABLE memories ALTER COLUMN embedding TYPE vector")
            conn.execute(text("DELETE FROM htm_meta WHERE key IN ('embedder', 'embedding_dim')"))
            clear_failures(conn)
            self._log_many(conn, [("reset_embeddings", None, None, None, None)])

        self._run("resetting embeddings", write)
        self._centroid = None
        self._dim = None
