"""SQLite windows (schema version 4): the ``memory_windows`` rows and their in-process index.

The vector search takes each memory's best window from a
:class:`~htm_core.store.window_index.WindowIndex` filtered through the memory index, and
keeps the better of the two scores per memory. The window index follows the table like
the memory index does: rows newer than it holds are pulled before a search, and any
deletion (the ``window_generation`` a trigger bumps) reloads it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import text

from ...errors import DimensionMismatchError
from .._sql.windows import COUNT_SQL, MISSING_SQL, NONE_SQL, OWNERS_SQL
from ..base import SearchFilters
from ..vector_index import normalise, unit_rows
from ..window_index import WindowIndex
from ._schema import _LARGE_BATCH, _LARGE_BATCH_CACHE_KIB
from .engine import SQLiteDatabase
from .mirror import VectorMirror
from .reads import Mark, SQLiteReads


def merge_best(hits: list[tuple[int, float]], windows: list[tuple[int, float]],
               limit: int) -> list[tuple[int, float]]:
    """Per memory the better score of ``hits`` and ``windows``; top ``limit``, best first."""
    best = dict(hits)
    for mid, score in windows:
        if score > best.get(mid, -2.0):
            best[mid] = score
    return sorted(best.items(), key=lambda hit: (-hit[1], hit[0]))[:limit]


def _window_rows(todo: Sequence[tuple[int, Sequence[Sequence[float]]]], dim: int | None
                 ) -> list[tuple[int, int, bytes]]:
    """The ``memory_windows`` rows ``(memory id, n, vector)`` of ``(memory id, window
    vectors)``: unit float32 blobs made at once (one ``tobytes``, a slice of it per row); a
    vector of another dimension than the store's is refused."""
    for mid, vectors in todo:
        if any(dim is None or len(v) != dim for v in vectors):
            raise DimensionMismatchError(
                f"window vectors of memory {mid} do not have the store's dimension "
                f"({dim}); use the store's embedder")
    owners = [(mid, n) for mid, vectors in todo for n in range(len(vectors))]
    if not owners:
        return []
    matrix = unit_rows([v for _, vectors in todo for v in vectors],
                       lambda row: f"window {owners[row][1]} of memory {owners[row][0]}")
    blobs, width = matrix.tobytes(), matrix.shape[1] * matrix.itemsize
    return [(mid, n, blobs[k * width:(k + 1) * width]) for k, (mid, n) in enumerate(owners)]


def _write_windows(cur: Any, items: Sequence[tuple[int, str, Sequence[Sequence[float]]]],
                   dim: int | None) -> int:
    """:meth:`SQLiteWindows.set_windows`'s statements on ``cur``, in its transaction."""
    ids = ", ".join(str(int(mid)) for mid, _, _ in items)
    owners = {int(r[0]): (str(r[1]), bool(r[2]))
              for r in cur.execute(OWNERS_SQL.format(ids=ids))}
    # updated, purged or without a vector meanwhile: skipped
    todo = [(int(mid), vectors) for mid, digest, vectors in items
            if owners.get(int(mid)) == (digest, True)]
    if not todo:
        return 0
    rows = _window_rows(todo, dim)
    cur.execute("DELETE FROM memory_windows WHERE memory_id IN ({})".format(
        ", ".join(str(mid) for mid, _ in todo)))
    if rows:
        cur.executemany("INSERT INTO memory_windows(memory_id, n, embedding) VALUES (?, ?, ?)",
                        rows)
    none = [{"m": mid} for mid, vectors in todo if not len(vectors)]
    if none:
        cur.executemany(NONE_SQL, none)
    return len(todo)


