"""An in-process exact vector index over float32 rows, with per-row filter columns.

Used by the SQLite store, which cannot load a vector extension here. Rows are kept
L2-normalised so a dot product is the cosine similarity. Timeframe and robot filters are
vectorised masks over parallel columns; an id allow-list (tags) is applied as a mask too,
so filters are part of the search, never a post-filter.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["VectorIndex", "normalise"]

FloatArray = npt.NDArray[np.float32]


def normalise(vector: Sequence[float] | FloatArray) -> FloatArray:
    """Float32 copy of ``vector`` scaled to unit length (zero vectors stay zero)."""
    arr = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(arr))
    return arr / norm if norm > 0 else arr


class VectorIndex:
    """Exact top-k cosine search over rows that can be added, hidden and shown again."""

    def __init__(self, dim: int, capacity: int = 1024) -> None:
        self.dim = dim
        self._lock = threading.RLock()
        self._n = 0
        self._matrix = np.zeros((capacity, dim), dtype=np.float32)
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._created = np.zeros(capacity, dtype=np.float64)
        self._robot = np.zeros(capacity, dtype=np.int64)
        self._alive = np.zeros(capacity, dtype=bool)
        self._row_of: dict[int, int] = {}
        self.max_id = 0

    def __len__(self) -> int:
        return int(self._alive[: self._n].sum())

    def _grow(self, need: int) -> None:
        cap = len(self._ids)
        if need <= cap:
            return
        new_cap = max(need, cap * 2)
        for name in ("_matrix", "_ids", "_created", "_robot", "_alive"):
            old = getattr(self, name)
            shape = (new_cap, self.dim) if old.ndim == 2 else (new_cap,)
            fresh = np.zeros(shape, dtype=old.dtype)
            fresh[: self._n] = old[: self._n]
            setattr(self, name, fresh)

    def add(self, rows: Iterable[tuple[int, FloatArray, float, int]]) -> None:
        """Add or replace rows of (id, unit vector, created_at timestamp, robot id)."""
        with self._lock:
            for mid, vec, created, robot in rows:
                row = self._row_of.get(mid)
                if row is None:
                    self._grow(self._n + 1)
                    row = self._n
                    self._n += 1
                    self._row_of[mid] = row
                    self._ids[row] = mid
                self._matrix[row] = vec
                self._created[row] = created
                self._robot[row] = robot
                self._alive[row] = True
                self.max_id = max(self.max_id, mid)

    def set_alive(self, mid: int, alive: bool) -> None:
        """Hide (forget) or show (restore) a row; unknown ids are ignored."""
        with self._lock:
            row = self._row_of.get(mid)
            if row is not None:
                self._alive[row] = alive

    def remove(self, mid: int) -> None:
        """Hide a row for good (purge); its slot is not reused."""
        self.set_alive(mid, False)

    def search(
        self,
        query: FloatArray,
        limit: int,
        *,
        start: float | None = None,
        end: float | None = None,
        robot: int | None = None,
        allowed_ids: npt.NDArray[np.int64] | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (id, cosine) among live rows passing the filters, best first."""
        with self._lock:
            n = self._n
            if n == 0:
                return []
            mask = self._alive[:n].copy()
            if start is not None:
                mask &= self._created[:n] >= start
            if end is not None:
                mask &= self._created[:n] < end
            if robot is not None:
                mask &= self._robot[:n] == robot
            if allowed_ids is not None:
                mask &= np.isin(self._ids[:n], allowed_ids)
            if mask.all():
                scores = self._matrix[:n] @ query
                ids = self._ids[:n]
            else:
                rows = np.flatnonzero(mask)
                if rows.size == 0:
                    return []
                scores = self._matrix[rows] @ query
                ids = self._ids[rows]
        k = min(limit, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
        order = top[np.lexsort((ids[top], -scores[top]))]
        return [(int(ids[i]), float(scores[i])) for i in order]
