"""An in-process exact vector index over float32 rows, with per-row filter columns.

Used by the SQLite store, which cannot load a vector extension here. Rows are kept
L2-normalised so a dot product is the cosine similarity. Timeframe and robot filters are
vectorised masks over parallel columns; an id allow-list (tags) is applied as a mask too,
so filters are part of the search, never a post-filter.

Large stores put an approximate (HNSW) graph in front of this exact index: see
:class:`~htm_core.store.ann.ApproximateIndex`, which subclasses it and keeps these rows as
the source of truth for filtering and for the final exact scores.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from ..errors import DimensionMismatchError

__all__ = ["VectorIndex", "finite_unit", "normalise", "not_finite", "unit_rows"]

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


def normalise(vector: Sequence[float] | FloatArray) -> FloatArray:
    """Float32 copy of ``vector`` scaled to unit length (zero vectors stay zero).

    A value beyond float32's range becomes infinity, which the stores refuse.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # inf / inf is refused by the stores
        arr = np.asarray(vector, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(arr))
        if norm == np.inf and np.isfinite(arr).all():
            unit: FloatArray = wide_units(arr.reshape(1, -1), np.array([norm]))[1][0]
            return unit
        return arr / norm if norm > 0 else arr


def finite_unit(vector: Sequence[float] | FloatArray, what: str) -> FloatArray:
    """``normalise(vector)``, refused with :class:`DimensionMismatchError` naming it by
    ``what`` unless every value is finite."""
    unit = normalise(vector)
    if not np.isfinite(unit).all():
        raise not_finite(what)
    return unit


