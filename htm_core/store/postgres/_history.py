"""PostgreSQL's part of versions: pgvector for the history's vectors, its ``tsvector``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from .._sql.versions import SQLVersions
from ..vector_index import finite_unit
from ._schema import _HISTORY_LOCK
from ._writer import _PostgresWriter


def _literal(vector: Sequence[float]) -> tuple[np.ndarray, int]:
    """A unit vector as a float32 array (sent as ``vector`` by pgvector's codec), its dimension."""
    unit = finite_unit(vector, "an embedding")
    return unit.astype(np.float32), int(unit.shape[0])


class _PostgresHistory(SQLVersions, _PostgresWriter):
    """The dialect hooks of :class:`~htm_core.store._sql.versions.SQLVersions`."""

    _JSON_PARAM: ClassVar[str] = "CAST(:meta AS jsonb)"
    _SERIAL_HISTORY: ClassVar[str] = f"SELECT pg_advisory_xact_lock({_HISTORY_LOCK})"

    def _set_vector(self, conn: Connection, memory_id: int, vector: Sequence[float],
                    embedder: str) -> None:
        literal, dim = _literal(vector)
        self._check_embedding(conn, embedder, dim)
        conn.execute(text("UPDATE memories SET embedding = CAST(:e AS vector), embedder = :n "
                          "WHERE id = :id"), {"e": literal, "n": embedder, "id": memory_id})

    def _history_vector_hits(self, conn: Connection, vector: Sequence[float], where: str,
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

    def _history_text_hits(self, conn: Connection, words: Sequence[str], where: str,
                           params: dict[str, Any], limit: int) -> list[tuple[int, float]]:
        # Each word is a bound value through phraseto_tsquery: no tsquery syntax gets in.
        query = " || ".join(f"phraseto_tsquery('english', :hw{i})" for i in range(len(words)))
        rows = conn.execute(text(
            f"SELECT v.id, CAST(ts_rank(v.tsv, {query}) AS double precision) AS rank "
            f"FROM memory_versions v JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.tsv @@ ({query}) AND {where} ORDER BY rank DESC, v.id LIMIT :limit"),
            {**params, **{f"hw{i}": w for i, w in enumerate(words)}, "limit": limit}).all()
        return [(int(r[0]), float(r[1])) for r in rows]
