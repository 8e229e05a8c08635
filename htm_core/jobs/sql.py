"""The durable job queue: :class:`SQLJobQueue`, jobs in the table ``htm_jobs`` of a
SQLAlchemy database (SQLite or PostgreSQL), and :func:`job_queue_on`, the queue a store
hands out for its own database."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    delete,
    false,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from ..errors import JobQueueError
from .queue import FAILED, PENDING, RUNNING, InMemoryJobQueue, Job, JobQueue, _checked_jobs, _PutOne

__all__ = ["SQLJobQueue", "job_queue_on", "jobs_table"]

_metadata = MetaData()
jobs_table = Table(
    "htm_jobs", _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(64), nullable=False),
    Column("memory_key", String(255), nullable=False),
    Column("payload", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("not_before", Float, nullable=False),
    Column("lease_until", Float),
    Column("claimed_by", String(64)),
    Column("last_error", Text),
    Column("created_at", Float, nullable=False),
    Index("htm_jobs_ready", "status", "not_before"),
    Index("htm_jobs_kind_key", "kind", "memory_key"),
)


class SQLJobQueue(_PutOne):
    """A durable :class:`JobQueue` in the table ``htm_jobs`` (created if missing).

    Any SQLAlchemy 2 ``Engine`` works; it can be the store's own engine (for an in-memory
    SQLite store use :class:`InMemoryJobQueue` instead). Claims are safe across threads and
    processes: on SQLite inside a transaction that takes the write lock first, elsewhere with
    ``SELECT ... FOR UPDATE SKIP LOCKED`` (PostgreSQL), so two workers never hold the same job.
    Database errors raise :class:`~htm_core.errors.JobQueueError`.

    >>> from sqlalchemy import create_engine
    >>> queue = SQLJobQueue(create_engine("sqlite://"))
    >>> job_id = queue.put("tags", "m1", {"content": "Postgres is slow"})
    >>> queue.counts()
    {'pending': 1, 'running': 0, 'failed': 0}
    """

    def __init__(self, engine: Engine, *, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self._clock = clock
        self._token = uuid.uuid4().hex
        self._sqlite = engine.dialect.name == "sqlite"
        try:
            _metadata.create_all(engine, checkfirst=True)
        except SQLAlchemyError as exc:
            if not self._table_exists():  # another process may have created it meanwhile
                raise JobQueueError(f"cannot create the job table htm_jobs: {exc}") from exc

    @classmethod
    def from_url(cls, url: str, *, clock: Callable[[], float] = time.time) -> SQLJobQueue:
        """A queue on its own engine for ``url`` (``sqlite:///path`` or ``postgresql+psycopg://``).

        On SQLite the engine's connections use WAL, ``synchronous=NORMAL`` and a 5 s busy
        timeout: a ``put`` then costs well under a millisecond instead of an fsync per job.
        Close it with :meth:`close`.
        """
        from sqlalchemy import create_engine, event

        try:
            engine = create_engine(url)
        except (SQLAlchemyError, ValueError) as exc:
            raise JobQueueError(f"cannot open the job queue at {url!r}: {exc}") from exc
        if engine.dialect.name == "sqlite":
            @event.listens_for(engine, "connect")
            def _pragmas(dbapi_connection: Any, _record: Any) -> None:
                cursor = dbapi_connection.cursor()
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.execute("PRAGMA busy_timeout=5000")
                cursor.close()

        return cls(engine, clock=clock)

    def close(self) -> None:
        """Dispose of the engine's connections (for queues made by :meth:`from_url`)."""
        self.engine.dispose()

    def _table_exists(self) -> bool:
        try:
            with self.engine.connect() as conn:
                return bool(self.engine.dialect.has_table(conn, "htm_jobs"))
        except SQLAlchemyError:
            return False

    def _write(self, work: Callable[[Connection], Any]) -> Any:
        """Run ``work`` in a transaction that holds the write lock from its first statement.

        On SQLite the transaction opens with a write that matches no row, which takes the
        database's write lock at once (waiting up to the busy timeout), so the reads that
        follow cannot go stale before the update. This works whatever ``BEGIN`` the engine
        issues (pysqlite's implicit one, or an engine listener's own, as the SQLite store's).
        """
        try:
            with self.engine.begin() as conn:
                if self._sqlite:
                    conn.execute(update(jobs_table).where(false()).values(id=jobs_table.c.id))
                return work(conn)
        except SQLAlchemyError as exc:
            raise JobQueueError(f"the job queue failed: {exc}") from exc

    def _read(self, work: Callable[[Connection], Any]) -> Any:
        try:
            with self.engine.connect() as conn:
                return work(conn)
        except SQLAlchemyError as exc:
            raise JobQueueError(f"the job queue failed: {exc}") from exc

    def put_many(self, jobs: Iterable[tuple[str, str, Mapping[str, Any] | None]], *,
                 dedupe: bool = True) -> list[int]:
        checked = _checked_jobs(jobs)
        if not checked:
            return []
        t = jobs_table.c

        def work(conn: Connection) -> list[int]:
            now = self._clock()
            ids = []
            for kind, memory_key, body in checked:
                if dedupe:
                    existing = conn.execute(
                        select(t.id).where(t.kind == kind, t.memory_key == memory_key,
                                           t.status == PENDING).order_by(t.id).limit(1)).scalar()
                    if existing is not None:
                        conn.execute(update(jobs_table).where(t.id == existing).values(payload=body))
                        ids.append(int(existing))
                        continue
                result = conn.execute(insert(jobs_table).values(
                    kind=kind, memory_key=memory_key, payload=body, status=PENDING, attempts=0,
                    not_before=now, created_at=now).returning(t.id))
                ids.append(int(result.scalar_one()))
            return ids

        return list(self._write(work))

    def claim(self, limit: int, *, lease: float, kinds: Sequence[str] | None = None) -> list[Job]:
        t = jobs_table.c
        now = self._clock()
        ready = or_(and_(t.status == PENDING, t.not_before <= now),
                    and_(t.status == RUNNING, t.lease_until < now))
        query = select(t.id).where(ready)
        if kinds is not None:
            query = query.where(t.kind.in_(list(kinds)))
        query = query.order_by(t.id).limit(limit)
        if not self._sqlite:
            query = query.with_for_update(skip_locked=True)

        def work(conn: Connection) -> list[Job]:
            ids = list(conn.execute(query).scalars())
            if not ids:
                return []
            conn.execute(update(jobs_table).where(t.id.in_(ids), ready).values(
                status=RUNNING, attempts=t.attempts + 1, lease_until=now + lease,
                claimed_by=self._token))
            rows = conn.execute(select(jobs_table).where(t.id.in_(ids)).order_by(t.id)).mappings()
            return [Job(id=row["id"], kind=row["kind"], memory_key=row["memory_key"],
                        payload=json.loads(row["payload"]), attempts=row["attempts"],
                        last_error=row["last_error"]) for row in rows]

        return list(self._write(work))

    def complete(self, job_id: int) -> None:
        self._write(lambda conn: conn.execute(delete(jobs_table).where(jobs_table.c.id == job_id)))

    def retry(self, job_id: int, error: str, delay: float) -> None:
        self._write(lambda conn: conn.execute(update(jobs_table).where(jobs_table.c.id == job_id).values(
            status=PENDING, last_error=error[:2000], not_before=self._clock() + delay, lease_until=None)))

    def fail(self, job_id: int, error: str) -> None:
        self._write(lambda conn: conn.execute(update(jobs_table).where(jobs_table.c.id == job_id).values(
            status=FAILED, last_error=error[:2000], lease_until=None)))

    def release(self, job_ids: Sequence[int]) -> None:
        if not job_ids:
            return
        t = jobs_table.c
        self._write(lambda conn: conn.execute(
            update(jobs_table).where(t.id.in_(list(job_ids)), t.status == RUNNING,
                                     t.claimed_by == self._token).values(
                status=PENDING, lease_until=None, attempts=func.max(t.attempts - 1, 0)
                if self._sqlite else func.greatest(t.attempts - 1, 0))))

    def renew(self, job_ids: Sequence[int], *, lease: float) -> list[int]:
        if not job_ids:
            return []
        t = jobs_table.c
        now = self._clock()
        mine = and_(t.id.in_(list(job_ids)), t.status == RUNNING, t.claimed_by == self._token)

        def work(conn: Connection) -> list[int]:
            conn.execute(update(jobs_table).where(mine).values(lease_until=now + lease))
            return sorted(conn.execute(select(t.id).where(mine)).scalars())

        return list(self._write(work))

    def counts(self, kinds: Sequence[str] | None = None) -> dict[str, int]:
        t = jobs_table.c
        query = select(t.status, func.count()).group_by(t.status)
        if kinds is not None:
            query = query.where(t.kind.in_(list(kinds)))

        def work(conn: Connection) -> dict[str, int]:
            out = dict.fromkeys((PENDING, RUNNING, FAILED), 0)
            for status, n in conn.execute(query):
                out[status] = int(n)
            return out

        return dict(self._read(work))

    def failed(self, limit: int = 100) -> list[Job]:
        t = jobs_table.c

        def work(conn: Connection) -> list[Job]:
            rows = conn.execute(select(jobs_table).where(t.status == FAILED).order_by(t.id)
                                .limit(limit)).mappings()
            return [Job(id=row["id"], kind=row["kind"], memory_key=row["memory_key"],
                        payload=json.loads(row["payload"]), attempts=row["attempts"],
                        last_error=row["last_error"]) for row in rows]

        return list(self._read(work))

    def requeue_failed(self) -> int:
        t = jobs_table.c
        return int(self._write(lambda conn: conn.execute(
            update(jobs_table).where(t.status == FAILED).values(
                status=PENDING, attempts=0, not_before=self._clock())).rowcount))


def job_queue_on(engine: Engine) -> JobQueue:
    """The job queue for a store on ``engine``: a :class:`SQLJobQueue` on the store's own
    database, or an :class:`InMemoryJobQueue` when that database is an in-memory SQLite one
    (which the queue's connections could not share)."""
    if str(engine.url) in ("sqlite://", "sqlite:///:memory:"):
        return InMemoryJobQueue()
    return SQLJobQueue(engine)
