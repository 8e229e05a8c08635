"""PostgresStore: the PostgreSQL database, its dialect and the role objects, assembled.

:class:`~htm_core.store.postgres.engine.PostgresDatabase` holds the pool and opens the
database; the PostgreSQL parts of this package and the shared SQL roles of
:mod:`htm_core.store._sql` are built on it in order, and every public method hands its
call to the part that owns it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Engine

from ...errors import ValidationError
from ...models import Memory, Operation, Robot
from ...validation import check_int
from .._sql.catalogue import Catalogue
from .._sql.dialect import POSTGRES
from .._sql.filters import filter_sql
from .._sql.forgetting import Forgetting
from .._sql.records import RecordChanges
from .._sql.schema import needs_migration
from .._sql.versions import Versions
from .._sql.working import WorkingSetSQL
from ..base import (
    UPDATE_FIELDS,
    AddResult,
    ArmQuery,
    Brief,
    EmbeddingFailure,
    NewMemory,
    SearchFilters,
    StoreCounts,
    WorkingChange,
    WorkingResult,
    WorkingRow,
    WorkingState,
)
from ._schema import DEFAULT_COPY_MIN_ROWS, DEFAULT_EF_SEARCH
from .bulk import BulkLoader
from .engine import PostgresDatabase, postgres_url, split_listen, split_pooler
from .history import PostgresHistory
from .indexes import VectorColumns, check_hnsw
from .replica import ReplicaReads
from .rows import FilterSQL, PostgresRows
from .search import VECTOR_VERSION, PostgresSearcher, iterative_scans
from .windows import PostgresWindows, WindowedVectorSQL
from .working import PostgresWorkingSet
from .writer import PostgresWriter

if TYPE_CHECKING:
    from ...jobs import JobQueue

__all__ = ["PostgresStore"]


T = TypeVar("T")


def _check_seconds(name: str, value: float, least: float) -> float:
    """``value`` as a float, or a ValidationError saying what is accepted."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not least <= value <= 3600:
        raise ValidationError(
            f"{name} must be a number of seconds from {least:g} to 3600, got {value!r}")
    return float(value)


def _serving_options(url: str, pooler: str | None, *, listen: bool, listen_staleness: float,
                     read_database_url: str | None, replica_wait: float
                     ) -> tuple[float, float, str | None]:
    """``listen_staleness``, ``replica_wait`` and ``read_database_url`` checked (and
    ``listen`` against a transaction-mode pooler)."""
    listen_staleness = _check_seconds("listen_staleness", listen_staleness, 0.01)
    replica_wait = _check_seconds("replica_wait", replica_wait, 0.0)
    if read_database_url is not None:
        read_database_url = postgres_url(read_database_url)
    if listen and split_pooler(url, pooler)[1] is not None:
        raise ValidationError(
            "listen=True needs a session of its own on the server, which a "
            "transaction-mode pooler does not keep: leave listen out with "
            "pooler='transaction' (reads then check the working-set version each time), "
            "or open the store on a direct URL")
    return listen_staleness, replica_wait, read_database_url


