"""PostgreSQL bulk loads: the search indexes dropped while rows go in and built once at the
end, and their rebuild by the next store to open when a loader died mid-way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from ...errors import StoreError
from ...validation import check_int
from ._errors import map_postgres_errors
from ._schema import _BULK_LOCK, _BULK_MARKER, _GIN_DDL, _GIN_INDEX, _HNSW_INDEX
from .engine import PostgresDatabase, embedding_settings, logger
from .indexes import VectorColumns

__all__ = ["BulkLoader"]

#: How long an opening store waits for the index build of a loader that may have been
#: killed (its server backend stops within a second of noticing; see ``BulkLoader.recover``).
_ORPHAN_WAIT_MS = 10_000

#: Whether a live ``bulk_load`` holds the bulk lock (shared, for the whole load).
_LIVE_LOAD = ("SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
              "WHERE d.datname = current_database() AND l.locktype = 'advisory' "
              "AND l.mode = 'ShareLock' AND l.granted AND l.objsubid = 1 "
              "AND l.classid::bigint = (:k >> 32) AND l.objid::bigint = (:k & 4294967295))")


class BulkLoader:
    """Bulk loads on one database, and the recovery of one that died mid-way."""

    def __init__(self, db: PostgresDatabase, columns: VectorColumns) -> None:
        self.db = db
        self.columns = columns

    @contextmanager
    def loading(self, *, maintenance_work_mem_mb: int = 1024,
                parallel_workers: int | None = None,
                defer_fulltext: bool = True) -> Iterator[None]:
        """The block of :meth:`PostgresStore.bulk_load <htm_core.store.postgres.PostgresStore.bulk_load>`:
        the indexes dropped on the way in, vacuum and rebuild on the way out."""
        if self.db.pooler is not None:
            raise StoreError(
                f"bulk_load cannot run through a transaction-mode pooler ({self.db.url}, "
                "pooler=transaction): it holds a lock for the whole load, which only a server "
                "session keeps; open a PostgresStore on a direct URL to the server (its own "
                "host and port, without ?pooler=transaction) for the load, and keep the pooled "
                "URL for everything else")
        memory = check_int("maintenance_work_mem_mb", maintenance_work_mem_mb, 1, 2**31 - 1)
        workers = None if parallel_workers is None else check_int(
            "parallel_workers", parallel_workers, 0, 1024)

        def start(conn: Connection) -> None:
            self.db.set_meta(conn, _BULK_MARKER, json.dumps({"defer_fulltext": defer_fulltext}))
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {_HNSW_INDEX}")
            if defer_fulltext:
                conn.exec_driver_sql(f"DROP INDEX IF EXISTS {_GIN_INDEX}")
            self.db.log_lines(conn, [("bulk_load", None, None, None, {"phase": "start"})])

        with map_postgres_errors(self.db.url, "starting a bulk load"):
            holder = self.db.engine.connect()
        try:
            with map_postgres_errors(self.db.url, "starting a bulk load"):
                # Held for the whole load: tells other stores this loader is alive.
                holder.execute(text("SELECT pg_advisory_lock_shared(:k)"), {"k": _BULK_LOCK})
                holder.commit()
            try:
                self.db.run("starting a bulk load", start)
                yield
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
            with self.db.engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM memories")
        except (DBAPIError, PoolTimeoutError) as exc:
            logger.warning("%s: VACUUM after a bulk load failed (autovacuum will do it): %s",
                           self.db.url, exc)

    def rebuild_indexes(self, *, maintenance_work_mem_mb: int = 1024,
                        parallel_workers: int | None = None) -> list[str]:
        """Build the GIN and HNSW search indexes if they are missing; return those built.

        :meth:`bulk_load` calls this on its way out; call it yourself after a load was
        interrupted. Clears the bulk-load marker unless another load is still running.
        """
        memory = check_int("maintenance_work_mem_mb", maintenance_work_mem_mb, 1, 2**31 - 1)
        workers = None if parallel_workers is None else check_int(
            "parallel_workers", parallel_workers, 0, 1024)
        return self.db.run("rebuilding the search indexes",
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
        if _HNSW_INDEX not in present and embedding_settings(self.db.meta(conn)) is not None:
            conn.exec_driver_sql(self.columns.hnsw_ddl())
            built.append(_HNSW_INDEX)
        if alone:
            conn.execute(text("DELETE FROM htm_meta WHERE key = :k"), {"k": _BULK_MARKER})
        if built:
            conn.exec_driver_sql("ANALYZE memories")
        self.db.log_lines(conn, [("bulk_load", None, None, None,
                                 {"phase": "indexes built", "built": built})])
        return built

    def recover(self) -> None:
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

        marker, loading = self.db.read("reading the bulk-load marker", state)
        if marker is None or loading:
            return
        try:
            built = self.db.run("rebuilding the search indexes", lambda conn: self._rebuild(
                conn, 1024, None, abandoned_only=True))
        except StoreError as exc:
            logger.warning("%s: a bulk load's search indexes are missing and another process "
                           "is still building them (%s); searches are exact scans until it "
                           "ends, and the next store to open rebuilds them if it fails",
                           self.db.url, exc)
            return
        if built:
            logger.warning("%s: a bulk load ended without rebuilding its indexes; rebuilt %s",
                           self.db.url, ", ".join(built))
