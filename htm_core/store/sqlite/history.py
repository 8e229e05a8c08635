"""SQLite's part of versions: vectors as float32 BLOBs, history searched by FTS5 and numpy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ..vector_index import finite_unit, normalise
from .engine import SQLiteDatabase

__all__ = ["SQLiteHistory"]


class SQLiteHistory:
    """The :class:`~htm_core.store._sql.parts.HistorySQL` of SQLite."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    def set_vector(self, conn: Connection, memory_id: int, vector: Sequence[float],
                   embedder: str) -> None:
        unit = finite_unit(vector, f"embedding for memory {memory_id}")
        self._db.check_embedding(conn, embedder, int(unit.shape[0]))
        conn.execute(text("UPDATE memories SET embedding = :e, embedder = :n WHERE id = :id"),
                     {"e": unit.tobytes(), "n": embedder, "id": memory_id})

    def next_history_id(self, conn: Connection) -> int:
        """One past the highest history row id ever given: SQLite numbers a row one past
        the highest present, which reuses the id of a purged newest row, and a list walk's
        history mark must never see an update made after it below it."""
        given = int(conn.execute(text(
            "SELECT max(coalesce((SELECT max(id) FROM memory_versions), 0), "
            "coalesce((SELECT CAST(value AS INTEGER) FROM htm_meta "
            "WHERE key = 'history_high_water'), 0)) + 1")).scalar_one())
        conn.execute(text("INSERT INTO htm_meta(key, value) VALUES ('history_high_water', :v) "
                          "ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
                     {"v": str(given)})
        return given

    def vector_hits(self, conn: Connection, vector: Sequence[float], where: str,
                    params: dict[str, Any], limit: int) -> list[tuple[int, float]]:
        """Exact cosine over the filtered history (expected to be small beside the store)."""
        query = normalise(vector)
        width = int(query.shape[0]) * 4
        rows = [(int(r[0]), bytes(r[1])) for r in conn.execute(text(
            "SELECT v.id, v.embedding FROM memory_versions v JOIN memories m "
            f"ON m.id = v.memory_id WHERE v.embedding IS NOT NULL AND {where}"), params)
            if len(r[1]) == width]
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(b for _, b in rows), dtype=np.float32)
        scores = matrix.reshape(len(rows), -1) @ query
        best = np.argsort(-scores, kind="stable")[:limit]
        return [(rows[i][0], float(scores[i])) for i in best]

    def text_hits(self, conn: Connection, words: Sequence[str], where: str,
                  params: dict[str, Any], limit: int) -> list[tuple[int, float]]:
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = conn.execute(text(
            "SELECT v.id, bm25(memory_versions_fts) AS rank FROM memory_versions_fts "
            "JOIN memory_versions v ON v.id = memory_versions_fts.rowid "
            "JOIN memories m ON m.id = v.memory_id "
            f"WHERE memory_versions_fts MATCH :match AND {where} ORDER BY rank, v.id "
            "LIMIT :limit"), {**params, "match": match, "limit": limit}).all()
        return [(int(r[0]), -float(r[1])) for r in rows]
