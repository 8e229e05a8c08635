"""What both SQL backends mean by "one store, one embedder", written once.

A store records the name and dimension of the embedder that made its first vector in
``htm_meta``. Every later vector write (add, import, copy, background filling, another
process) is checked against both inside the write transaction, so no caller can mix
two models' vectors in one store, not even one that never went through ``HTM``.

Memories whose text an embedder keeps rejecting are marked in the table
``embedding_failures`` (one row per memory, with the reason): the automatic filling skips
them, ``stats()`` counts them, and ``retry`` clears the marks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ..errors import DimensionMismatchError, EmbedderMismatchError
from ._common import chunks
from .base import EmbeddingFailure, NewMemory

__all__ = ["CHUNK_POSTGRES", "CHUNK_SQLITE", "FAILED_COUNT", "FAILURES_DDL", "NOT_FAILED",
           "EmbeddingFailure", "batch_embedder", "check_embedder", "clear_failures",
           "list_failures", "mark_failures", "mismatch_advice"]

#: The table of memories whose embedding failed; ``at`` is the backend's time type.
FAILURES_DDL = """CREATE TABLE IF NOT EXISTS embedding_failures (
        memory_id {id_type} PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
        embedder text NOT NULL,
        error text NOT NULL,
        failed_at {time_type} NOT NULL)"""

#: ``AND`` clause for ``memories m``: not marked as failed.
NOT_FAILED = "NOT EXISTS (SELECT 1 FROM embedding_failures f WHERE f.memory_id = m.id)"
#: True for a document chunk, whose vector is of its heading path and text
#: (:func:`htm_core.enrich.documents.embed_text`), not of its content alone: the store
#: cache (``find_embeddings``) never hands such a vector out for another text.
CHUNK_SQLITE = ("(json_extract(metadata, '$.heading_path[0]') IS NOT NULL AND "
                "json_extract(metadata, '$.chunk_index') IS NOT NULL AND "
                "json_extract(metadata, '$.source') IS NOT NULL)")
CHUNK_POSTGRES = ("(metadata->'heading_path'->>0 IS NOT NULL AND "
                  "metadata->'chunk_index' IS NOT NULL AND metadata->'source' IS NOT NULL)")
#: How many visible memories without a vector are marked as failed.
FAILED_COUNT = ("SELECT count(*) FROM embedding_failures f JOIN memories m ON m.id = f.memory_id "
                "WHERE m.forgotten_at IS NULL AND m.embedding IS NULL")


def mismatch_advice(store_embedder: str) -> str:
    """How to get out of an embedder mismatch (said by every such error)."""
    return (f"use the store's embedder ({store_embedder!r}), or move the store to the new one "
            "with HTM(..., allow_embedder_mismatch=True).reembed() or `htm reembed`; "
            "to load an export made with another embedder, run `htm import --reembed FILE`")


def batch_embedder(records: Sequence[NewMemory]) -> tuple[str, int] | None:
    """The (embedder, dimension) of the vectors in ``records``, None when none carries one.

    A batch mixing dimensions raises ``DimensionMismatchError``; one mixing embedders,
    or holding a vector without its embedder's name, ``EmbedderMismatchError``.
    """
    dims = {len(r.embedding) for r in records if r.embedding is not None}
    if not dims:
        return None
    if len(dims) > 1:
        raise DimensionMismatchError(
            f"embeddings in one batch have different dimensions: {sorted(dims)}")
    names = {r.embedder for r in records if r.embedding is not None}
    if None in names or "" in names:
        raise EmbedderMismatchError(
            "a vector came without its embedder's name; give NewMemory.embedder with every "
            "embedding (nothing was written)")
    if len(names) > 1:
        raise EmbedderMismatchError(
            f"one batch holds vectors from several embedders {sorted(str(n) for n in names)}; "
            "a store keeps one embedder's vectors (nothing was written)")
    return str(names.pop()), dims.pop()


def check_embedder(stored_name: str, stored_dim: int, embedder: str, dim: int) -> None:
    """Raise unless vectors of ``embedder``/``dim`` belong in a store of ``stored_*``."""
    if stored_dim != dim:
        raise DimensionMismatchError(
            f"embedding has dimension {dim} but this store holds {stored_dim}-dimensional "
            f"vectors from {stored_name}; use the same embedder or re-embed the store "
            "(HTM.reembed())")
    if stored_name != embedder:
        raise EmbedderMismatchError(
            f"this store's vectors were made by {stored_name!r} but these are from "
            f"{embedder!r} (same dimension, different model: they cannot be compared); "
            f"nothing was written; {mismatch_advice(stored_name)}")


def mark_failures(conn: Connection, failures: Sequence[tuple[int, str]], embedder: str,
                  at: Any) -> None:
    """Mark memories ``(id, reason)`` as failing with ``embedder`` (the reason is updated)."""
    if failures:
        conn.execute(text(
            "INSERT INTO embedding_failures(memory_id, embedder, error, failed_at) "
            "SELECT :m, :e, :r, :t WHERE EXISTS (SELECT 1 FROM memories WHERE id = :m) "
            "ON CONFLICT (memory_id) DO UPDATE SET embedder = excluded.embedder, "
            "error = excluded.error, failed_at = excluded.failed_at"),
            [{"m": int(mid), "e": embedder, "r": reason[:2000], "t": at}
             for mid, reason in failures])


def clear_failures(conn: Connection, ids: Sequence[int] | None = None) -> int:
    """Drop the failure marks of ``ids`` (all when None); return how many were dropped."""
    if ids is None:
        return int(conn.execute(text("DELETE FROM embedding_failures")).rowcount or 0)
    done = 0
    for part in chunks([int(i) for i in ids], 500):
        done += int(conn.execute(text(
            "DELETE FROM embedding_failures WHERE memory_id IN ("
            + ", ".join(str(i) for i in part) + ")")).rowcount or 0)
    return done


def list_failures(conn: Connection, limit: int) -> list[tuple[str, str, str, Any]]:
    """(key, embedder, reason, failed_at) of failing visible memories, oldest mark first."""
    rows = conn.execute(text(
        "SELECT m.key, f.embedder, f.error, f.failed_at FROM embedding_failures f "
        "JOIN memories m ON m.id = f.memory_id WHERE m.forgotten_at IS NULL "
        "AND m.embedding IS NULL ORDER BY f.failed_at, f.memory_id LIMIT :l"), {"l": limit}).all()
    return [(str(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows]