class PostgresStore:
    """The PostgreSQL + pgvector backend. See the package docstring for how it works.

    Args:
        url: ``postgresql://user:password@host:port/database`` (``postgres://`` and
            ``postgresql+psycopg://`` work too).
        migrate: create or upgrade the schema on open (default). With False, an
            unmigrated database is a :class:`~htm_core.errors.SchemaError` naming
            ``htm migrate``.
        pool_size: connections kept open by this process.
        max_overflow: extra connections allowed under load beyond ``pool_size``.
        pool_timeout: seconds to wait for a free connection.
        connect_timeout: seconds to wait for the server when connecting.
        hnsw_m: HNSW ``m`` (links per node), used when the index is created.
        hnsw_ef_construction: HNSW ``ef_construction``, used when the index is created.
        ef_search: HNSW ``ef_search`` for vector queries (per query override in
            :meth:`vector_search`); higher is more exact and slower.
        copy_min_rows: batches with at least this many new rows are streamed with a
            binary ``COPY`` (faster for large batches); smaller ones are sent as arrays.
        pooler: ``"transaction"`` when ``url`` reaches the server through a pooler that
            gives each transaction whichever server connection is free (PgBouncer's
            ``pool_mode = transaction``); the URL can say so instead, with
            ``?pooler=transaction``. Then nothing is kept in a server session: no
            prepared statements, ``hnsw.ef_search`` set per transaction, transaction
            advisory locks only; :meth:`bulk_load` is refused (it needs a session).
        listen: keep a connection listening for other processes' working-memory changes
            (LISTEN/NOTIFY), so a read skips the working-set version round trip while
            nothing was heard; the URL can say so instead, with ``?listen=true``. A read
            may then miss a change committed less than ``listen_staleness`` seconds
            before it (see :mod:`~htm_core.store.postgres.listener`). Not with
            ``pooler="transaction"`` (a pooler does not keep a LISTEN).
        listen_staleness: the bound above, in seconds (the listener's heartbeat runs
            twice as often).
        read_database_url: a streaming replica of ``url``'s database: searches and lists
            read there once it has replayed this process's writes (see
            :mod:`~htm_core.store.postgres.replica`); the pool options apply to it too.
        replica_wait: seconds a read waits for the replica to replay this process's
            writes before it reads the primary instead.

    The parts, each built here with what it needs: ``database`` (the engine: pool,
    transactions, meta, robots, log), ``columns`` (vector columns and HNSW indexes),
    ``rows`` (memory rows read as memories), ``working`` (each robot's working memory),
    ``searcher``, ``writer``, ``windows``, ``bulk`` (bulk loads and their recovery), and
    the shared SQL roles ``catalogue``, ``forgetting``, ``record_changes``,
    ``working_sql`` and ``versioning`` (given :class:`~.history.PostgresHistory`).

    Example::

        store = PostgresStore("postgresql://htm:secret@localhost/htm")
        store.ensure_robot("assistant")
    """

    backend = "postgres"
    #: Its I/O can run natively in async code (see ``HTM(native_async=...)``): in a greenlet
    #: of :func:`htm_core._native.run_native` the engine uses psycopg's async driver.
    native_async = True

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = True,
        pool_size: int = 5,
        max_overflow: int = 10,
        pool_timeout: float = 30.0,
        connect_timeout: int = 10,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        ef_search: int = DEFAULT_EF_SEARCH,
        copy_min_rows: int = DEFAULT_COPY_MIN_ROWS,
        pooler: str | None = None,
        listen: bool | None = None,
        listen_staleness: float = 1.0,
        read_database_url: str | None = None,
        replica_wait: float = 0.1,
    ) -> None:
        url, listen = split_listen(url, listen)
        url = postgres_url(url)  # the options are checked in this order, before connecting
        listen_staleness, replica_wait, read_database_url = _serving_options(
            url, pooler, listen=listen, listen_staleness=listen_staleness,
            read_database_url=read_database_url, replica_wait=replica_wait)
        hnsw_m, hnsw_ef_construction = check_hnsw(hnsw_m, hnsw_ef_construction)
        ef_search = check_int("ef_search", ef_search, 1, 1000)
        copy_min_rows = check_int("copy_min_rows", copy_min_rows, 1, 2**31 - 1)
        db = self.database = PostgresDatabase(
            url, pool_size=pool_size, max_overflow=max_overflow, pool_timeout=pool_timeout,
            connect_timeout=connect_timeout, pooler=pooler)
        self.url = db.url
        where = functools.partial(filter_sql, POSTGRES)
        columns = self.columns = VectorColumns(db, hnsw_m=hnsw_m,
                                               hnsw_ef_construction=hnsw_ef_construction)
        rows = self.rows = PostgresRows(db)
        self.working = PostgresWorkingSet(db, rows)
        self.searcher = PostgresSearcher(db, filter_sql=where, vector_sql=WindowedVectorSQL(where),
                                         ef_search=ef_search)
        self.writer = PostgresWriter(db, rows, columns, self.working,
                                     after_reset=self._vectors_reset,
                                     copy_min_rows=copy_min_rows)
        self.windows = PostgresWindows(db, columns)
        self.bulk = BulkLoader(db, columns)
        self.catalogue = Catalogue(db, POSTGRES, rows)
        self.forgetting = Forgetting(db, POSTGRES, rows, unhold=PostgresWorkingSet.unhold)
        self.record_changes = RecordChanges(db, POSTGRES, rows)
        self.working_sql = WorkingSetSQL(db, POSTGRES)
        self.versioning = Versions(db, POSTGRES, rows, PostgresHistory(columns))
        self._read_on(read_database_url, wait=replica_wait, where=where, ef_search=ef_search,
                      pool=(pool_size, max_overflow, pool_timeout, connect_timeout))
        try:
            self._open(migrate=migrate, listen=listen, listen_staleness=listen_staleness)
        except BaseException:
            self.close()
            raise

    def _open(self, *, migrate: bool, listen: bool, listen_staleness: float) -> None:
        """Migrate (when allowed), recover from a loader that died, start listening, and
        read which pgvector serves the searches."""
        if needs_migration(self.url, self.schema_version(), migrate=migrate):
            self.migrate()
        self.bulk.recover()
        if listen:
            self.database.listen(install=migrate, staleness=listen_staleness)
        self.searcher.iterative = self.replica_searcher.iterative = iterative_scans(
            self.database.read("reading pgvector's version",
                               lambda conn: conn.execute(text(VECTOR_VERSION)).scalar()))

    def _read_on(self, url: str | None, *, wait: float, where: FilterSQL, ef_search: int,
                 pool: tuple[int, int, float, int]) -> None:
        """Searches and lists on the replica ``url`` (its own pool and read parts), or on
        the primary when ``url`` is None."""
        self.replica: ReplicaReads | None = None
        self.replica_searcher, self.replica_catalogue = self.searcher, self.catalogue
        if url is None:
            return
        size, overflow, timeout, connect = pool
        replica = PostgresDatabase(url, pool_size=size, max_overflow=overflow,
                                   pool_timeout=timeout, connect_timeout=connect)
        self.replica = ReplicaReads(self.database, replica, wait=wait)
        self.replica_searcher = PostgresSearcher(replica, filter_sql=where,
                                                 vector_sql=WindowedVectorSQL(where),
                                                 ef_search=ef_search)
        self.replica_catalogue = Catalogue(replica, POSTGRES, PostgresRows(replica))

    def _searcher(self, what: str) -> Callable[[Callable[[PostgresSearcher], T]], T]:
        """Run a search on the replica when it may serve it (see :class:`ReplicaReads`)."""
        def on(fn: Callable[[PostgresSearcher], T]) -> T:
            if self.replica is None:
                return fn(self.searcher)
            return self.replica.route(what, lambda: fn(self.replica_searcher),
                                      lambda: fn(self.searcher))
        return on

    def _vectors_reset(self) -> None:
        """Every vector was dropped: the searchers forget the dimension and centroid."""
        self.searcher.vectors_reset()
        if self.replica_searcher is not self.searcher:
            self.replica_searcher.vectors_reset()

    def _wrote(self, tags: Iterable[str] | None) -> None:
        """Memories tagged ``tags`` (None: any) were written: the searchers count those
        scopes again (see :class:`~.search.ScopeSizes`)."""
        self.searcher.scope_sizes.wrote(tags)
        if self.replica_searcher is not self.searcher:
            self.replica_searcher.scope_sizes.wrote(tags)

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"

    # -- options the parts hold ------------------------------------------------------

    @property
    def hnsw_m(self) -> int:
        """HNSW ``m`` of the indexes built from now on."""
        return self.columns.hnsw_m

    @hnsw_m.setter
    def hnsw_m(self, value: int) -> None:
        self.columns.hnsw_m = value

    @property
    def hnsw_ef_construction(self) -> int:
        """HNSW ``ef_construction`` of the indexes built from now on."""
        return self.columns.hnsw_ef_construction

    @hnsw_ef_construction.setter
    def hnsw_ef_construction(self, value: int) -> None:
        self.columns.hnsw_ef_construction = value

    @property
    def pooler(self) -> str | None:
        """``"transaction"`` behind a transaction-mode pooler, else None."""
        return self.database.pooler

    @property
    def listening(self) -> bool:
        """Whether a listener vouches for remembered working-set versions (``listen``)."""
        return self.database.heard.listener is not None

    @property
    def ef_search(self) -> int:
        """HNSW ``ef_search`` of a vector search that names none."""
        return self.searcher.ef_search

    @ef_search.setter
    def ef_search(self, value: int) -> None:
        self.searcher.ef_search = value

    @property
    def copy_min_rows(self) -> int:
        """Batches with at least this many new rows go by binary COPY."""
        return self.writer.copy_min_rows

    @copy_min_rows.setter
    def copy_min_rows(self, value: int) -> None:
        self.writer.copy_min_rows = value

    # -- lifecycle -------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for companions such as the enrichment job queue)."""
        return self.database.engine

    def schema_version(self) -> int:
        """The schema version in the database (0 when empty)."""
        return self.database.schema_version()

    def migrate(self) -> int:
        """Create or upgrade the schema; return the version now in place. Never drops."""
        return self.database.migrate()

    def close(self) -> None:
        """Release every pooled connection and the recall path's own (the replica's too)."""
        if self.replica is not None:
            self.replica.close()
        self.database.close()

    def open_job_queue(self) -> JobQueue:
        """The enrichment job queue on this store's database (see ``LongTermStore``)."""
        from ...jobs import job_queue_on

        return job_queue_on(self.database.engine)

    def embedding_info(self) -> tuple[str, int] | None:
        """(embedder name, dimension) fixed for this store, or None before any vector."""
        return self.database.embedding_info()

    def ensure_robot(self, name: str, *, working_memory_tokens: int | None = None) -> Robot:
        """Register ``name`` if new (recording the budget its ``HTM`` runs with); return it."""
        self.database.register_robot(name, working_memory_tokens)
        return next(r for r in self.robots() if r.name == name)

    # -- bulk loading ----------------------------------------------------------------

    @contextmanager
    def bulk_load(self, *, maintenance_work_mem_mb: int = 1024,
                  parallel_workers: int | None = None,
                  defer_fulltext: bool = True) -> Iterator[PostgresStore]:
        """Load many memories with the search indexes built once at the end.

        Keeping the HNSW graph (and the GIN full-text index) up to date row by row is
        what limits large loads; inside this block they are dropped, and on the way out
        (also when the block raises) the table is vacuumed, the indexes are built again
        over all the rows with ``maintenance_work_mem_mb`` of memory and up to
        ``parallel_workers`` parallel workers (None: the server's
        ``max_parallel_maintenance_workers``), and the table is analysed. Every
        ``add_many`` keeps its usual guarantees; searches meanwhile are exact scans, so
        they stay correct, only slower. The build at the end blocks
        writers (not readers) for its duration. With ``defer_fulltext=False`` the GIN
        index is kept and maintained as rows arrive. The block keeps one pooled
        connection for itself (it holds the advisory lock that marks the load as alive),
        so behind a transaction-mode pooler (``pooler="transaction"``) it is refused with
        a :class:`~htm_core.errors.StoreError`: load through a direct URL instead.

        Example::

            with store.bulk_load():
                for batch in batches:          # lists of NewMemory, e.g. 10,000 each
                    store.add_many(batch)
        """
        with self.bulk.loading(maintenance_work_mem_mb=maintenance_work_mem_mb,
                               parallel_workers=parallel_workers,
                               defer_fulltext=defer_fulltext):
            yield self

    def rebuild_indexes(self, *, maintenance_work_mem_mb: int = 1024,
                        parallel_workers: int | None = None) -> list[str]:
        """Build the GIN and HNSW search indexes if they are missing; return those built.

        :meth:`bulk_load` calls this on its way out; call it yourself after a load was
        interrupted. Clears the bulk-load marker unless another load is still running.
        """
        return self.bulk.rebuild_indexes(maintenance_work_mem_mb=maintenance_work_mem_mb,
                                         parallel_workers=parallel_workers)

    # -- records ---------------------------------------------------------------------

    def add_many(self, records: Sequence[NewMemory]) -> list[AddResult]:
        """Write ``records`` in one transaction (see :class:`~.writer.PostgresWriter`)."""
        done = self.writer.add_many(records)
        self._wrote({tag for r in records for tag in r.tags})
        return done

    def add_and_enter(self, records: Sequence[NewMemory], *,
                      working: Callable[[list[AddResult]], WorkingChange | None],
                      expected_version: int | None = None,
                      ) -> tuple[list[AddResult], WorkingResult | None]:
        """``add_many`` and a working-memory change in one transaction (see ``LongTermStore``)."""
        done = self.writer.add_and_enter(records, working=working,
                                         expected_version=expected_version)
        self._wrote({tag for r in records for tag in r.tags})
        return done

    def touch(self, ids: Sequence[int], *, at: datetime) -> None:
        """Record an access: ``last_accessed`` (never moved back) and ``access_count``."""
        self.writer.touch(ids, at=at)

    def get_many(self, ids: Sequence[int], *, include_embedding: bool = False,
                 include_forgotten: bool = False) -> list[Memory]:
        """Memories with these ids (visible ones unless asked), in the order of ``ids``."""
        return self.rows.get_many(ids, include_embedding=include_embedding,
                                  include_forgotten=include_forgotten)

    # -- embeddings ------------------------------------------------------------------

    def find_embeddings(self, content_hashes: Sequence[str], embedder: str
                        ) -> dict[str, list[float]]:
        """Stored vectors by this embedder for any of these contents, by content hash."""
        return self.rows.find_embeddings(content_hashes, embedder)

    def missing_embeddings(self, *, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        """Visible memories without a vector and not marked as failing, oldest first."""
        return self.rows.missing_embeddings(limit=limit)

    def embedding_failures(self, *, limit: int = 100) -> list[EmbeddingFailure]:
        """The memories marked as failing, with the reason, oldest mark first."""
        return self.rows.embedding_failures(limit=limit)

    def set_embeddings(self, items: Sequence[tuple[int, Sequence[float]]], embedder: str) -> None:
        """Store vectors for existing memories in one statement."""
        self.writer.set_embeddings(items, embedder)

    def reset_embeddings(self) -> None:
        """Drop every vector, the HNSW index and the fixed dimension, to re-embed from scratch."""
        self.writer.reset_embeddings()

    # -- search ----------------------------------------------------------------------

    def vector_search(self, vector: Sequence[float], *, limit: int, filters: SearchFilters,
                      windows: bool = True, ef_search: int | None = None
                      ) -> list[tuple[int, float]]:
        """Top ``limit`` (id, cosine similarity), best first, filters applied in SQL."""
        return self._searcher("a vector search")(lambda s: s.vector_search(
            vector, limit=limit, filters=filters, windows=windows, ef_search=ef_search))

    def fulltext_search(self, query: str, *, limit: int,
                        filters: SearchFilters) -> list[tuple[int, float]]:
        """Top ``limit`` (id, ``ts_rank``) for the words of ``query``, OR-ed, best first."""
        return self._searcher("a full-text search")(lambda s: s.fulltext_search(
            query, limit=limit, filters=filters))

    def search_arms(self, arms: Sequence[ArmQuery]) -> list[list[tuple[int, float]]]:
        """All the searches in one statement (one round trip), results in the order asked."""
        return self._searcher("a search")(lambda s: s.search_arms(arms))

    def briefs(self, ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        """Id, content, robot and creation time of the visible ``ids`` that pass ``filters``."""
        return self._searcher("reading briefs")(lambda s: s.briefs(ids, filters))

    def rare_terms(self, terms: Sequence[str], filters: SearchFilters) -> list[str]:
        """The rare ``terms`` among the memories passing ``filters`` (one statement)."""
        return self._searcher("counting the query's words")(
            lambda s: s.rare_terms(terms, filters))

    def vector_centroid(self) -> list[float] | None:
        """The mean direction of the newest 20,000 vectors (an estimate)."""
        return self.searcher.vector_centroid()

    def explain_search(self, *, vector: Sequence[float] | None = None, query: str | None = None,
                       limit: int = 10, filters: SearchFilters | None = None,
                       ef_search: int | None = None, seqscan: bool = True) -> str:
        """The PostgreSQL plan of the vector (``vector=``) or full-text (``query=``) search
        (see :meth:`~.search.PostgresSearcher.explain_search`)."""
        return self.searcher.explain_search(vector=vector, query=query, limit=limit,
                                            filters=filters, ef_search=ef_search,
                                            seqscan=seqscan)

    # -- windows ---------------------------------------------------------------------

    def set_windows(self, items: Sequence[tuple[int, str, Sequence[Sequence[float]]]]) -> int:
        """Store the window vectors of memories (see ``Windows``); return how many took them."""
        return self.windows.set_windows(items)

    def missing_windows(self, *, window_words: int, limit: int
                        ) -> list[tuple[int, str, str, dict[str, Any]]]:
        """Visible long memories with a vector and no windows, oldest first."""
        return self.windows.missing_windows(window_words=window_words, limit=limit)

    def window_count(self) -> int:
        """How many window vectors are stored."""
        return self.windows.window_count()

    # -- working memory --------------------------------------------------------------

    def working_rows(self, robot: str) -> tuple[int, list[WorkingRow]]:
        """``robot``'s working-set version and entries, read in one snapshot."""
        return self.working.working_rows(robot)

    def working_states(self, robot: str) -> tuple[int, dict[int, WorkingState]]:
        """``robot``'s working-set version and entry states by memory id, one snapshot."""
        return self.working.working_states(robot)

    def recall_check(self, robot: str, ids: Sequence[int]) -> tuple[int, frozenset[int]]:
        """The working-set version of ``robot`` and which of ``ids`` are hidden, one read."""
        return self.working.recall_check(robot, ids)

    def working_version(self, robot: str) -> int:
        """``robot``'s working-set version (0 for an unknown robot)."""
        return self.working.working_version(robot)

    def apply_working(self, change: WorkingChange, *,
                      expected_version: int | None = None) -> WorkingResult:
        """Write a working-memory change in one transaction."""
        return self.working.apply_working(change, expected_version=expected_version)

    # -- the catalogue ---------------------------------------------------------------

    def get(self, key: str, *, include_forgotten: bool = False,
            include_embedding: bool = False) -> Memory | None:
        """The memory under ``key``, or None (forgotten ones only when asked)."""
        return self.catalogue.get(key, include_forgotten=include_forgotten,
                                  include_embedding=include_embedding)

    def list_memories(self, filters: SearchFilters, *, key_prefix: str | None = None,
                      include_forgotten: bool = False, order: str = "created_at",
                      descending: bool = False, limit: int = 100,
                      after: tuple[Any, int] | None = None,
                      as_of: int | None = None) -> list[Memory]:
        """Up to ``limit`` memories matching ``filters`` and ``key_prefix`` (keyset paging)."""
        def listing(catalogue: Catalogue) -> list[Memory]:
            return catalogue.list_memories(
                filters, key_prefix=key_prefix, include_forgotten=include_forgotten,
                order=order, descending=descending, limit=limit, after=after, as_of=as_of)

        if self.replica is None:
            return listing(self.catalogue)
        return self.replica.route("listing memories", lambda: listing(self.replica_catalogue),
                                  lambda: listing(self.catalogue))

    def history_mark(self) -> int:
        """The newest superseded version's row id (0 before the first update)."""
        return self.catalogue.history_mark()

    def iter_memories(self, *, batch_size: int = 1000, include_forgotten: bool = True,
                      include_embedding: bool = False, after_id: int = 0
                      ) -> Iterator[list[Memory]]:
        """Every memory in id order, in batches of ``batch_size`` (keyset pagination)."""
        return self.catalogue.iter_memories(batch_size=batch_size,
                                            include_forgotten=include_forgotten,
                                            include_embedding=include_embedding,
                                            after_id=after_id)

    def keys_with_prefix(self, prefix: str, *, include_forgotten: bool = False) -> list[str]:
        """Keys starting with ``prefix``, sorted."""
        return self.catalogue.keys_with_prefix(prefix, include_forgotten=include_forgotten)

    def tags(self) -> dict[str, int]:
        """Every tag with the number of visible memories carrying it."""
        return self.catalogue.tags()

    def counts(self, robot: str, *, tags: Sequence[str] | None = None) -> StoreCounts:
        """Figures for ``stats()``."""
        return self.catalogue.counts(robot, tags=tags)

    def robots(self, *, tags: Sequence[str] | None = None) -> list[Robot]:
        """Every robot on the store, with its count of visible memories."""
        return self.catalogue.robots(tags=tags)

    def operations(self, *, limit: int = 100, robot: str | None = None,
                   op: str | None = None) -> list[Operation]:
        """The newest operations first."""
        return self.catalogue.operations(limit=limit, robot=robot, op=op)

    # -- changes to memories ---------------------------------------------------------

    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        """Hide the memory from recall, recoverably. Raises ``NotFoundError``."""
        return self.forgetting.forget(key, robot=robot, at=at)

    def restore(self, key: str, *, robot: str) -> Memory:
        """Undo ``forget``. Raises ``NotFoundError`` when no such memory exists."""
        return self.forgetting.restore(key, robot=robot)

    def purge(self, *, robot: str, key: str | None = None) -> int:
        """Delete forgotten memories for good (one, or all); return how many."""
        done = self.forgetting.purge(robot=robot, key=key)
        self._wrote(None)
        return done

    def add_tags(self, key: str, tags: Sequence[str], *, robot: str) -> Memory:
        """Link more tags to a memory (merged with its own; logged). ``NotFoundError``."""
        done = self.record_changes.add_tags(key, tags, robot=robot)
        self._wrote(tags)
        return done

    def set_importance(self, key: str, importance: float, *, robot: str) -> Memory:
        """Change a memory's importance (enrichment; logged). ``NotFoundError``."""
        return self.record_changes.set_importance(key, importance, robot=robot)

    def mark_embedding_failures(self, failures: Sequence[tuple[int, str]], embedder: str) -> None:
        """Mark memories ``(id, reason)`` whose text ``embedder`` rejects."""
        self.record_changes.mark_embedding_failures(failures, embedder)

    def retry_embedding_failures(self) -> int:
        """Clear every failure mark (the memories are pending again); return how many."""
        return self.record_changes.retry_embedding_failures()

    def clear_working(self, robot: str) -> int:
        """Drop ``robot``'s working-memory membership (memories stay); return how many."""
        return self.working_sql.clear_working(robot)

    # -- versions --------------------------------------------------------------------

    def update_memory(self, record: NewMemory, *, robot: str, at: datetime,
                      read_version: int | None = None,
                      fields: Collection[str] = UPDATE_FIELDS,
                      strict: bool = False) -> Memory:
        """Set ``fields`` of the memory under ``record.key`` to ``record``'s, as a new
        version (see :class:`~htm_core.store._sql.versions.Versions`)."""
        done = self.versioning.update_memory(record, robot=robot, at=at,
                                             read_version=read_version, fields=fields,
                                             strict=strict)
        self._wrote(None if "tags" in fields else ())
        return done

    def versions(self, key: str) -> list[Memory]:
        """Every version of the memory under ``key``, oldest first, the current one last."""
        return self.versioning.versions(key)

    def search_history(self, arm: ArmQuery) -> list[tuple[Memory, float]]:
        """Superseded versions of visible memories passing the arm's filters, best first."""
        return self.versioning.search_history(arm)