def unit_rows(vectors: Sequence[Sequence[float]], name: Callable[[int], str]) -> FloatArray:
    """``vectors`` (one dimension) as float32 rows scaled to unit length, at once.

    Zero rows stay zero. A row holding NaN or infinity, or a value beyond float32's range,
    is refused with :class:`DimensionMismatchError` naming it by ``name(row)`` (numpy warns
    of none of it).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # a row with inf is refused below
        matrix: FloatArray = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        rows, wide = wide_units(matrix, norms)
        np.divide(matrix, norms, out=matrix, where=norms > 0)
    matrix[rows] = wide
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        raise not_finite(f"embedding for {name(int(np.argmin(finite)))}")
    return matrix


def not_finite(what: str) -> DimensionMismatchError:
    """The error for a vector a store cannot hold: ``what`` names it."""
    return DimensionMismatchError(f"{what} contains NaN or infinity (or a value beyond "
                                  "float32's range)")


def wide_units(matrix: FloatArray, norms: FloatArray) -> tuple[IntArray, FloatArray]:
    """The rows of ``matrix`` whose float32 length in ``norms`` overflowed to infinity
    though every component is finite, and those rows scaled to unit length.

    Components above about 1.8e19 square past float32's range, so such a row divided by
    its float32 length would become zeros; its length is worked out in float64 instead.
    Every other row is left to the caller, whose float32 division stays as it was.
    """
    rows = np.flatnonzero(np.isinf(norms.reshape(-1)))
    if rows.size:
        rows = rows[np.isfinite(matrix[rows]).all(axis=1)]
    wide = matrix[rows].astype(np.float64)
    if rows.size:
        wide /= np.linalg.norm(wide, axis=1, keepdims=True)
    return rows, wide.astype(np.float32)


class VectorIndex:
    """Exact top-k cosine search over rows that can be added, hidden and shown again.

    >>> index = VectorIndex(2)
    >>> index.add([(1, normalise([1.0, 0.0]), 0.0, 1), (2, normalise([0.0, 1.0]), 0.0, 1)])
    >>> index.search(normalise([0.9, 0.1]), 1)[0][0]
    1
    """

    #: Per-row columns, grown together (subclasses add their own).
    _COLUMNS: tuple[str, ...] = ("_matrix", "_ids", "_created", "_robot", "_alive")

    def __init__(self, dim: int, capacity: int = 1024) -> None:
        self.dim = dim
        self._lock = threading.RLock()
        self._n = 0
        self._matrix = np.zeros((capacity, dim), dtype=np.float32)
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._created = np.zeros(capacity, dtype=np.float64)
        self._robot = np.zeros(capacity, dtype=np.int64)
        self._alive = np.zeros(capacity, dtype=bool)
        # Rows whose ids ascend from row 0 (the usual case: ids are assigned in order and
        # loaded in order) are found by binary search over ``_ids``; only the others go in
        # ``_row_of``. A dict entry per row would cost ~100 bytes, 10 MB per 100,000 rows.
        self._ascending = 0
        self._row_of: dict[int, int] = {}
        self.max_id = 0
        # Running sum of rows [0, _summed) for centroid(); a replaced row resets it.
        self._sum = np.zeros(dim, dtype=np.float64)
        self._summed = 0
        #: centroid()'s answer while the running sum has not changed since (every recall
        #: asks for it).
        self._centroid: FloatArray | None = None
        self._centroid_values: tuple[FloatArray | None, list[float]] | None = None

    def __len__(self) -> int:
        return int(self._alive[: self._n].sum())

    def _grow(self, need: int) -> None:
        cap = len(self._ids)
        if need <= cap:
            return
        new_cap = max(need, cap * 2)
        for name in self._COLUMNS:
            old = getattr(self, name)
            shape = (new_cap, self.dim) if old.ndim == 2 else (new_cap,)
            fresh = np.zeros(shape, dtype=old.dtype)
            fresh[: self._n] = old[: self._n]
            setattr(self, name, fresh)

    def _row(self, mid: int) -> int | None:
        """The row of id ``mid``, or None."""
        asc = self._ascending
        if asc and mid <= self._ids[asc - 1]:
            pos = int(np.searchsorted(self._ids[:asc], mid))
            if self._ids[pos] == mid:
                return pos
        return self._row_of.get(mid)

    def _place(self, mid: int, row: int) -> None:
        """Record that id ``mid`` lives in the new row ``row``."""
        if row == self._ascending and not self._row_of and (row == 0 or mid > self._ids[row - 1]):
            self._ascending += 1
        else:
            self._row_of[mid] = row

    def _rows_checked(self, mid: int) -> int:
        row = self._row(mid)
        assert row is not None
        return row

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` more rows at once (a bulk load then never re-copies)."""
        with self._lock:
            self._grow(self._n + max(0, rows))

    def rows_of(self, ids: IntArray) -> IntArray:
        """Row of each id (-1 for unknown ids), vectorised."""
        with self._lock:
            n = self._n
            if n == 0 or ids.size == 0:
                return np.full(ids.shape, -1, dtype=np.int64)
            out = np.full(ids.shape, -1, dtype=np.int64)
            asc = self._ascending
            if asc:
                pos = np.minimum(np.searchsorted(self._ids[:asc], ids), asc - 1)
                hit = self._ids[pos] == ids
                out[hit] = pos[hit]
            if self._row_of:
                for i in np.flatnonzero(out < 0):
                    out[i] = self._row_of.get(int(ids[i]), -1)
            return out

    def _replaced(self, row: int) -> None:
        """Hook: row ``row`` got a new vector (subclasses track stale copies)."""

    def centroid(self) -> FloatArray | None:
        """The unit-length mean of every stored vector (forgotten ones too), or None if empty.

        Kept as a running sum, so a call after adds costs only the new rows.
        """
        with self._lock:
            if self._summed == 0:
                self._sum[:] = 0.0
                self._centroid = None
            if self._summed < self._n:
                self._sum += self._matrix[self._summed:self._n].sum(axis=0, dtype=np.float64)
                self._summed = self._n
                self._centroid = None
            if self._centroid is None:
                norm = float(np.linalg.norm(self._sum))
                if self._n == 0 or norm == 0.0:
                    return None
                self._centroid = (self._sum / norm).astype(np.float32)
            return self._centroid.copy()

    def centroid_list(self) -> list[float] | None:
        """:meth:`centroid` as a list of floats (a fresh list; converted once per centroid)."""
        with self._lock:
            centroid = self.centroid()
            if centroid is None:
                return None
            memo = self._centroid_values
            if memo is None or memo[0] is not self._centroid:
                memo = self._centroid_values = (self._centroid, centroid.tolist())
            return list(memo[1])

    def _added(self) -> None:
        """Hook: rows were added (subclasses may schedule work)."""

    def add(self, rows: Iterable[tuple[int, FloatArray, float, int]]) -> None:
        """Add or replace rows of (id, unit vector, created_at timestamp, robot id)."""
        with self._lock:
            for mid, vec, created, robot in rows:
                row = self._row(mid)
                if row is None:
                    self._grow(self._n + 1)
                    row = self._n
                    self._n += 1
                    self._place(mid, row)
                    self._ids[row] = mid
                else:
                    self._replaced(row)
                    if row < self._summed:
                        self._summed = 0  # the running sum holds the old vector
                self._matrix[row] = vec
                self._created[row] = created
                self._robot[row] = robot
                self._alive[row] = True
                self.max_id = max(self.max_id, mid)
            self._added()

    def add_arrays(self, ids: IntArray, vectors: FloatArray, created: npt.NDArray[np.float64],
                   robots: IntArray, alive: npt.NDArray[np.bool_] | None = None) -> None:
        """Append many rows at once (vectorised); ids already present are replaced.

        ``vectors`` must already be unit length (as stored). ``alive`` defaults to all
        True; pass False for rows that are forgotten.
        """
        with self._lock:
            count = len(ids)
            if count == 0:
                return
            # The usual case: rows newer than any seen, no lookups needed.
            fresh = np.ones(count, dtype=bool) if int(ids.min()) > self.max_id \
                else self.rows_of(ids) < 0
            if not fresh.all():
                keep = ~fresh
                self.add((int(i), v, float(c), int(r)) for i, v, c, r in
                         zip(ids[keep], vectors[keep], created[keep], robots[keep], strict=True))
                if alive is not None:
                    for i in ids[keep][~alive[keep]]:
                        self._alive[self._rows_checked(int(i))] = False
                ids, vectors, created, robots = ids[fresh], vectors[fresh], created[fresh], robots[fresh]
                alive = None if alive is None else alive[fresh]
                count = len(ids)
                if count == 0:
                    return
            start = self._n
            self._grow(start + count)
            stop = start + count
            self._matrix[start:stop] = vectors
            self._ids[start:stop] = ids
            self._created[start:stop] = created
            self._robot[start:stop] = robots
            self._alive[start:stop] = True if alive is None else alive
            if (start == self._ascending and not self._row_of and bool(np.all(ids[1:] > ids[:-1]))
                    and (start == 0 or int(ids[0]) > int(self._ids[start - 1]))):
                self._ascending = stop
            else:
                self._row_of.update(zip(ids.tolist(), range(start, stop), strict=True))
            self._n = stop
            self.max_id = max(self.max_id, int(ids.max()))
            self._added()

    def set_alive(self, mid: int, alive: bool) -> None:
        """Hide (forget) or show (restore) a row; unknown ids are ignored."""
        with self._lock:
            row = self._row(mid)
            if row is not None:
                self._alive[row] = alive

    def remove(self, mid: int) -> None:
        """Hide a row for good (purge); its slot is not reused."""
        self.set_alive(mid, False)

    def _mask(
        self,
        n: int,
        start: float | None,
        end: float | None,
        robot: int | None,
        allowed_ids: IntArray | None,
    ) -> npt.NDArray[np.bool_]:
        """Rows (of the first ``n``) that are alive and pass the filters. May be a view."""
        mask = self._alive[:n]
        if start is None and end is None and robot is None and allowed_ids is None:
            return mask
        mask = mask.copy()
        if start is not None:
            mask &= self._created[:n] >= start
        if end is not None:
            mask &= self._created[:n] < end
        if robot is not None:
            mask &= self._robot[:n] == robot
        if allowed_ids is not None:
            mask &= np.isin(self._ids[:n], allowed_ids)
        return mask

    def passing(self, ids: IntArray, *, start: float | None, end: float | None,
                robot: int | None, allowed_ids: IntArray | None) -> npt.NDArray[np.bool_]:
        """Which of ``ids`` are alive memories of this index that pass the filters of
        :meth:`search`, read at one instant (false for ids the index does not hold)."""
        with self._lock:
            mask = self._mask(self._n, start, end, robot, allowed_ids)
            rows = self.rows_of(ids)
        known = rows >= 0
        out = np.zeros(ids.shape, dtype=bool)
        out[known] = mask[rows[known]]
        return out

    def _top(self, rows: IntArray | None, query: FloatArray, limit: int, n: int
             ) -> list[tuple[int, float]]:
        """Exact top ``limit`` among ``rows`` (all first ``n`` rows when None), best first.

        Ties in score are broken by the smaller id, so results are deterministic.
        """
        # einsum rather than ``@``: a matrix-vector product this size makes OpenBLAS wake
        # its worker threads, which costs milliseconds when the cores are busy; einsum
        # runs the same SIMD loop on this thread, with steady latency.
        if rows is None:
            scores = np.einsum("ij,j->i", self._matrix[:n], query)
            ids = self._ids[:n]
        else:
            if rows.size == 0:
                return []
            if rows.size * 4 >= n:
                # Most of the rows (an exact search of a large store that has forgotten
                # memories, or at the graph's threshold): scoring every row in place costs
                # a quarter of copying these rows out first, and gives the same scores.
                scores = np.einsum("ij,j->i", self._matrix[:n], query)[rows]
            else:
                scores = np.einsum("ij,j->i", self._matrix[rows], query)
            ids = self._ids[rows]
        k = min(limit, scores.shape[0])
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
        order = top[np.lexsort((ids[top], -scores[top]))]
        # tolist: the same Python ints and floats as int() and float() of each element.
        return list(zip(ids[order].tolist(), scores[order].tolist(), strict=True))

    def search(
        self,
        query: FloatArray,
        limit: int,
        *,
        start: float | None = None,
        end: float | None = None,
        robot: int | None = None,
        allowed_ids: IntArray | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (id, cosine) among live rows passing the filters, best first."""
        with self._lock:
            n = self._n
            if n == 0:
                return []
            mask = self._mask(n, start, end, robot, allowed_ids)
            rows = None if mask.all() else np.flatnonzero(mask)
            return self._top(rows, query, limit, n)