class SQLiteWindows:
    """:class:`~htm_core.store.base.Windows` on SQLite, and the window arm of the search."""

    def __init__(self, db: SQLiteDatabase, reads: SQLiteReads, mirror: VectorMirror) -> None:
        self._db, self._reads, self._mirror = db, reads, mirror
        self._windows: WindowIndex | None = None
        #: The mark the window index was last caught up at, and the dimension it was for.
        self._windows_synced: tuple[Mark, int] | None = None

    def set_windows(self, items: Sequence[tuple[int, str, Sequence[Sequence[float]]]]) -> int:
        if not items:
            return 0
        # Like a large add_many, many windows get a page cache that holds them until the commit.
        big = sum(len(vectors) for _, _, vectors in items) >= _LARGE_BATCH
        with self._db.write(cache_kib=_LARGE_BATCH_CACHE_KIB if big else None) as conn:
            dim = self._db.meta(conn, "embedding_dim")
            cur = conn.connection.cursor()  # raw statements: this runs after every add_many
            try:
                return _write_windows(cur, items, None if dim is None else int(dim))
            finally:
                cur.close()

    def missing_windows(self, *, window_words: int, limit: int
                        ) -> list[tuple[int, str, str, dict[str, Any]]]:
        with self._db.read() as conn:
            rows = conn.execute(text(MISSING_SQL), {"words": window_words, "limit": limit}).all()
        return [(int(r[0]), str(r[1]), str(r[2]), json.loads(r[3]) if r[3] else {}) for r in rows]

    def window_count(self) -> int:
        with self._db.read() as conn:
            return int(conn.execute(text(COUNT_SQL)).scalar() or 0)

    # -- the window arm of the vector search ---------------------------------------

    def _sync_windows(self, dim: int) -> WindowIndex | None:
        """The window index, caught up with the table (None while there are no windows);
        nothing to read while nothing was committed since the last catch-up (the mark)."""
        held = self._reads.held()  # a recall's search: its mark, no cursor to check it
        if held is not None and self._windows_synced == (held, dim):
            return self._windows
        with self._reads.cursor(snapshot=False) as cur:
            mark = self._reads.mark(cur)
            if mark is not None and self._windows_synced == (mark, dim):
                return self._windows
        with self._reads.cursor() as cur:  # one snapshot: the generation, the newest id, new rows
            self._windows_synced = None
            generation, newest = cur.execute(
                "SELECT (SELECT value FROM htm_meta WHERE key = 'window_generation'), "
                "(SELECT coalesce(max(id), 0) FROM memory_windows)").fetchone()
            windows = self._caught_up(cur, dim, int(generation or 0), int(newest))
        self._windows_synced = None if mark is None else (mark, dim)
        return windows

    def _caught_up(self, cur: sqlite3.Cursor, dim: int, generation: int,
                   newest: int) -> WindowIndex | None:
        """:meth:`_sync_windows`'s work once the table's window generation and newest
        window id are read (on ``cur``, in the same snapshot)."""
        index = self._windows
        if index is None or index.generation != generation or index.dim != dim:
            if not newest:
                self._windows = None
                return None
            index = WindowIndex(dim)
            index.generation = generation
        if newest > index.max_id:
            rows = cur.execute("SELECT id, memory_id, embedding FROM memory_windows "
                               "WHERE id > ? AND embedding IS NOT NULL ORDER BY id",
                               (index.max_id,)).fetchall()
            if rows:
                ids, owners, blobs = zip(*rows, strict=True)
                index.add(np.array(ids, dtype=np.int64), np.array(owners, dtype=np.int64),
                          np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(rows), dim))
        self._windows = index
        return index

    def hits(self, vector: Sequence[float], limit: int, filters: SearchFilters, *,
             sync: bool = True) -> list[tuple[int, float]]:
        """Each memory's best window for ``vector`` (top ``limit``), through the memory
        index's filters; ``sync`` catches the window index up with the table first."""
        memories = self._mirror.index
        if memories is None:
            return []
        index = self._sync_windows(memories.dim) if sync else self._windows
        if index is None or index.dim != memories.dim:
            return []
        query = normalise(vector)  # only once there are windows to search
        if query.shape[0] != memories.dim:
            return []
        masks = self._mirror.masks(filters)
        if masks is None:
            return []
        return index.best(query, limit, memories, **masks)
