"""PostgreSQL windows (schema version 4): the ``memory_windows`` rows, their HNSW index,
and the vector search taking each memory's better score of its whole vector and its best
window, in SQL.

The window column gets its dimension (and its HNSW index) with the first windows of an
embedder, as ``memories.embedding`` does with the first vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import DimensionMismatchError
from .._sql.windows import COUNT_SQL, MISSING_SQL, NONE_SQL, OWNERS_SQL
from ..base import SearchFilters
from ..vector_index import normalise
from ._history import _PostgresHistory
from ._schema import _DIMENSION_LOCK, _WINDOWS_HNSW_INDEX


class _PostgresWindows(_PostgresHistory):
    """:class:`~htm_core.store.base.Windows` on PostgreSQL."""

    def _vector_sql(self, unit: np.ndarray, limit: int, filters: SearchFilters,
                    windows: bool = True) -> tuple[str, dict[str, Any]]:
        """The memories' search and, with ``windows``, the windows' (each an HNSW scan
        ordered by distance alone), the better score per memory kept."""
        sql, params = super()._vector_sql(unit, limit, filters)
        if not windows:
            return sql, params
        where = self._filter_sql(filters, params)
        params["wlimit"] = 2 * limit
        return (
            "SELECT u.id, max(u.score) AS score FROM ("
            f"({sql}) UNION ALL ("
            "SELECT w.memory_id AS id, 1 - (w.embedding <=> CAST(:q AS vector)) AS score "
            "FROM memory_windows w JOIN memories m ON m.id = w.memory_id "
            f"WHERE w.embedding IS NOT NULL AND {where} "
            "ORDER BY w.embedding <=> CAST(:q AS vector) LIMIT :wlimit)) u "
            "GROUP BY u.id ORDER BY score DESC, u.id LIMIT :limit", params)

    def _window_dim(self, conn: Connection, dim: int) -> None:
        """Give the window column dimension ``dim`` and its HNSW index (once per embedder)."""
        def typmod() -> int:
            return int(conn.execute(text(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memory_windows'::regclass "
                "AND attname = 'embedding'")).scalar_one())

        if typmod() == dim:
            return
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _DIMENSION_LOCK})
        if typmod() == dim:
            return
        conn.execute(text("DELETE FROM memory_windows"))  # another embedder's, if any
        conn.exec_driver_sql(f"ALTER TABLE memory_windows ALTER COLUMN embedding TYPE vector({dim})")
        conn.exec_driver_sql(
            f"CREATE INDEX IF NOT EXISTS {_WINDOWS_HNSW_INDEX} ON memory_windows "
            f"USING hnsw (embedding vector_cosine_ops) WITH (m = {self.hnsw_m}, "
            f"ef_construction = {self.hnsw_ef_construction})")

    def set_windows(self, items: Sequence[tuple[int, str, Sequence[Sequence[float]]]]) -> int:
        if not items:
            return 0

        def write(conn: Connection) -> int:
            stored = conn.execute(text(
                "SELECT value FROM htm_meta WHERE key = 'embedding_dim'")).scalar()
            ids = ", ".join(str(int(mid)) for mid, _, _ in items)
            owners = {int(r[0]): (str(r[1]), bool(r[2]))
                      for r in conn.execute(text(OWNERS_SQL.format(ids=ids)))}
            todo = [(mid, [normalise(v) for v in vectors]) for mid, digest, vectors in items
                    if owners.get(int(mid)) == (digest, True)]
            if not todo or stored is None:
                return 0
            dim = int(stored)
            if any(u.shape[0] != dim for _, units in todo for u in units):
                raise DimensionMismatchError(
                    f"window vectors do not have the store's dimension ({dim}); use the "
                    "store's embedder")
            self._window_dim(conn, dim)
            conn.execute(text("DELETE FROM memory_windows WHERE memory_id = ANY(:ids)"),
                         {"ids": [mid for mid, _ in todo]})
            rows = [{"m": mid, "n": n, "e": u} for mid, units in todo for n, u in enumerate(units)]
            if rows:
                conn.execute(text("INSERT INTO memory_windows(memory_id, n, embedding) "
                                  "VALUES (:m, :n, :e)"), rows)
            none = [{"m": mid} for mid, units in todo if not units]
            if none:
                conn.execute(text(NONE_SQL), none)
            return len(todo)

        return self._run("storing windows", write)

    def missing_windows(self, *, window_words: int, limit: int
                        ) -> list[tuple[int, str, str, dict[str, Any]]]:
        rows = self._read("finding memories without windows", lambda conn: conn.execute(
            text(MISSING_SQL), {"words": window_words, "limit": limit}).all())
        return [(int(r[0]), str(r[1]), str(r[2]), dict(r[3] or {})) for r in rows]

    def window_count(self) -> int:
        return int(self._read("counting windows",
                              lambda conn: conn.execute(text(COUNT_SQL)).scalar()) or 0)
