"""The statements of PostgreSQL's batch add: the rows already under the batch's keys,
inserts by arrays or by binary COPY, what the database makes of tags and metadata, and
the merge of re-added records into their memories."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from datetime import timezone
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...models import Memory
from .._coherence import Merged, as_dict, merge_readd, touch_detail
from .._sql.parts import LogLine
from ..base import NewMemory
from ..values import checked_instance
from ._codec import _COPY_MEMORIES, _COPY_MEMORIES_TYPES, _EMPTY_JSON, _units, _vectors_binary
from ._copy import copy_rows
from .rows import PostgresRows, utc

__all__ = ["existing_rows", "insert_copy", "insert_statement", "inserted_memories",
           "merge_readds", "normalised"]

#: Rows of a COPY whose vectors are converted together (see :func:`insert_copy`).
_COPY_CHUNK = 64


def merge_readds(conn: Connection, readds: Sequence[tuple[int, int, NewMemory]],
                 log: list[LogLine]) -> None:
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
    PostgresRows.link_tags(conn, links)
    if changed:
        rows = sorted(changed)
        conn.execute(text(
            "UPDATE memories m SET importance = v.i, metadata = CAST(v.meta AS jsonb) "
            "FROM unnest(CAST(:ids AS bigint[]), CAST(:imps AS double precision[]), "
            "CAST(:metas AS text[])) AS v(id, i, meta) WHERE m.id = v.id"),
            {"ids": rows, "imps": [state[m].importance for m in rows],
             "metas": [json.dumps(state[m].metadata) for m in rows]})


def insert_statement(conn: Connection, records: Sequence[NewMemory],
                     units: Sequence[np.ndarray | None],
                     robot_ids: dict[str, int]) -> dict[str, int]:
    """Insert ``records`` as arrays of parameters; key -> id of the rows inserted."""
    rows = conn.execute(text(
        "INSERT INTO memories(key, content, content_hash, content_crc, robot_id, "
        "importance, token_count, created_at, last_accessed, access_count, metadata, "
        "embedding, embedder, forgotten_at, kind, source, confidence) "
        "SELECT k, c, h, crc, rid, imp, tok, created, accessed, cnt, CAST(meta AS jsonb), "
        "emb, embn, forgotten, kd, src, conf FROM unnest("
        "CAST(:keys AS text[]), CAST(:contents AS text[]), CAST(:hashes AS text[]), "
        "CAST(:crcs AS bigint[]), "
        "CAST(:rids AS bigint[]), CAST(:imps AS double precision[]), "
        "CAST(:toks AS integer[]), CAST(:created AS timestamptz[]), "
        "CAST(:accessed AS timestamptz[]), CAST(:counts AS integer[]), "
        "CAST(:metas AS text[]), CAST(:embs AS vector[]), CAST(:embns AS text[]), "
        "CAST(:forgotten AS timestamptz[]), CAST(:kinds AS text[]), CAST(:sources AS text[]), "
        "CAST(:confs AS double precision[])) WITH ORDINALITY AS v(k, c, h, crc, rid, imp, tok, "
        "created, accessed, cnt, meta, emb, embn, forgotten, kd, src, conf, ord) ORDER BY ord "
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
         "forgotten": [r.forgotten_at for r in records],
         "kinds": [r.kind for r in records], "sources": [r.source for r in records],
         "confs": [r.confidence for r in records]}).all()
    return {str(r[1]): int(r[0]) for r in rows}


def insert_copy(conn: Connection, records: Sequence[NewMemory], hashes: Sequence[str],
                robot_ids: dict[str, int],
                during: Callable[[Sequence[int]], None] | None = None) -> dict[str, int]:
    """Stream ``records`` into ``memories`` with a binary COPY; key -> id.

    Ids are drawn from the table's identity sequence first (one array), so no row
    needs to come back; ``during`` gets them (in the order of ``records``) once the
    rows are sent (see :func:`~htm_core.store.postgres._copy.copy_rows`). The batch has
    locked the keys that exist; a key another writer commits in between makes the COPY
    fail (:class:`~htm_core.store.postgres._copy.KeyRace`), and the batch is re-run by
    statement.
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
                       r.embedder if vector is not None else None, r.forgotten_at,
                       r.kind, r.source, r.confidence)

    copy_rows(conn, _COPY_MEMORIES, _COPY_MEMORIES_TYPES, rows(),
               None if during is None else lambda: during(ids))
    return {r.key: mid for mid, r in zip(ids, records, strict=True)}


def normalised(conn: Connection, records: Sequence[NewMemory], chosen: Sequence[int]
                ) -> tuple[dict[str, int], dict[int, dict[str, Any]]]:
    """What the database makes of the ``chosen`` records' tags and metadata, asked
    before they are copied: the rank of each tag name in its collation (the order
    ``PostgresRows.fetch`` returns tags in) and each record's metadata as ``jsonb`` normalises it."""
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


def inserted_memories(records: Sequence[NewMemory], hashes: dict[int, str],
                      chosen: dict[int, int],
                      rank: dict[str, int], metas: dict[int, dict[str, Any]]
                      ) -> dict[int, Memory]:
    """The memories copied in (id -> index of their record), built from the records
    and what :func:`normalised` read."""
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
            embedding=None, forgotten_at=utc(r.forgotten_at), version=1,
            kind=r.kind, source=r.source, confidence=r.confidence)
    return out


def existing_rows(conn: Connection, keys: Sequence[str]) -> dict[str, tuple[int, str, bool]]:
    """key -> (id, content, forgotten) of the memories already holding ``keys``.

    The rows are locked until the batch commits, in id order as every locking read of
    memories is: a concurrent forget or purge cannot slip between check and touch.
    """
    rows = conn.execute(text(  # the keys as one JSON text
        "SELECT key, id, content, forgotten_at IS NOT NULL FROM memories "
        "WHERE key = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)))) "
        "ORDER BY id FOR UPDATE"), {"keys": json.dumps(list(keys))})
    return {str(r[0]): (int(r[1]), str(r[2]), bool(r[3])) for r in rows}
