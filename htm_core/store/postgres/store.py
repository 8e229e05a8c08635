"""PostgresStore: its options, opening a store, bulk load and index rebuilds."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from ...errors import (
    StoreError,
    ValidationError,
)
from ...validation import check_int
from .._common import mask_url
from .._sql.schema import needs_migration
from ._codec import register_vectors
from ._engine import logger, postgres_url
from ._errors import map_postgres_errors
from ._schema import (
    _BULK_LOCK,
    _BULK_MARKER,
    _GIN_DDL,
    _GIN_INDEX,
    _HNSW_INDEX,
    DEFAULT_COPY_MIN_ROWS,
    DEFAULT_EF_SEARCH,
)
from ._windows import _PostgresWindows

#: How long an opening store waits for the index build of a loader that may have been
#: killed (its server backend stops within a second of noticing; see ``_recover_bulk_load``).
_ORPHAN_WAIT_MS = 10_000

#: Whether a live ``bulk_load`` holds the bulk lock (shared, for the whole load).
_LIVE_LOAD = ("SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
              "WHERE d.datname = current_database() AND l.locktype = 'advisory' "
              "AND l.mode = 'ShareLock' AND l.granted AND l.objsubid = 1 "
              "AND l.classid::bigint = (:k >> 32) AND l.objid::bigint = (:k & 4294967295))")


class PostgresStore(_PostgresWindows):
    """The PostgreSQL + pgvector backend. See the module docstring for how it works.

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

    Example::

        store = PostgresStore("postgresql://htm:secret@localhost/htm")
        store.ensure_robot("assistant")
    """

    backend = "postgres"
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
    ) -> None:
        self._url = postgres_url(url)
        self.url = mask_url(self._url)
        self.hnsw_m = check_int("hnsw_m", hnsw_m, 2, 100)
        self.hnsw_ef_construction = check_int("hnsw_ef_construction", hnsw_ef_construction,
                                               4, 1000)
        if self.hnsw_ef_construction < 2 * self.hnsw_m:
            raise ValidationError(
                f"hnsw_ef_construction ({hnsw_ef_construction}) must be at least 2 * hnsw_m "
                f"({2 * hnsw_m}); pgvector refuses a smaller one")
        self.ef_search = check_int("ef_search", ef_search, 1, 1000)
        self.copy_min_rows = check_int("copy_min_rows", copy_min_rows, 1, 2**31 - 1)
        self._robot_ids: dict[str, int] = {}
        # (newest id, monotonic time, embedder, centroid) of vector_centroid's last estimate.
        self._centroid: tuple[int, float, str | None, list[float] | None] | None = None
        # The vector dimension once vectors exist (see _prepare_vector_query).
        self._dim: int | None = None
        # (monotonic time, lexemes) of _common_lexemes' last read.
        self._common: tuple[float, list[str] | None] | None = None
        self._raw_lock = threading.Lock()
        self._raw_info: dict[str, Any] = {}
        self._engine: Engine = create_engine(
            self._url,
            pool_size=check_int("pool_size", pool_size, 1, 1000),
            max_overflow=check_int("max_overflow", max_overflow, 0, 1000),
            pool_timeout=pool_timeout,
            pool_recycle=1800,
            connect_args={"connect_timeout": check_int("connect_timeout", connect_timeout, 1, 3600),
                          "application_name": "htm"},
        )
        register_vectors(self._engine)
        try:
            if needs_migration(self.url, self.schema_version(), migrate=migrate):
                self.migrate()
            self._recover_bulk_load()
        except BaseException:
            self._engine.dispose()
            raise

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
        connection for itself (it holds the advisory lock that marks the load as alive).

        Example::

            with store.bulk_load():
                for batch in batches:          # lists of NewMemory, e.g. 10,000 each
                    store.add_many(batch)
        """
        memory = check_int("maintenance_work_mem_mb", maintenance_work_mem_mb, 1, 2**31 - 1)
        workers = None if parallel_workers is None else check_int(
            "parallel_workers", parallel_workers, 0, 1024)

        def start(conn: Connection) -> None:
            self._set_meta(conn, _BULK_MARKER, json.dumps({"defer_fulltext": defer_fulltext}))
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {_HNSW_INDEX}")
            if defer_fulltext:
                conn.exec_driver_sql(f"DROP INDEX IF EXISTS {_GIN_INDEX}")
            self._log_many(conn, [("bulk_load", None, None, None, {"phase": "start"})])

        with map_postgres_errors(self.url, "starting a bulk load"):
            holder = self._engine.connect()
        try:
            with map_postgres_errors(self.url, "starting a bulk load"):
                # Held for the whole load: tells other stores this loader is alive.
                holder.execute(text("SELECT pg_advisory_lock_shared(:k)"), {"k": _BULK_LOCK})
                holder.commit()
            try:
                self._run("starting a bulk load", start)
                yield self
            finally:
                try:
                    holder.execute(text("SELECT pg_advisory_unlock_shared(:k)"),
                                   {"k": _BULK_LOCK})
                    holder.commit()
                except DBAPIError:
                    holder.invalidate()  # closing the session releases the lock too
                self._vacuum()
                self.rebuild_indexes(maintenance_work_mem_mb=memory, parallel_workers=workers)
        finally:
            holder.close()

    def _vacuum(self) -> None:
        """VACUUM the table after a load, before the big indexes exist again.

        The load's inserts would otherwise set off autovacuum soon after, a full pass
        over the new rows competing with the first searches (and, by then, visiting the
        rebuilt indexes too). A failure here only costs that later pass: it is logged.
        """
        try:
            with self._engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM memories")
        except (DBAPIError, PoolTimeoutError) as exc:
            logger.warning("%s: VACUUM after a bulk load failed (autovacuum will do it): %s",
                           self.url, exc)

    def rebuild_indexes(self, *, maintenance_work_mem_mb: int = 1024,
                        parallel_workers: int | None = None) -> list[str]:
        """Build the GIN and HNSW search indexes if they are missing; return those built.

        :meth:`bulk_load` calls this on its way out; call it yourself after a load was
        interrupted. Clears the bulk-load marker unless another load is still running.
        """
        memory = check_int("maintenance_work_mem_mb", maintenance_work_mem_mb, 1, 2**31 - 1)
        workers = None if parallel_workers is None else check_int(
            "parallel_workers", parallel_workers, 0, 1024)
        return self._run("rebuilding the search indexes",
                         lambda conn: self._rebuild(conn, memory, workers, abandoned_only=False))

    def _rebuild(self, conn: Connection, memory_mb: int, workers: int | None, *,
                 abandoned_only: bool) -> list[str]:
        if abandoned_only:  # no live load: wait (bounded) for a build that may be orphaned
            conn.execute(text("SELECT set_config('lock_timeout', :t, true)"),
                         {"t": f"{_ORPHAN_WAIT_MS}ms"})
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _BULK_LOCK})
            alone = True
        else:
            alone = bool(conn.execute(text("SELECT pg_try_advisory_xact_lock(:k)"),
                                      {"k": _BULK_LOCK}).scalar())
        # A build whose client died stops within a second instead of running to its end
        # while holding the lock (PostgreSQL 14 and later).
        conn.execute(text("SELECT set_config('client_connection_check_interval', '1000', true) "
                          "WHERE current_setting('server_version_num')::int >= 140000"))
        conn.execute(text("SELECT set_config('maintenance_work_mem', :m, true)"),
                     {"m": f"{memory_mb}MB"})
        if workers is not None:
            conn.execute(text("SELECT set_config('max_parallel_maintenance_workers', :w, true)"),
                         {"w": str(workers)})
        present = {str(r[0]) for r in conn.execute(text(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' "
            "AND schemaname = current_schema()"))}
        built: list[str] = []
        if _GIN_INDEX not in present:
            conn.exec_driver_sql(_GIN_DDL)
            built.append(_GIN_INDEX)
        if _HNSW_INDEX not in present and self._info(self._meta(conn)) is not None:
            conn.exec_driver_sql(self._hnsw_ddl())
            built.append(_HNSW_INDEX)
        if alone:
            conn.execute(text("DELETE FROM htm_meta WHERE key = :k"), {"k": _BULK_MARKER})
        if built:
            conn.exec_driver_sql("ANALYZE memories")
        self._log_many(conn, [("bulk_load", None, None, None,
                               {"phase": "indexes built", "built": built})])
        return built

    def _recover_bulk_load(self) -> None:
        """Build the indexes a bulk load dropped when that load's process died mid-way.

        The marker (set when the load starts, cleared by the transaction that builds the
        indexes) says a load has not finished. A live load holds the bulk lock shared for
        its whole length and builds the indexes itself. Without one, the lock can still be
        held, exclusively, by the final build of a loader that was killed: its server
        backend goes on until it notices, within a second, that its client is gone. So the
        store waits for that lock (at most ``_ORPHAN_WAIT_MS``), then builds what is missing;
        if a build is still running then, it says so.
        """
        def state(conn: Connection) -> tuple[Any, bool]:
            marker = conn.execute(text("SELECT value FROM htm_meta WHERE key = :k"),
                                  {"k": _BULK_MARKER}).scalar()
            loading = marker is not None and bool(conn.execute(text(_LIVE_LOAD),
                                                               {"k": _BULK_LOCK}).scalar())
            return marker, loading

        marker, loading = self._read("reading the bulk-load marker", state)
        if marker is None or loading:
            return
        try:
            built = self._run("rebuilding the search indexes", lambda conn: self._rebuild(
                conn, 1024, None, abandoned_only=True))
        except StoreError as exc:
            logger.warning("%s: a bulk load's search indexes are missing and another process "
                           "is still building them (%s); searches are exact scans until it "
                           "ends, and the next store to open rebuilds them if it fails",
                           self.url, exc)
            return
        if built:
            logger.warning("%s: a bulk load ended without rebuilding its indexes; rebuilt %s",
                           self.url, ", ".join(built))
