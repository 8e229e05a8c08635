"""The in-process index of window vectors (SQLite), filtered through their memories' rows.

Each row is one window of a long memory (:class:`~htm_core.store.base.Windows`): its unit
vector and its memory's id. It keeps no filter columns of its own: a search takes the
memory index's mask (alive, time, robot, tag allow-list) and looks up each window's
memory row in it, so a window is visible exactly when its memory is, under the same
filters. Exact search (numpy); windows exist only for long memories.
"""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt

from .vector_index import VectorIndex

__all__ = ["WindowIndex"]

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


def _dots(matrix: FloatArray, query: FloatArray) -> FloatArray:
    """Each row's dot product with ``query``, in this thread: ``@`` would make OpenBLAS
    wake its worker threads (milliseconds when the cores are busy); numpy 2's ``vecdot``
    loops over the rows in C, einsum (numpy 1) likewise, a little slower."""
    vecdot = getattr(np, "vecdot", None)
    if vecdot is not None:
        out: FloatArray = vecdot(matrix, query)
        return out
    scores: FloatArray = np.einsum("ij,j->i", matrix, query)
    return scores


class WindowIndex:
    """Window vectors by owner memory id; best window per memory, through a memory index.

    >>> from htm_core.store.vector_index import normalise
    >>> memories = VectorIndex(2)
    >>> memories.add([(7, normalise([1.0, 0.0]), 0.0, 1)])
    >>> windows = WindowIndex(2)
    >>> windows.add(np.array([1]), np.array([7]), np.array([normalise([0.0, 1.0])]))
    >>> windows.best(normalise([0.0, 1.0]), 5, memories, start=None, end=None, robot=None,
    ...              allowed_ids=None)
    [(7, 1.0)]
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._owners = np.zeros(0, dtype=np.int64)
        #: The newest window row id held (rows are pulled from the table in id order).
        self.max_id = 0
        #: The table's window generation this index was loaded at.
        self.generation = -1
        #: The windows grouped by memory (see :meth:`_grouped`), made again after an add.
        self._groups: tuple[IntArray, IntArray, IntArray] | None = None

    def __len__(self) -> int:
        return int(self._owners.shape[0])

    def add(self, ids: IntArray, owners: IntArray, vectors: FloatArray) -> None:
        """Append windows ``ids`` (ascending, newer than :attr:`max_id`) of ``owners``."""
        if ids.size == 0:
            return
        with self._lock:
            self._matrix = np.concatenate([self._matrix, vectors.astype(np.float32)])
            self._owners = np.concatenate([self._owners, owners.astype(np.int64)])
            self.max_id = max(self.max_id, int(ids.max()))
            self._groups = None

    def _grouped(self) -> tuple[FloatArray, IntArray, IntArray, IntArray]:
        """The matrix, and the windows by memory: the rows in owner order, where each
        memory's run starts in it, and the memory ids (ascending)."""
        with self._lock:
            if self._groups is None:
                order = np.argsort(self._owners, kind="stable")
                owners = self._owners[order]
                starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]]
                                        if owners.size else owners)
                self._groups = (order, starts, owners[starts])
            return (self._matrix, *self._groups)

    def best(self, query: FloatArray, limit: int, memories: VectorIndex, *,
             start: float | None, end: float | None, robot: int | None,
             allowed_ids: IntArray | None) -> list[tuple[int, float]]:
        """Top ``limit`` (memory id, best window cosine) among windows whose memory is in
        ``memories``, alive and passing the filters; best first, ties by smaller id."""
        matrix, order, starts, ids = self._grouped()
        if ids.size == 0 or limit <= 0:
            return []
        picked = np.flatnonzero(memories.passing(ids, start=start, end=end, robot=robot,
                                                 allowed_ids=allowed_ids))
        if picked.size == 0:
            return []
        scores = _dots(matrix, np.asarray(query, dtype=np.float32))
        best = np.maximum.reduceat(scores[order], starts)[picked]
        ids = ids[picked]
        top = np.lexsort((ids, -best))[:limit]
        return [(int(ids[i]), float(best[i])) for i in top]
