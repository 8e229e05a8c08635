"""SQLite's in-process vector index, kept beside the ``memories`` table (:class:`VectorMirror`).

The index (:class:`~htm_core.store.vector_index.VectorIndex`, an HNSW graph in front of it
in large stores: :class:`~htm_core.store.ann.ApproximateIndex`) is built on open and kept
in step with adds, forgets, restores, purges and updates. Vector changes on rows the index
has already seen (vectors filled in later, forget, restore, purge) bump
``vector_generation`` in ``htm_meta``; an index that sees another writer's bump reloads
before it searches, and rows other writers added are pulled in.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...clock import to_timestamp
from ...models import Memory
from .._sql.dialect import SQLITE
from .._sql.filters import filter_sql
from .._sql.parts import RowListener
from ..ann import ApproximateIndex, make_index
from ..base import SearchFilters
from ..vector_index import VectorIndex, normalise
from .engine import SQLiteDatabase
from .reads import Mark, SQLiteReads

__all__ = ["NewVectors", "VectorMirror"]


class NewVectors(NamedTuple):
    """A batch's new rows with a vector, as the in-process index takes them (ids ascending)."""

    ids: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]
    created: npt.NDArray[np.float64]
    robots: npt.NDArray[np.int64]


class VectorMirror(RowListener):
    """The vector index of one store, following the table (a ``RowListener``)."""

    def __init__(self, db: SQLiteDatabase, reads: SQLiteReads) -> None:
        self._db, self._reads = db, reads
        self.index: VectorIndex | None = None
        #: The ``vector_generation`` this process last saw, and whether another writer
        #: changed vectors since (the index then reloads before it searches).
        self._seen_generation = 0
        self.stale = False
        #: The mark the index was last caught up at, and that index.
        self._synced: tuple[Mark, VectorIndex] | None = None
        db.keep_state(self)

    # -- what a write that does not commit puts back ---------------------------------

    def saved(self) -> object:
        return self._seen_generation, self.stale

    def restore(self, saved: object) -> None:
        self._seen_generation, self.stale = cast("tuple[int, bool]", saved)

    # -- following the table ---------------------------------------------------------

    def bump_generation(self, conn: Connection) -> None:
        """Inside a write that changes vectors of rows the index may have seen."""
        old = int(self._db.meta(conn, "vector_generation") or 0)
        if old != self._seen_generation:
            self.stale = True  # another writer changed vectors since we last looked
        self._db.set_meta(conn, "vector_generation", str(old + 1))
        self._seen_generation = old + 1

    def load(self) -> None:
        with self._db.read() as conn:
            dim = self._db.meta(conn, "embedding_dim")
            generation = int(self._db.meta(conn, "vector_generation") or 0)
        if isinstance(self.index, ApproximateIndex):
            self.index.close()
        self._seen_generation, self.stale = generation, False
        if dim is None:
            self.index = None
            return
        self.index = self._new_index(int(dim))
        self._pull_new_rows()

    def _new_index(self, dim: int) -> VectorIndex:
        path = None
        if not self._db.memory_db:
            db_file = self._db.raw_url.split("///", 1)[-1].split("?", 1)[0]
            path = Path(db_file + "-vectors.usearch") if db_file else None
        return make_index(dim, path=path)

    def sync(self) -> None:
        """Catch up with other writers: reload after their vector changes, else pull new rows.
        Nothing to read while nothing was committed since the last catch-up (the mark)."""
        index = self.index
        if index is None:
            return
        held = self._reads.held()  # a recall's search: its mark, no cursor to check it
        if held is not None and self._synced == (held, index) and not self.stale:
            return
        with self._reads.cursor(snapshot=False) as cur:  # this runs before every search
            mark = self._reads.mark(cur)
            if mark is not None and self._synced == (mark, index) and not self.stale:
                return
            generation, newest = cur.execute(
                "SELECT (SELECT value FROM htm_meta WHERE key = 'vector_generation'), "
                "(SELECT coalesce(max(id), 0) FROM memories)").fetchone()
        if int(generation or 0) != self._seen_generation or self.stale:
            self.load()
        elif int(newest) > index.max_id:
            self._pull_new_rows()
        self._synced = None if mark is None or self.index is None else (mark, self.index)

    def _pull_new_rows(self, *, below: int | None = None) -> None:
        """Add rows written since the index last saw the table (only ids under ``below``).

        Rows are streamed in chunks straight into the index's arrays, so opening a large
        store never holds every row as a Python object.
        """
        index = self.index
        if index is None:
            return
        dim = index.dim
        width = dim * 4
        with self._db.read() as conn:
            # The raw cursor: at 100,000 rows SQLAlchemy's row objects cost more than the read.
            cur = conn.connection.cursor()
            try:
                cur.arraysize = 2048  # small chunks: little heap left behind after the load
                newest = cur.execute("SELECT max(id) FROM memories").fetchone()[0]
                upto = int(newest or 0) if below is None else min(int(newest or 0), below - 1)
                # Allocate once, not by doubling, with a quarter to spare: otherwise the first
                # add after opening a large store copies every vector to grow the matrix
                # (0.6 s at 100k). Spare rows are zero pages never touched: not resident.
                backlog = upto - index.max_id
                index.reserve(backlog + backlog // 4)
                cur.execute("SELECT id, embedding, created_at, robot_id, forgotten_at FROM memories "
                            "WHERE id > ? AND id <= ? AND embedding IS NOT NULL ORDER BY id",
                            (index.max_id, upto))
                while part := cur.fetchmany():
                    ids, blobs, created, robots, forgotten = zip(*part, strict=True)
                    if any(len(b) != width for b in blobs):
                        blobs = tuple(bytes(b[:width]) for b in blobs)
                    index.add_arrays(
                        np.array(ids, dtype=np.int64),
                        np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(part), dim),
                        np.array(created, dtype=np.float64),
                        np.array(robots, dtype=np.int64),
                        np.array([f is None for f in forgotten], dtype=bool),
                    )
            finally:
                cur.close()

    def masks(self, filters: SearchFilters) -> dict[str, Any] | None:
        """``filters`` as the in-process index's mask arguments (time, robot id, allowed
        ids); None when the robot is unknown, so nothing can match."""
        robot_id = None
        if filters.robot is not None:
            robot_id = self._db.known_robot_id(filters.robot)
            if robot_id is None:
                return None
        allowed = None
        if filters.tags or filters.provenance:
            params: dict[str, Any] = {}
            where = filter_sql(SQLITE, SearchFilters(
                tags=filters.tags, kinds=filters.kinds, sources=filters.sources,
                min_confidence=filters.min_confidence), params)
            with self._db.read() as conn:
                ids = [r[0] for r in conn.execute(text(f"SELECT m.id FROM memories m WHERE {where}"),
                                                  params)]
            allowed = np.asarray(ids, dtype=np.int64)
        return {"start": to_timestamp(filters.start) if filters.start else None,
                "end": to_timestamp(filters.end) if filters.end else None,
                "robot": robot_id, "allowed_ids": allowed}

    def add_new(self, rows: NewVectors | None) -> None:
        """After the commit of an add: its new rows with a vector."""
        if rows is None:
            return
        if self.index is None:
            self.index = self._new_index(rows.vectors.shape[1])
        # Rows other writers committed before ours sit between the index's newest id and ours:
        # take them first, or the index's high-water mark would skip them for good.
        self._pull_new_rows(below=int(rows.ids[0]))
        self.index.add_arrays(rows.ids, rows.vectors, rows.created, rows.robots)

    def set_vectors(self, units: Sequence[tuple[int, npt.NDArray[np.float32]]],
                    rows: dict[int, tuple[float, int, float | None]]) -> None:
        """After the commit of ``set_embeddings``: the unit vectors of ``units`` whose rows
        (id -> created at, robot id, forgotten at) were there."""
        if self.index is None:
            self.index = self._new_index(len(units[0][1]))
        self.index.add([(mid, u, rows[mid][0], rows[mid][1]) for mid, u in units if mid in rows])
        for mid, _u in units:
            if mid in rows and rows[mid][2] is not None:
                self.index.set_alive(mid, False)

    def set_alive(self, ids: Sequence[int], alive: bool) -> None:
        """After the commit of a write that hid (or showed) ``ids``."""
        if self.index is not None:
            for mid in ids:
                self.index.set_alive(mid, alive)

    def discard(self) -> None:
        """After the commit of ``reset_embeddings``: no vectors are left."""
        if isinstance(self.index, ApproximateIndex):
            self.index.discard()
        self.index = None

    def centroid(self) -> list[float] | None:
        """The mean of the vectors (no catch-up with other writers: an estimate is fine)."""
        if self.index is None:
            self.load()
        return self.index.centroid_list() if self.index is not None else None

    def close(self) -> None:
        if isinstance(self.index, ApproximateIndex):
            self.index.close()
        self.index = None

    # -- a RowListener of the shared roles -------------------------------------------

    def visibility_changed(self, conn: Connection) -> None:
        self.bump_generation(conn)

    def after_visibility(self, memory_id: int, *, alive: bool) -> None:
        if self.index is not None:
            self.index.set_alive(memory_id, alive)

    def after_purge(self, ids: Sequence[int]) -> None:
        if self.index is not None:
            for mid in ids:
                self.index.remove(mid)

    def after_update(self, memory: Memory, vector: Sequence[float] | None,
                     text_changed: bool) -> None:
        """The index follows the new text (the generation was bumped in the transaction,
        so other processes' indexes reload)."""
        if self.index is None or not text_changed:
            return
        if vector is None:
            self.index.remove(memory.id)
            return
        robot = self._db.known_robot_id(memory.robot)
        self.index.add([(memory.id, normalise(vector), to_timestamp(memory.created_at),
                         robot if robot is not None else 0)])
