"""SQLiteStore: opening a store (schema gate, FTS trigger, vector index) and bulk loads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import (
    StoreError,
)
from .._common import mask_url
from .._sql.schema import needs_migration
from ..ann import ApproximateIndex
from ..vector_index import VectorIndex
from ._engine import logger, sqlite_url
from ._windows import _SQLiteWindows


class SQLiteStore(_SQLiteWindows):
    """The embedded default backend. See the module docstring for how it works.

    Args:
        database: a file path, ``":memory:"``, an ``sqlite:///`` URL, or None for the
            default file under the user data directory.
        busy_timeout_ms: how long a writer waits for another process's write lock.
        migrate: create or upgrade the schema on open (the default for SQLite).
        read_only: open for reading only: recall, retrieve, context and export work,
            access statistics and working-memory membership are not saved (one warning),
            every write raises :class:`~htm_core.errors.ReadOnlyError`. A file that cannot
            be written (read-only file or medium, a full disk) is opened this way anyway,
            with a warning.
    """

    backend = "sqlite"
    def __init__(
        self,
        database: str | Path | None = None,
        *,
        busy_timeout_ms: int = 10_000,
        migrate: bool = True,
        read_only: bool = False,
    ) -> None:
        self._url = sqlite_url(database)
        self.url = mask_url(self._url)
        self._memory_db = self._url in ("sqlite://", "sqlite:///:memory:")
        self._busy_timeout_ms = busy_timeout_ms
        self._lock = threading.RLock()
        self._robot_ids: dict[str, int] = {}
        self._index: VectorIndex | None = None
        # Vector changes on rows the index has already seen (vectors filled in later,
        # forget, restore, purge) bump ``vector_generation`` in htm_meta; an index that
        # sees another writer's bump reloads before it searches.
        self._seen_generation = 0
        self._index_stale = False
        self._fts_batched = False  # set on open: see _gate_fts_trigger
        self._bulk_depth = 0  # nesting of bulk_load() blocks
        version = self._open_version(read_only)
        writable = self._read_only is None
        if needs_migration(self.url, version, migrate=migrate and writable):
            self.migrate()
        self._fts_batched = self._gate_fts_trigger(upgrade=migrate and writable)
        self._check_lost_commits()
        if migrate and writable:
            try:
                self._build_hash_index(reason="left by a bulk load that did not finish")
            except StoreError as exc:  # a read-only file: cache lookups scan until it is built
                logger.warning("could not rebuild the content_hash index of %s: %s", self.url, exc)
        self._load_index()

    @contextmanager
    def bulk_load(self) -> Iterator[SQLiteStore]:
        """A block for many ``add_many`` batches: the embedding-cache index is built once, at the end.

        Each ``add_many`` inside stays one all-or-nothing transaction of its own. The index
        on ``content_hash`` (random keys: every batch dirties pages all over it, which halves
        bulk throughput in a 100k store) is dropped when the block starts and built when it
        ends, also when it ends with an error; a loader that dies in between leaves that to
        the next open of the store. Meanwhile ``find_embedding(s)`` read the table once per
        call, in every process. Blocks may nest; the outermost one builds the index.

        >>> store = SQLiteStore(":memory:")
        >>> with store.bulk_load():
        ...     pass
        >>> [op.detail["index"] for op in store.operations(op="bulk_load")]
        ['built', 'dropped']
        """
        with self._lock:
            if self._bulk_depth == 0:
                with self._write() as conn:
                    conn.exec_driver_sql("DROP INDEX IF EXISTS memories_hash")
                    self._log(conn, "bulk_load", robot_id=None, detail={"index": "dropped"})
            self._bulk_depth += 1
        try:
            yield self
        finally:
            with self._lock:
                self._bulk_depth -= 1
                if self._bulk_depth == 0:
                    self._build_hash_index(reason="end of bulk load")

    def close(self) -> None:
        with self._lock:
            self._close_reader()
        self._engine.dispose()
        if isinstance(self._index, ApproximateIndex):
            self._index.close()
        self._index = None
