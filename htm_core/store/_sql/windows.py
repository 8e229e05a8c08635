"""The SQL of the ``memory_windows`` table shared by both backends (schema version 4).

A window row is one window vector of a long memory (``htm_core._windows``); see
:class:`~htm_core.store.base.Windows`. The backends add the DDL, the in-process index
(SQLite) or the HNSW index (PostgreSQL), and their vector encoding.
"""

from __future__ import annotations

from .catalogue import VISIBLE

__all__ = ["COUNT_SQL", "MISSING_SQL", "NONE_SQL", "OWNERS_SQL", "SPACES"]

#: How many spaces a memory's content holds (``htm_core._windows.is_long`` in SQL).
SPACES = "(length(m.content) - length(replace(m.content, ' ', '')))"

#: Visible long memories with a vector and no windows, oldest first.
MISSING_SQL = (
    "SELECT m.id, m.content_hash, m.content, m.metadata FROM memories m "
    f"WHERE {VISIBLE} AND m.embedding IS NOT NULL AND {SPACES} >= :words "
    "AND NOT EXISTS (SELECT 1 FROM memory_windows w WHERE w.memory_id = m.id) "
    "ORDER BY m.id LIMIT :limit")

#: The memories (of ``{ids}``) that may take windows: id, content hash, has a vector.
OWNERS_SQL = ("SELECT m.id, m.content_hash, m.embedding IS NOT NULL FROM memories m "
              "WHERE m.id IN ({ids})")

COUNT_SQL = "SELECT count(*) FROM memory_windows WHERE embedding IS NOT NULL"

#: The row of a long memory that needs no windows (its text makes one window, or the
#: embedder rejected them): no vector, so no search sees it; the catch-up skips it.
NONE_SQL = "INSERT INTO memory_windows(memory_id, n, embedding) VALUES (:m, 0, NULL)"
