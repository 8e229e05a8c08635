"""An approximate (HNSW) vector index in front of the exact one, for large embedded stores.

Exact search reads every vector on every query: about 10-15 ms at 100,000 384-d rows on
two cores, over the 5 ms a recall may take. :class:`ApproximateIndex` keeps the exact
rows of :class:`~htm_core.store.vector_index.VectorIndex` (the source of truth for
filters and final scores) and adds a `usearch <https://github.com/unum-cloud/usearch>`_
HNSW graph with int8-quantised vectors as a candidate generator:

- **Small stores stay exact.** Below ``min_rows`` rows (20,000 by default) the graph is
  never built; exact search is already fast there.
- **Kept in step, rebuilt from the store.** On the first search of a large index the
  graph is loaded from its file or built in a background thread from the rows the store
  loaded; until it is ready, and whenever a filter leaves few rows, search is exact.
  Rows added later (by this or another process) are searched exactly as a small "tail"
  and folded into the graph in the background once the tail passes ``fold_rows``. A
  replaced vector (re-embedding) goes back to the tail until folded.
- **Exact re-ranking.** The graph proposes ``max(4 × limit, 64)`` candidates (more when
  a filter passes only a fraction of the rows); they are filtered with the same masks as
  exact search and scored exactly in float32, so scores equal exact search's and recall
  only depends on whether the true neighbors are among the candidates. If too few
  candidates pass the filters, the search falls back to exact.
- **Persisted beside the database.** With a ``path``, the graph is saved there after each
  build or fold: written to a temporary file in the same folder, sealed with a footer
  (magic, length, SHA-256 of the graph), flushed to disk and renamed over the old file; a
  save that fails (a full disk) removes its temporary file and keeps search working, and
  temporary files of killed processes are removed on the next open. On the first search
  the file is memory-mapped after two checks: the footer's checksum *before* usearch
  sees a byte (a damaged graph file could crash usearch's loader), then same dimension,
  keys that belong to this store, and a sample of stored vectors matching the database's.
  A graph that is missing, damaged or fails a check is rebuilt from the database. The
  first fold after loading reads the file into memory to extend it.

``usearch`` is an optional dependency (extra ``ann``); without it the store stays exact.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import math
import mmap
import os
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .vector_index import FloatArray, IntArray, VectorIndex

__all__ = ["ANN_MIN_ROWS", "ApproximateIndex", "ann_available", "make_index"]

logger = logging.getLogger(__name__)

#: Below this many rows, search is exact and no graph is built.
ANN_MIN_ROWS = 20_000
#: Rows outside the graph (searched exactly) before a background fold starts.
FOLD_ROWS = 5_000
_OVERSAMPLE = 4
_MIN_CANDIDATES = 64
_MAX_CANDIDATES = 4_096
_CHUNK = 8_192
_CHECK_SAMPLE = 64
#: The footer sealing a saved graph: magic, the graph's length (8 bytes), its SHA-256.
_MAGIC = b"HTMGRPH1"
_FOOTER = len(_MAGIC) + 8 + 32


def _seal(path: Path) -> None:
    """Append the footer (length and SHA-256 of the file as it is) to ``path``."""
    digest = hashlib.sha256()
    with open(path, "r+b") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
        length = fh.tell()
        fh.write(_MAGIC + length.to_bytes(8, "little") + digest.digest())
        fh.flush()
        os.fsync(fh.fileno())


def _fresh_temporary(path: Path) -> Path:
    """A new, empty, owner-only file beside ``path`` to write its next version into.

    Made with ``O_CREAT | O_EXCL`` under a random name (``<name>.tmp<pid>.<random>``), so a
    file or symlink planted beside the store is never opened, followed or overwritten.
    """
    fd, name = tempfile.mkstemp(prefix=f"{path.name}.tmp{os.getpid()}.", dir=path.parent)
    os.close(fd)
    return Path(name)


def read_sealed(path: Path) -> tuple[mmap.mmap, memoryview] | None:
    """The graph bytes of ``path`` (memory-mapped) if its footer proves them intact.

    Returns None for a missing, empty, truncated, altered or unsealed file: usearch is
    never handed bytes whose checksum did not match.
    """
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size <= _FOOTER:
                return None
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    footer = mapped[size - _FOOTER:]
    length = int.from_bytes(footer[len(_MAGIC):len(_MAGIC) + 8], "little")
    if footer[:len(_MAGIC)] != _MAGIC or length != size - _FOOTER:
        mapped.close()
        return None
    view = memoryview(mapped)[:length]
    if hashlib.sha256(view).digest() != footer[-32:]:
        view.release()
        mapped.close()
        return None
    return mapped, view


def ann_available() -> bool:
    """Whether the ``usearch`` package (extra ``ann``) is importable."""
    try:
        import usearch.index  # noqa: F401
    except ImportError:
        return False
    return True


def make_index(dim: int, *, path: str | Path | None = None, capacity: int = 1024) -> VectorIndex:
    """The vector index a store should use: approximate when ``usearch`` is installed.

    ``path`` is where the graph is persisted (None: never saved, e.g. ``:memory:``).
    """
    if ann_available():
        return ApproximateIndex(dim, capacity, path=path, min_rows=ANN_MIN_ROWS)
    return VectorIndex(dim, capacity)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by another user
        return True
    return True


#: Every index that may run a background build (see :func:`_stop_all_builds`).
_LIVE: weakref.WeakSet[ApproximateIndex] = weakref.WeakSet()


def _stop_all_builds() -> None:
    """At interpreter exit, stop every background build between chunks and wait for it.

    A build runs inside usearch's native code; a daemon thread killed there at exit
    aborts the process, so a script that never closes its ``HTM`` must not exit mid-build.
    """
    for index in list(_LIVE):
        index.close(timeout=120.0)


atexit.register(_stop_all_builds)


class ApproximateIndex(VectorIndex):
    """Exact rows plus an HNSW graph that proposes candidates; see the module docstring.

    Args:
        dim: vector dimension.
        capacity: initial row capacity (grows as needed).
        path: file to persist the graph to and load it from; None keeps it in memory.
        min_rows: build the graph only from this many rows on.
        fold_rows: fold rows outside the graph into it once there are this many.
        background: build and fold in a daemon thread (True) or inline (False: for tests
            and scripts that want a deterministic state).
        connectivity: HNSW ``M``; expansion_add / expansion_search: HNSW ``ef`` values.
    """

    _COLUMNS = (*VectorIndex._COLUMNS, "_in_graph", "_version")

    def __init__(
        self,
        dim: int,
        capacity: int = 1024,
        *,
        path: str | Path | None = None,
        min_rows: int = ANN_MIN_ROWS,
        fold_rows: int = FOLD_ROWS,
        background: bool = True,
        connectivity: int = 16,
        expansion_add: int = 128,
        expansion_search: int = 64,
    ) -> None:
        super().__init__(dim, capacity)
        self._in_graph = np.zeros(capacity, dtype=bool)
        self._version = np.zeros(capacity, dtype=np.int32)
        self._graph_rows = 0
        self._graph: Any = None
        self._graph_is_view = False
        # The memory map a viewed graph reads from; kept exactly as long as that graph.
        self._graph_map: tuple[mmap.mmap, memoryview] | None = None
        self._graph_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._closed = False
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self._remove_stale_temporaries()
        _LIVE.add(self)
        self.min_rows = min_rows
        self.fold_rows = fold_rows
        self.background = background
        self._hnsw = (connectivity, expansion_add, expansion_search)

    # -- state -----------------------------------------------------------------------

    @property
    def graph_rows(self) -> int:
        """How many rows the graph currently answers for (the rest are searched exactly)."""
        return self._graph_rows

    @property
    def building(self) -> bool:
        """Whether a background build or fold is running."""
        return self._worker is not None and self._worker.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a running build or fold; return whether none is running afterwards."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
        return not self.building

    def close(self, timeout: float = 5.0) -> None:
        """Stop background work at the next chunk and drop the graph."""
        self._closed = True
        self.wait(timeout)
        with self._graph_lock:
            self._graph = None
            self._graph_map = None

    def discard(self) -> None:
        """Drop the graph and delete its file (the vectors it holds are obsolete)."""
        self.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    # -- keeping in step -------------------------------------------------------------

    def _replaced(self, row: int) -> None:
        self._version[row] += 1
        if self._in_graph[row]:
            self._in_graph[row] = False
            self._graph_rows -= 1

    def _added(self) -> None:
        # Only folds start here: the first graph is loaded or built on the first search,
        # so a store being opened (rows streamed in chunks) or bulk-filled never starts a
        # build half-way.
        if self._closed or self._graph is None or self.building:
            return
        if self._n - self._graph_rows >= self.fold_rows:
            self._start_build()

    def _start_graph(self) -> None:
        """First search on a large index: load the persisted graph, else build one."""
        if self._closed or self.building or self._n < self.min_rows:
            return
        loaded = self.path is not None and self.path.exists() and self._load_graph()
        if not loaded or self._n - self._graph_rows >= self.fold_rows:
            self._start_build()

    def ensure_graph(self) -> None:
        """Build or fold now (inline) if the index is large enough; for tests and scripts."""
        self.wait()
        with self._lock:
            if self._n < self.min_rows:
                return
            if self._graph is None and self.path is not None and self.path.exists():
                self._load_graph()
        if self._n - self._graph_rows > 0:
            self._build()

    def _start_build(self) -> None:
        if not self.background:
            self._build()
            return
        self._worker = threading.Thread(target=self._build_logged, name="htm-ann-build",
                                        daemon=True)
        self._worker.start()

    def _build_logged(self) -> None:
        try:
            self._build()
        except Exception:  # a failed build leaves exact search working
            logger.exception("building the approximate vector index failed; search stays exact")

    def _new_graph(self) -> Any:
        from usearch.index import Index

        connectivity, expansion_add, expansion_search = self._hnsw
        return Index(ndim=self.dim, metric="cos", dtype="i8", connectivity=connectivity,
                     expansion_add=expansion_add, expansion_search=expansion_search)

    def _build(self) -> None:
        """Add every row outside the graph to it (creating it first if needed)."""
        with self._lock:
            n = self._n
            matrix = self._matrix
            ids = self._ids[:n].copy()
            versions = self._version[:n].copy()
            todo = np.flatnonzero(~self._in_graph[:n])
            graph = self._graph
            from_view = self._graph_is_view
        if todo.size == 0:
            return
        with self._graph_lock:
            fresh = graph is None
            if fresh:
                graph = self._new_graph()
            elif from_view:
                graph, todo = self._writable_copy(ids, todo)
            for begin in range(0, todo.size, _CHUNK):
                if self._closed:
                    return
                rows = todo[begin:begin + _CHUNK]
                keys = ids[rows].astype(np.uint64)
                if not fresh:
                    present = np.asarray(graph.contains(keys), dtype=bool)
                    if present.any():
                        graph.remove(keys[present])
                graph.add(keys, matrix[rows], threads=0)
            with self._lock:
                same = self._version[todo] == versions[todo]
                done = todo[same & ~self._in_graph[todo]]
                self._in_graph[done] = True
                self._graph_rows = int(np.count_nonzero(self._in_graph[: self._n]))
                self._graph = graph
                self._graph_is_view = False
                self._graph_map = None
        logger.info("approximate vector index: %d rows in the graph, %d outside",
                    self._graph_rows, self._n - self._graph_rows)
        self._save(graph)

    def _writable_copy(self, ids: IntArray, todo: IntArray) -> tuple[Any, IntArray]:
        """Load the graph file into memory to extend it (a memory-mapped view is read-only).

        Rows marked as in the graph but missing from the file (another process saved a
        different graph meanwhile) are added to ``todo``.
        """
        from usearch.index import Index

        assert self.path is not None
        sealed = read_sealed(self.path)
        graph = None if sealed is None else Index.restore(bytes(sealed[1]))
        if graph is None:
            return self._new_graph(), np.flatnonzero(np.ones(ids.size, dtype=bool))
        covered = np.flatnonzero(self._in_graph[: ids.size])
        present = np.asarray(graph.contains(ids[covered].astype(np.uint64)), dtype=bool)
        return graph, np.union1d(todo, covered[~present])

    def _save(self, graph: Any) -> None:
        if self.path is None or self._closed:
            return
        tmp: Path | None = None
        try:
            tmp = _fresh_temporary(self.path)
            graph.save(str(tmp))
            os.chmod(tmp, 0o600)  # the graph holds the store's vectors: owner only
            _seal(tmp)
            os.replace(tmp, self.path)
        except Exception as exc:  # a full disk (usearch raises RuntimeError), permissions
            logger.warning("could not save the vector graph to %s: %s; search keeps working "
                           "and the graph is saved again after the next fold", self.path, exc)
            if tmp is not None:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)

    def _remove_stale_temporaries(self) -> None:
        """Remove graph files half-written by processes that no longer run (killed saves)."""
        assert self.path is not None
        with contextlib.suppress(OSError):
            for stale in self.path.parent.glob(self.path.name + ".tmp*"):
                pid = stale.name.rsplit(".tmp", 1)[-1].split(".", 1)[0]
                if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
                    stale.unlink(missing_ok=True)

    def _load_graph(self) -> bool:
        """Load the persisted graph if it matches these rows; mark the rows it covers."""
        from usearch.index import Index

        assert self.path is not None
        sealed = read_sealed(self.path)
        if sealed is None:
            logger.warning("ignoring vector graph %s: it is damaged, truncated or not sealed "
                           "by htm (its checksum does not match); rebuilding it from the "
                           "database", self.path)
            return False
        try:
            # Memory-mapped: pages are read on demand, so a search touches (and keeps
            # resident) only the part of the graph it walks.
            graph = Index.restore(sealed[1], view=True)
        except Exception as exc:  # a foreign file: rebuild
            logger.warning("ignoring vector graph %s: %s", self.path, exc)
            return False
        if graph is None or graph.ndim != self.dim:
            logger.warning("ignoring vector graph %s: wrong dimension", self.path)
            return False
        keys = np.asarray(graph.keys, dtype=np.int64)
        rows = self.rows_of(keys)
        known = rows[rows >= 0]
        if known.size < 0.9 * keys.size:
            logger.warning("ignoring vector graph %s: it belongs to other rows", self.path)
            return False
        sample = known[:: max(1, known.size // _CHECK_SAMPLE)][:_CHECK_SAMPLE]
        stored = np.asarray(graph.get(self._ids[sample].astype(np.uint64)), dtype=np.float32)
        stored /= np.maximum(np.linalg.norm(stored, axis=1, keepdims=True), 1e-12)
        agreement = np.einsum("ij,ij->i", stored, self._matrix[sample])
        if sample.size and float(agreement.min()) < 0.98:
            logger.warning("ignoring vector graph %s: its vectors differ from the store's "
                           "(re-embedded?); rebuilding", self.path)
            return False
        with self._graph_lock:
            self._in_graph[known] = True
            self._graph_rows = int(self._in_graph[: self._n].sum())
            self._graph = graph
            self._graph_is_view = True
            self._graph_map = sealed
        logger.info("loaded vector graph %s (%d rows)", self.path, self._graph_rows)
        return True

    # -- searching -------------------------------------------------------------------

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
        """Top ``limit`` (id, cosine) among live rows passing the filters, best first.

        Same contract as :meth:`VectorIndex.search`; approximate only in which rows are
        considered when the graph is in use.
        """
        # Lock order: the row lock, then the graph lock without waiting (a running build
        # or fold holds it, and search is exact meanwhile), so the two never deadlock.
        with self._lock:
            if self._graph is None:
                self._start_graph()
            if self._graph is None or self._n < self.min_rows \
                    or not self._graph_lock.acquire(blocking=False):
                return super().search(query, limit, start=start, end=end, robot=robot,
                                      allowed_ids=allowed_ids)
            try:
                return self._approximate(query, limit, self._mask(
                    self._n, start, end, robot, allowed_ids))
            finally:
                self._graph_lock.release()

    def _approximate(self, query: FloatArray, limit: int, mask: npt.NDArray[np.bool_]
                     ) -> list[tuple[int, float]]:
        n = mask.shape[0]
        passing = int(np.count_nonzero(mask))
        if passing == 0:
            return []
        want = max(limit * _OVERSAMPLE, _MIN_CANDIDATES) * n / passing
        if passing <= self.min_rows or want > _MAX_CANDIDATES:
            return self._top(np.flatnonzero(mask), query, limit, n)
        found = self._graph.search(query, min(math.ceil(want), len(self._graph)))
        rows = self.rows_of(np.asarray(found.keys, dtype=np.int64))
        rows = rows[(rows >= 0) & (rows < n)]
        rows = rows[self._in_graph[rows] & mask[rows]]
        outside = n - self._graph_rows
        if outside:
            tail = np.flatnonzero(mask & ~self._in_graph[:n])
            in_graph_passing = passing - tail.size
            rows = np.concatenate([rows, tail])
        else:
            in_graph_passing = passing
        if rows.size - (passing - in_graph_passing) < min(limit, in_graph_passing):
            return self._top(np.flatnonzero(mask), query, limit, n)
        return self._top(rows, query, limit, n)
