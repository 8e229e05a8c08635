"""PostgreSQL windows (schema version 4): the ``memory_windows`` rows, their HNSW index,
and the vector search taking each memory's better score of its whole vector and its best
window, in SQL.

The window column gets its dimension (and its HNSW index) with the first windows of an
embedder (:meth:`~htm_core.store.postgres.indexes.VectorColumns.window_dim`), as
``memories.embedding`` does with the first vector.
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
from .engine import PostgresDatabase
from .indexes import VectorColumns
from .rows import FilterSQL
from .search import memory_vector_sql

__all__ = ["PostgresWindows", "WindowedVectorSQL"]


class WindowedVectorSQL:
    """The vector search statement of a store with windows (a :class:`~htm_core.store.
    postgres.search.VectorSQL`): the memories' search and, with ``windows``, the
    windows' (each an HNSW scan ordered by distance alone), the better score per memory
    kept."""

    def __init__(self, filter_sql: FilterSQL) -> None:
        self.filter_sql = filter_sql

    def __call__(self, unit: np.ndarray, limit: int, filters: SearchFilters,
                 windows: bool = True, fenced: bool = False) -> tuple[str, dict[str, Any]]:
        sql, params = memory_vector_sql(unit, limit, filters, self.filter_sql, fenced)
        if not windows:
            return sql, params
        where = self.filter_sql(filters, params, fenced_tags=fenced)
        params["wlimit"] = 2 * limit
        return (
            "SELECT u.id, max(u.score) AS score FROM ("
            f"({sql}) UNION ALL ("
            "SELECT w.memory_id AS id, 1 - (w.embedding <=> CAST(:q AS vector)) AS score "
            "FROM memory_windows w JOIN memories m ON m.id = w.memory_id "
            f"WHERE w.embedding IS NOT NULL AND {where} "
            "ORDER BY w.embedding <=> CAST(:q AS vector) LIMIT :wlimit)) u "
            "GROUP BY u.id ORDER BY score DESC, u.id LIMIT :limit", params)


class PostgresWindows:
    """:class:`~htm_core.store.base.Windows` on PostgreSQL: the ``memory_windows`` rows."""

    def __init__(self, db: PostgresDatabase, columns: VectorColumns) -> None:
        self.db = db
        self.columns = columns

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
            self.columns.window_dim(conn, dim)
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

        return self.db.run("storing windows", write)

    def missing_windows(self, *, window_words: int, limit: int
                        ) -> list[tuple[int, str, str, dict[str, Any]]]:
        rows = self.db.read("finding memories without windows", lambda conn: conn.execute(
            text(MISSING_SQL), {"words": window_words, "limit": limit}).all())
        return [(int(r[0]), str(r[1]), str(r[2]), dict(r[3] or {})) for r in rows]

    def window_count(self) -> int:
        return int(self.db.read("counting windows",
                                lambda conn: conn.execute(text(COUNT_SQL)).scalar()) or 0)
