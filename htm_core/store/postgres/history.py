"""PostgreSQL's part of versions: pgvector for the history's vectors, its ``tsvector``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ..vector_index import finite_unit
from .indexes import VectorColumns

__all__ = ["PostgresHistory"]


def _literal(vector: Sequence[float]) -> tuple[np.ndarray, int]:
    """A unit vector as a float32 array (sent as ``vector`` by pgvector's codec), its dimension."""
    unit = finite_unit(vector, "an embedding")
    return unit.astype(np.float32), int(unit.shape[0])


class PostgresHistory:
    """:class:`~htm_core.store._sql.parts.HistorySQL` on PostgreSQL: writing a memory's
    vector, and searching the superseded versions by vector and by full text."""

    def __init__(self, columns: VectorColumns) -> None:
        self.columns = columns

    def set_vector(self, conn: Connection, memory_id: int, vector: Sequence[float],
                   embedder: str) -> None:
        """Store ``vector`` (checked against the store's embedder) on the memory's row."""
        literal, dim = _literal(vector)
        self.columns.check_embedding(conn, embedder, dim)
        conn.execute(text("UPDATE memories SET embedding = CAST(:e AS vector), embedder = :n "
                          "WHERE id = :id"), {"e": literal, "n": embedder, "id": memory_id})

    @staticmethod
    def vector_hits(conn: Connection, vector: Sequence[float], where: str,
                    params: dict[str, Any], limit: int) -> list[tuple[int, float]]:
        """Exact cosine over the filtered history (expected to be small beside the store)."""
        literal, dim = _literal(vector)
        rows = conn.execute(text(
            "SELECT v.id, 1 - (v.embedding <=> CAST(:hq AS vector)) FROM memory_versions v "
            "JOIN memories m ON m.id = v.memory_id WHERE v.embedding IS NOT NULL "
            f"AND vector_dims(v.embedding) = :hdim AND {where} "
            "ORDER BY v.embedding <=> CAST(:hq AS vector), v.id LIMIT :limit"),
            {**params, "hq": literal, "hdim": dim, "limit": limit}).all()
        return [(int(r[0]), float(r[1])) for r in rows]

    @staticmethod
    def text_hits(conn: Connection, words: Sequence[str], where: str,
                  params: dict[str, Any], limit: int) -> list[tuple[int, float]]:
        """Top ``limit`` (version row id, ``ts_rank``) of versions holding any of ``words``."""
        # Each word is a bound value through phraseto_tsquery: no tsquery syntax gets in.
        query = " || ".join(f"phraseto_tsquery('english', :hw{i})" for i in range(len(words)))
        rows = conn.execute(text(
            f"SELECT v.id, CAST(ts_rank(v.tsv, {query}) AS double precision) AS rank "
            f"FROM memory_versions v JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.tsv @@ ({query}) AND {where} ORDER BY rank DESC, v.id LIMIT :limit"),
            {**params, **{f"hw{i}": w for i, w in enumerate(words)}, "limit": limit}).all()
        return [(int(r[0]), float(r[1])) for r in rows]

    @staticmethod
    def next_history_id(conn: Connection) -> int | None:
        """None: the identity column numbers history rows (it never reuses an id)."""
        return None
