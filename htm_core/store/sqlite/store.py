"""SQLiteStore: the SQLite database, its dialect and the role objects, assembled.

:class:`~htm_core.store.sqlite.engine.SQLiteDatabase` opens the file (schema gate,
migrations, full-text triggers); the shared SQL roles of :mod:`htm_core.store._sql` and the
SQLite parts of this package are built on it in order, and every public method hands its
call to the part that owns it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from ...clock import utc_from_timestamp
from ...models import Memory, Operation, Robot
from .._sql.catalogue import Catalogue
from .._sql.dialect import SQLITE
from .._sql.forgetting import Forgetting
from .._sql.records import RecordChanges
from .._sql.versions import Versions
from ..base import UPDATE_FIELDS, AddResult, ArmQuery, Brief, EmbeddingFailure, NewMemory
from ..values import SearchFilters, StoreCounts, WorkingChange, WorkingResult, WorkingRow, WorkingState
from .engine import SQLiteDatabase
from .history import SQLiteHistory
from .mirror import VectorMirror
from .reads import SQLiteReads
from .rows import SQLiteRows
from .search import SQLiteSearch
from .windows import SQLiteWindows
from .working import SQLiteWorkingSet, unhold
from .writer import IdHighWater, SQLiteWriter

if TYPE_CHECKING:
    from ...jobs import JobQueue

__all__ = ["SQLiteStore"]


class SQLiteStore:
    """The embedded default backend. See the package docstring for how it works.

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
        db = self.database = SQLiteDatabase(database, busy_timeout_ms=busy_timeout_ms,
                                            migrate=migrate, read_only=read_only)
        self.url = db.url
        reads = self.reads = SQLiteReads(db)
        rows = self.rows = SQLiteRows(db, reads)
        mirror = self.mirror = VectorMirror(db, reads)
        self.working = SQLiteWorkingSet(db, reads, rows)
        self.windows = SQLiteWindows(db, reads, mirror)
        self.searcher = SQLiteSearch(reads, mirror, self.windows)
        self.writer = SQLiteWriter(db, rows, mirror, self.working)
        self.catalogue = Catalogue(db, SQLITE, rows)
        self.forgetting = Forgetting(db, SQLITE, rows, unhold=unhold,
                                     listeners=[mirror, IdHighWater(db)])
        self.record_changes = RecordChanges(db, SQLITE, rows)
        self.versioning = Versions(db, SQLITE, rows, SQLiteHistory(db), listeners=[mirror])
        mirror.load()

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (write transactions through it take the lock up front)."""
        return self.database.engine

    def schema_version(self) -> int:
        return self.database.schema_version()

    def migrate(self) -> int:
        return self.database.migrate()

    def open_job_queue(self) -> JobQueue:
        """The enrichment job queue on this store's database (see ``LongTermStore``)."""
        return self.database.open_job_queue()

    def close(self) -> None:
        self.database.close()
        self.mirror.close()

    @contextmanager
    def bulk_load(self) -> Iterator[SQLiteStore]:
        """A block for many ``add_many`` batches: the embedding-cache index is built once, at the end.

        Each ``add_many`` inside stays one all-or-nothing transaction of its own. The index
        on ``content_hash`` (random keys: every batch dirties pages all over it, which halves
        bulk throughput in a 100k store) is dropped when the block starts and built when it
        ends, also when it ends with an error; a loader that dies in between leaves that to
        the next open of the store. Meanwhile ``find_embeddings`` read the table once per
        call, in every process. Blocks may nest; the outermost one builds the index.

        >>> store = SQLiteStore(":memory:")
        >>> with store.bulk_load():
        ...     pass
        >>> [op.detail["index"] for op in store.operations(op="bulk_load")]
        ['built', 'dropped']
        """
        with self.database.bulk_load():
            yield self

    # -- records -----------------------------------------------------------------------

    def ensure_robot(self, name: str, *, working_memory_tokens: int | None = None) -> Robot:
        self.database.ensure_robot(name, working_memory_tokens=working_memory_tokens)
        known = [r for r in self.catalogue.robots() if r.name == name]
        return known[0] if known else Robot(id=0, name=name, created_at=utc_from_timestamp(
            time.time()))

    def robots(self, *, tags: Sequence[str] | None = None) -> list[Robot]:
        return self.catalogue.robots(tags=tags)

    def add_many(self, records: Sequence[NewMemory]) -> list[AddResult]:
        return self.writer.add_many(records)

    def add_and_enter(self, records: Sequence[NewMemory], *,
                      working: Callable[[list[AddResult]], WorkingChange | None],
                      expected_version: int | None = None,
                      ) -> tuple[list[AddResult], WorkingResult | None]:
        return self.writer.add_and_enter(records, working=working,
                                         expected_version=expected_version)

    def get(self, key: str, *, include_forgotten: bool = False,
            include_embedding: bool = False) -> Memory | None:
        return self.catalogue.get(key, include_forgotten=include_forgotten,
                                  include_embedding=include_embedding)

    def get_many(self, ids: Sequence[int], *, include_embedding: bool = False,
                 include_forgotten: bool = False) -> list[Memory]:
        return self.rows.get_many(ids, include_embedding=include_embedding,
                                  include_forgotten=include_forgotten)

    def list_memories(self, filters: SearchFilters, *, key_prefix: str | None = None,
                      include_forgotten: bool = False, order: str = "created_at",
                      descending: bool = False, limit: int = 100,
                      after: tuple[Any, int] | None = None,
                      as_of: int | None = None) -> list[Memory]:
        return self.catalogue.list_memories(
            filters, key_prefix=key_prefix, include_forgotten=include_forgotten, order=order,
            descending=descending, limit=limit, after=after, as_of=as_of)

    def history_mark(self) -> int:
        return self.catalogue.history_mark()

    def keys_with_prefix(self, prefix: str, *, include_forgotten: bool = False) -> list[str]:
        return self.catalogue.keys_with_prefix(prefix, include_forgotten=include_forgotten)

    def touch(self, ids: Sequence[int], *, at: datetime) -> None:
        self.writer.touch(ids, at=at)

    def add_tags(self, key: str, tags: Sequence[str], *, robot: str) -> Memory:
        return self.record_changes.add_tags(key, tags, robot=robot)

    def set_importance(self, key: str, importance: float, *, robot: str) -> Memory:
        return self.record_changes.set_importance(key, importance, robot=robot)

    def tags(self) -> dict[str, int]:
        return self.catalogue.tags()

    def counts(self, robot: str, *, tags: Sequence[str] | None = None) -> StoreCounts:
        return self.catalogue.counts(robot, tags=tags)

    def iter_memories(self, *, batch_size: int = 1000, include_forgotten: bool = True,
                      include_embedding: bool = False, after_id: int = 0
                      ) -> Iterator[list[Memory]]:
        return self.catalogue.iter_memories(
            batch_size=batch_size, include_forgotten=include_forgotten,
            include_embedding=include_embedding, after_id=after_id)

    def operations(self, *, limit: int = 100, robot: str | None = None,
                   op: str | None = None) -> list[Operation]:
        return self.catalogue.operations(limit=limit, robot=robot, op=op)

    # -- search ------------------------------------------------------------------------

    def search_arms(self, arms: Sequence[ArmQuery]) -> list[list[tuple[int, float]]]:
        return self.searcher.search_arms(arms)

    def vector_search(self, vector: Sequence[float], *, limit: int,
                      filters: SearchFilters, windows: bool = True) -> list[tuple[int, float]]:
        return self.searcher.vector_search(vector, limit=limit, filters=filters, windows=windows)

    def fulltext_search(self, query: str, *, limit: int,
                        filters: SearchFilters) -> list[tuple[int, float]]:
        return self.searcher.fulltext_search(query, limit=limit, filters=filters)

    def briefs(self, ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        return self.searcher.briefs(ids, filters)

    def rare_terms(self, terms: Sequence[str], filters: SearchFilters) -> list[str]:
        return self.searcher.rare_terms(terms, filters)

    def vector_centroid(self) -> list[float] | None:
        return self.searcher.vector_centroid()

    # -- forgetting --------------------------------------------------------------------

    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        return self.forgetting.forget(key, robot=robot, at=at)

    def restore(self, key: str, *, robot: str) -> Memory:
        return self.forgetting.restore(key, robot=robot)

    def purge(self, *, robot: str, key: str | None = None) -> int:
        return self.forgetting.purge(robot=robot, key=key)

    # -- working set -------------------------------------------------------------------

    def working_rows(self, robot: str) -> tuple[int, list[WorkingRow]]:
        return self.working.working_rows(robot)

    def working_states(self, robot: str) -> tuple[int, dict[int, WorkingState]]:
        return self.working.working_states(robot)

    def working_version(self, robot: str) -> int:
        return self.working.working_version(robot)

    def recall_check(self, robot: str, ids: Sequence[int]) -> tuple[int, frozenset[int]]:
        return self.working.recall_check(robot, ids)

    def apply_working(self, change: WorkingChange, *,
                      expected_version: int | None = None) -> WorkingResult:
        return self.working.apply_working(change, expected_version=expected_version)

    def clear_working(self, robot: str) -> int:
        return self.working.clear_working(robot)

    # -- embeddings --------------------------------------------------------------------

    def embedding_info(self) -> tuple[str, int] | None:
        return self.database.embedding_info()

    def find_embeddings(self, content_hashes: Sequence[str], embedder: str
                        ) -> dict[str, list[float]]:
        return self.rows.find_embeddings(content_hashes, embedder)

    def missing_embeddings(self, *, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        return self.rows.missing_embeddings(limit=limit)

    def set_embeddings(self, items: Sequence[tuple[int, Sequence[float]]], embedder: str) -> None:
        self.writer.set_embeddings(items, embedder)

    def reset_embeddings(self) -> None:
        self.writer.reset_embeddings()

    def mark_embedding_failures(self, failures: Sequence[tuple[int, str]], embedder: str) -> None:
        self.record_changes.mark_embedding_failures(failures, embedder)

    def retry_embedding_failures(self) -> int:
        return self.record_changes.retry_embedding_failures()

    def embedding_failures(self, *, limit: int = 100) -> list[EmbeddingFailure]:
        return self.rows.embedding_failures(limit=limit)

    # -- versions and windows ----------------------------------------------------------

    def update_memory(self, record: NewMemory, *, robot: str, at: datetime,
                      read_version: int | None = None,
                      fields: Collection[str] = UPDATE_FIELDS,
                      strict: bool = False) -> Memory:
        return self.versioning.update_memory(record, robot=robot, at=at,
                                                read_version=read_version, fields=fields,
                                                strict=strict)

    def versions(self, key: str) -> list[Memory]:
        return self.versioning.versions(key)

    def search_history(self, arm: ArmQuery) -> list[tuple[Memory, float]]:
        return self.versioning.search_history(arm)

    def set_windows(self, items: Sequence[tuple[int, str, Sequence[Sequence[float]]]]) -> int:
        return self.windows.set_windows(items)

    def missing_windows(self, *, window_words: int, limit: int
                        ) -> list[tuple[int, str, str, dict[str, Any]]]:
        return self.windows.missing_windows(window_words=window_words, limit=limit)

    def window_count(self) -> int:
        return self.windows.window_count()
