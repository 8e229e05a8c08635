"""Background enrichment jobs: a durable queue and a worker that drains it.

``add`` never calls a model. Instead the application queues a *job* (a kind such as
``tags``, the memory's key, and a JSON payload such as the memory's text) and a
:class:`JobRunner` works through the queue on daemon threads:

- **batched**: each worker claims up to ``batch_size`` jobs in one transaction;
- **rate-limited**: with ``requests_per_second``, a token bucket spaces the jobs out;
- **retried**: a job whose handler raises goes back to the queue with exponential backoff
  (``initial_backoff`` doubling up to ``max_backoff``) until ``max_attempts``, then it is
  kept as ``failed`` (never silently dropped; :meth:`JobQueue.requeue_failed` retries them);
- **counted**: :meth:`JobRunner.stats` reports jobs done, retried and failed, queue depth,
  time spent waiting on the rate limit, and model calls/tokens when given the enrichers'
  :class:`~htm_core.enrich.llm.LLMUsage`;
- **durable**: with :class:`SQLJobQueue` the jobs live in the table ``htm_jobs`` of any
  SQLAlchemy database (SQLite and PostgreSQL are tested). :meth:`JobRunner.stop` either
  drains the queue or leaves the rest in it; a claimed job carries a lease, and if its
  worker dies (killed, crashed) the job is claimed again once the lease runs out, by the
  next runner on that database in this process or another.

Delivery is *at least once*: a job whose worker died after the handler ran but before the
job was marked done runs again, so handlers must be idempotent (setting tags or importance
is; summaries use a key derived from their sources).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

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

from ..errors import HTMError, InvalidBudgetError, ValidationError
from ..validation import check_content, check_key
from .base import BatchTagger, ImportanceScorer, SummaryWriter, Tagger
from .errors import JobQueueError, UnknownJobKindError
from .llm import LLMUsage
from .ratelimit import TokenBucket

__all__ = [
    "IMPORTANCE",
    "SUMMARY",
    "TAGS",
    "BatchHandler",
    "InMemoryJobQueue",
    "Job",
    "JobQueue",
    "JobRunner",
    "SQLJobQueue",
    "enrichment_handlers",
    "importance_job",
    "summary_job",
    "tag_job",
]

logger = logging.getLogger(__name__)

#: Job kinds understood by :func:`enrichment_handlers`.
TAGS = "tags"
IMPORTANCE = "importance"
SUMMARY = "summary"

PENDING, RUNNING, FAILED = "pending", "running", "failed"


@dataclass(frozen=True, kw_only=True)
class Job:
    """One unit of background work, as claimed from a queue.

    ``attempts`` counts claims including this one; ``last_error`` is the previous failure.
    """

    id: int
    kind: str
    memory_key: str
    payload: dict[str, Any] = field(default_factory=dict)
    attempts: int = 0
    last_error: str | None = None


Handler = Callable[[Job], None]


@dataclass(frozen=True)
class BatchHandler:
    """Marks a handler that takes all claimed jobs of its kind at once (one model request).

    The runner takes one rate-limit token per call. If it raises, every job in the call is
    retried (or failed) as if each had raised.
    """

    run: Callable[[list[Job]], None]


def _check_kind(kind: Any) -> str:
    if not isinstance(kind, str) or not kind.strip() or len(kind) > 64:
        raise ValidationError(f"job kind must be a non-empty string of at most 64 characters, got {kind!r}")
    return kind


def _encode(payload: Mapping[str, Any] | None) -> str:
    try:
        return json.dumps(dict(payload or {}), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"job payload must be JSON-serialisable (str, numbers, lists, dicts): {exc}") \
            from None


@runtime_checkable
class JobQueue(Protocol):
    """Where jobs wait. ``claim`` hands each job to one worker at a time, under a lease."""

    def put(self, kind: str, memory_key: str, payload: Mapping[str, Any] | None = None, *,
            dedupe: bool = True) -> int:
        """Queue a job and return its id; with ``dedupe``, a pending job of the same kind and
        key gets the new payload instead (its id is returned)."""
        ...

    def put_many(self, jobs: Iterable[tuple[str, str, Mapping[str, Any] | None]], *,
                 dedupe: bool = True) -> list[int]:
        """Queue ``(kind, memory_key, payload)`` jobs in one transaction: all or none."""
        ...

    def claim(self, limit: int, *, lease: float, kinds: Sequence[str] | None = None) -> list[Job]:
        """Take up to ``limit`` ready jobs (of ``kinds``), each leased for ``lease`` seconds."""
        ...

    def complete(self, job_id: int) -> None:
        """The job is done: remove it."""
        ...

    def retry(self, job_id: int, error: str, delay: float) -> None:
        """The job failed this time; make it ready again after ``delay`` seconds."""
        ...

    def fail(self, job_id: int, error: str) -> None:
        """The job failed for good; keep it as ``failed``."""
        ...

    def release(self, job_ids: Sequence[int]) -> None:
        """Give claimed jobs that were never started back, without counting the attempt."""
        ...

    def renew(self, job_ids: Sequence[int], *, lease: float) -> list[int]:
        """Extend the lease of running jobs this queue claimed; returns the ids still held."""
        ...

    def counts(self) -> dict[str, int]:
        """Jobs per status: ``pending``, ``running``, ``failed``."""
        ...

    def failed(self, limit: int = 100) -> list[Job]:
        """The failed jobs, oldest first, with their last error."""
        ...

    def requeue_failed(self) -> int:
        """Make every failed job pending again (attempts reset); returns how many."""
        ...


# -- in memory -------------------------------------------------------------------------------


@dataclass
class _Row:
    id: int
    kind: str
    memory_key: str
    payload: str
    status: str = PENDING
    attempts: int = 0
    not_before: float = 0.0
    lease_until: float | None = None
    last_error: str | None = None

    def job(self) -> Job:
        return Job(id=self.id, kind=self.kind, memory_key=self.memory_key,
                   payload=json.loads(self.payload), attempts=self.attempts, last_error=self.last_error)


def _checked_jobs(jobs: Iterable[tuple[str, str, Mapping[str, Any] | None]]
                  ) -> list[tuple[str, str, str]]:
    return [(_check_kind(kind), check_key(key), _encode(payload)) for kind, key, payload in jobs]


class _PutOne:
    """``put`` as a one-job ``put_many`` (shared by the queues)."""

    def put(self, kind: str, memory_key: str, payload: Mapping[str, Any] | None = None, *,
            dedupe: bool = True) -> int:
        """Queue one job (see :meth:`JobQueue.put`)."""
        return self.put_many([(kind, memory_key, payload)], dedupe=dedupe)[0]

    def put_many(self, jobs: Iterable[tuple[str, str, Mapping[str, Any] | None]], *,
                 dedupe: bool = True) -> list[int]:
        raise NotImplementedError


class InMemoryJobQueue(_PutOne):
    """A :class:`JobQueue` in a dict: for tests and for processes that accept losing jobs.

    >>> queue = InMemoryJobQueue()
    >>> queue.put("tags", "m1", {"content": "hello"})
    1
    >>> [job.memory_key for job in queue.claim(10, lease=60)]
    ['m1']
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._rows: dict[int, _Row] = {}
        self._next = 1
        self._lock = threading.Lock()
        self._clock = clock

    def put_many(self, jobs: Iterable[tuple[str, str, Mapping[str, Any] | None]], *,
                 dedupe: bool = True) -> list[int]:
        checked = _checked_jobs(jobs)
        ids = []
        with self._lock:
            for kind, memory_key, body in checked:
                found = next((row for row in self._rows.values() if dedupe and row.status == PENDING
                              and row.kind == kind and row.memory_key == memory_key), None)
                if found is not None:
                    found.payload = body
                    ids.append(found.id)
                    continue
                row = _Row(self._next, kind, memory_key, body, not_before=self._clock())
                self._rows[row.id] = row
                self._next += 1
                ids.append(row.id)
        return ids

    def claim(self, limit: int, *, lease: float, kinds: Sequence[str] | None = None) -> list[Job]:
        now = self._clock()
        out: list[Job] = []
        with self._lock:
            for row in sorted(self._rows.values(), key=lambda r: r.id):
                if len(out) >= limit:
                    break
                if kinds is not None and row.kind not in kinds:
                    continue
                ready = (row.status == PENDING and row.not_before <= now) or (
                    row.status == RUNNING and row.lease_until is not None and row.lease_until < now)
                if ready:
                    row.status, row.attempts, row.lease_until = RUNNING, row.attempts + 1, now + lease
                    out.append(row.job())
        return out

    def complete(self, job_id: int) -> None:
        with self._lock:
            self._rows.pop(job_id, None)

    def retry(self, job_id: int, error: str, delay: float) -> None:
        with self._lock:
            row = self._rows[job_id]
            row.status, row.last_error = PENDING, error
            row.not_before, row.lease_until = self._clock() + delay, None

    def fail(self, job_id: int, error: str) -> None:
        with self._lock:
            row = self._rows[job_id]
            row.status, row.last_error, row.lease_until = FAILED, error, None

    def release(self, job_ids: Sequence[int]) -> None:
        with self._lock:
            for job_id in job_ids:
                row = self._rows.get(job_id)
                if row is not None and row.status == RUNNING:
                    row.status, row.attempts, row.lease_until = PENDING, max(0, row.attempts - 1), None

    def renew(self, job_ids: Sequence[int], *, lease: float) -> list[int]:
        now = self._clock()
        held = []
        with self._lock:
            for job_id in job_ids:
                row = self._rows.get(job_id)
                if row is not None and row.status == RUNNING:
                    row.lease_until = now + lease
                    held.append(job_id)
        return held

    def counts(self) -> dict[str, int]:
        with self._lock:
            out = dict.fromkeys((PENDING, RUNNING, FAILED), 0)
            for row in self._rows.values():
                out[row.status] += 1
            return out

    def failed(self, limit: int = 100) -> list[Job]:
        with self._lock:
            return [row.job() for row in sorted(self._rows.values(), key=lambda r: r.id)
                    if row.status == FAILED][:limit]

    def requeue_failed(self) -> int:
        with self._lock:
            rows = [row for row in self._rows.values() if row.status == FAILED]
            for row in rows:
                row.status, row.attempts, row.not_before = PENDING, 0, self._clock()
            return len(rows)


# -- SQL -------------------------------------------------------------------------------------

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
    Database errors raise :class:`~htm_core.enrich.errors.JobQueueError`.

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

    def counts(self) -> dict[str, int]:
        t = jobs_table.c

        def work(conn: Connection) -> dict[str, int]:
            out = dict.fromkeys((PENDING, RUNNING, FAILED), 0)
            for status, n in conn.execute(select(t.status, func.count()).group_by(t.status)):
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


# -- jobs for the built-in enrichers ----------------------------------------------------------


def _with_robot(payload: dict[str, Any], robot: str | None) -> dict[str, Any]:
    if robot is not None:
        payload["robot"] = check_key(robot)
    return payload


def tag_job(memory_key: str, content: str, *, robot: str | None = None
            ) -> tuple[str, str, dict[str, Any]]:
    """``(kind, memory_key, payload)`` asking for tags of ``content``; ``robot``: the robot
    the job is done for (its results are written as that robot's)."""
    return TAGS, check_key(memory_key), _with_robot({"content": check_content(content)}, robot)


def importance_job(memory_key: str, content: str, *, robot: str | None = None
                   ) -> tuple[str, str, dict[str, Any]]:
    """``(kind, memory_key, payload)`` asking for the importance of ``content`` (for ``robot``)."""
    return IMPORTANCE, check_key(memory_key), _with_robot({"content": check_content(content)},
                                                          robot)


def summary_job(source_keys: Sequence[str], texts: Sequence[str], *, robot: str | None = None
                ) -> tuple[str, str, dict[str, Any]]:
    """``(kind, summary_key, payload)`` asking for a summary of evicted memories.

    The summary's key is derived from its sources (``summary:<hash>``), so a job that runs
    twice writes the same memory. ``robot`` is the robot whose working memory evicted
    them: the summary becomes that robot's memory, whichever runner does the job.

    >>> summary_job(["m1", "m2"], ["a", "b"])[1]
    'summary:9a596d735a08fd02'
    """
    keys = [check_key(key) for key in source_keys]
    if not keys or len(keys) != len(texts):
        raise ValidationError("give one text per source key, and at least one")
    digest = hashlib.sha256("\x00".join(keys).encode()).hexdigest()[:16]
    return SUMMARY, f"summary:{digest}", _with_robot(
        {"source_keys": keys, "texts": [check_content(text) for text in texts]}, robot)


def enrichment_handlers(*, tagger: Tagger | None = None, scorer: ImportanceScorer | None = None,
                        summariser: SummaryWriter | None = None,
                        on_tags: Callable[[str, list[str]], None] | None = None,
                        on_importance: Callable[[str, float], None] | None = None,
                        on_summary: Callable[[str, str, list[str]], None] | None = None,
                        batch_tags: bool = False,
                        with_robot: bool = False) -> dict[str, Handler | BatchHandler]:
    """Handlers for :class:`JobRunner` that run the enrichers and hand results to callbacks.

    - ``tags`` jobs: ``on_tags(memory_key, tags)`` with ``tagger.tag(content)``;
    - ``importance`` jobs: ``on_importance(memory_key, value)`` with ``scorer.score(content)``;
    - ``summary`` jobs: ``on_summary(summary_key, summary, source_keys)`` with
      ``summariser.summarise(texts)``.

    With ``batch_tags`` (and a tagger that is also a :class:`~htm_core.enrich.base.BatchTagger`,
    as :class:`~htm_core.enrich.LLMTagger` is), the tag jobs of one claimed batch go to the
    model in a single request.

    With ``with_robot`` every callback also gets ``robot=``: the robot the job was queued
    for (``None`` for a job queued without one), so a runner shared by several robots
    writes each result as the robot that caused it.

    A kind is handled only when both its enricher and its callback are given. An enricher
    that raises (for instance ``InvalidModelOutputError``) calls no callback; the runner
    retries the job.
    """
    handlers: dict[str, Handler | BatchHandler] = {}
    if (tagger is None) != (on_tags is None) or (scorer is None) != (on_importance is None) \
            or (summariser is None) != (on_summary is None):
        raise ValidationError("give each enricher together with its callback (tagger with on_tags, "
                              "scorer with on_importance, summariser with on_summary)")
    def by(job: Job) -> dict[str, Any]:
        return {"robot": job.payload.get("robot")} if with_robot else {}

    if tagger is not None and on_tags is not None:
        tag, apply_tags = tagger.tag, on_tags
        tag_many = tagger.tag_many if batch_tags and isinstance(tagger, BatchTagger) else None
        if tag_many is not None:
            def run_tag_batch(jobs: list[Job]) -> None:
                results = tag_many([job.payload["content"] for job in jobs])
                for job, tags in zip(jobs, results, strict=True):
                    apply_tags(job.memory_key, list(tags), **by(job))

            handlers[TAGS] = BatchHandler(run_tag_batch)
        else:
            def run_tags(job: Job) -> None:
                apply_tags(job.memory_key, list(tag(job.payload["content"])), **by(job))

            handlers[TAGS] = run_tags
    if scorer is not None and on_importance is not None:
        score, apply_importance = scorer.score, on_importance

        def run_importance(job: Job) -> None:
            apply_importance(job.memory_key, float(score(job.payload["content"])), **by(job))

        handlers[IMPORTANCE] = run_importance
    if summariser is not None and on_summary is not None:
        summarise, apply_summary = summariser.summarise, on_summary

        def run_summary(job: Job) -> None:
            apply_summary(job.memory_key, summarise(job.payload["texts"]),
                          list(job.payload["source_keys"]), **by(job))

        handlers[SUMMARY] = run_summary
    return handlers


# -- the runner ------------------------------------------------------------------------------


class JobRunner:
    """Works through a :class:`JobQueue` on daemon threads; see the module docstring.

    Args:
        queue: where the jobs are (:class:`SQLJobQueue` to survive restarts).
        handlers: kind -> function run with each job of that kind (must be idempotent).
            Jobs of other kinds are left in the queue for a runner that handles them.
        workers: threads (1-32).
        batch_size: jobs claimed per transaction.
        requests_per_second: at most this many jobs start per second (a token bucket of
            ``burst``); ``None``: no limit.
        max_attempts: tries before a job is kept as failed.
        initial_backoff / max_backoff: seconds before a failed job is tried again, doubling.
        lease: seconds a claimed job belongs to its worker; a job whose worker died is
            claimed again after that. Keep it above the longest job.
        poll_interval: how often an idle worker looks for jobs queued by other processes.
        usage: the enrichers' shared :class:`~htm_core.enrich.llm.LLMUsage`, added to stats().

    >>> seen = []
    >>> runner = JobRunner(InMemoryJobQueue(), {"echo": lambda job: seen.append(job.memory_key)})
    >>> runner.start()
    >>> _ = runner.submit("echo", "m1")
    >>> runner.stop(drain=True, timeout=5)
    True
    >>> seen
    ['m1']
    """

    def __init__(self, queue: JobQueue, handlers: Mapping[str, Handler | BatchHandler], *,
                 workers: int = 1,
                 batch_size: int = 8, requests_per_second: float | None = None, burst: float = 1.0,
                 max_attempts: int = 5, initial_backoff: float = 1.0, max_backoff: float = 300.0,
                 lease: float = 300.0, poll_interval: float = 1.0, usage: LLMUsage | None = None,
                 name: str = "htm-enrich") -> None:
        for label, value, low, high in (("workers", workers, 1, 32), ("batch_size", batch_size, 1, 1000),
                                        ("max_attempts", max_attempts, 1, 100)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidBudgetError(f"{label} must be an integer from {low} to {high}, got {value!r}")
        if not (0 < initial_backoff <= max_backoff) or lease <= 0 or poll_interval <= 0:
            raise InvalidBudgetError(
                "need 0 < initial_backoff <= max_backoff, lease > 0 and poll_interval > 0")
        if not handlers:
            raise ValidationError("give at least one handler (kind -> function)")
        self.queue = queue
        self.handlers = {_check_kind(kind): handler for kind, handler in handlers.items()}
        self.limiter = TokenBucket(requests_per_second, burst) if requests_per_second is not None else None
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.lease = lease
        self.poll_interval = poll_interval
        self.usage = usage
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        self._counts = dict.fromkeys(("completed", "retried", "failed", "queue_errors"), 0)
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True)
                         for i in range(workers)]
        self._started = False

    # -- control ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the workers; jobs left by earlier runs are picked up at once."""
        if self._started:
            return
        self._started = True
        for thread in self._threads:
            thread.start()

    def submit(self, kind: str, memory_key: str, payload: Mapping[str, Any] | None = None) -> int:
        """Queue a job (deduplicated against a pending one of the same kind and key) and wake a worker."""
        if kind not in self.handlers:
            raise UnknownJobKindError(
                f"no handler for job kind {kind!r}; this runner handles {sorted(self.handlers)}")
        job_id = self.queue.put(kind, memory_key, payload)
        self._wake.set()
        return job_id

    def submit_many(self, jobs: Iterable[tuple[str, str, Mapping[str, Any] | None]]) -> list[int]:
        """Queue several ``(kind, memory_key, payload)`` jobs (e.g. from :func:`tag_job`) in one
        transaction, and wake a worker."""
        jobs = list(jobs)
        unknown = sorted({kind for kind, _, _ in jobs} - set(self.handlers))
        if unknown:
            raise UnknownJobKindError(
                f"no handler for job kinds {unknown}; this runner handles {sorted(self.handlers)}")
        ids = self.queue.put_many(jobs)
        self._wake.set()
        return ids

    def _outstanding(self) -> int:
        counts = self.queue.counts()
        return counts[PENDING] + counts[RUNNING]

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until no job is pending or running (failed ones excepted); ``False`` on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._outstanding() == 0:
                with self._lock:
                    if self._busy == 0:
                        return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self._wake.set()
            time.sleep(0.02)

    def stop(self, *, drain: bool = False, timeout: float | None = None) -> bool:
        """Stop the workers. ``drain``: first wait (up to ``timeout``) for the queue to empty.

        Without draining, jobs in flight finish, claimed ones not yet started are given back,
        and the rest stay queued for the next runner. Returns ``True`` when everything that
        was asked for finished in time.
        """
        drained = self.flush(timeout) if drain and self._started else True
        self._stopping.set()
        self._wake.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            if thread.is_alive():
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return drained and not any(thread.is_alive() for thread in self._threads)

    def __enter__(self) -> JobRunner:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stats(self) -> dict[str, Any]:
        """Counters, as a dict.

        By this runner: ``completed``, ``retried``, ``failed``, ``queue_errors`` (database
        failures). In the queue: ``pending``, ``running``, ``failed_in_queue``. The time
        spent waiting on the rate limit: ``rate_limit_wait_s``. With ``usage``: the model's
        ``calls``, ``input_tokens``, ``output_tokens``, ``invalid_outputs``, ``errors``,
        ``succeeded``, ``gave_up``.
        """
        with self._lock:
            out: dict[str, Any] = dict(self._counts)
        try:
            counts = self.queue.counts()
            out.update(pending=counts[PENDING], running=counts[RUNNING], failed_in_queue=counts[FAILED])
        except HTMError as exc:
            out["queue_error"] = str(exc)
        out["rate_limit_wait_s"] = round(self.limiter.waited, 3) if self.limiter else 0.0
        if self.usage is not None:
            out.update(self.usage.snapshot())
        return out

    # -- the workers -----------------------------------------------------------------------

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _run(self) -> None:
        queue_backoff = self.initial_backoff
        kinds = sorted(self.handlers)
        while not self._stopping.is_set():
            with self._lock:
                self._busy += 1
            try:
                try:
                    batch = self.queue.claim(self.batch_size, lease=self.lease, kinds=kinds)
                    if batch:
                        self._run_batch(batch, claimed_at=time.monotonic())
                        queue_backoff = self.initial_backoff
                except HTMError as exc:
                    # the queue's database failed (claim or bookkeeping): jobs already claimed
                    # keep their lease and are claimed again when it runs out
                    self._count("queue_errors")
                    logger.warning("job queue unavailable, retrying in %.1fs: %s", queue_backoff, exc)
                    batch = None
            finally:
                with self._lock:
                    self._busy -= 1
            if batch is None:
                self._stopping.wait(queue_backoff)
                queue_backoff = min(self.max_backoff, queue_backoff * 2)
            elif not batch:
                self._wake.wait(self.poll_interval)
                self._wake.clear()

    def _run_batch(self, batch: list[Job], *, claimed_at: float) -> None:
        groups: list[list[Job]] = []
        batched: dict[str, list[Job]] = {}
        for job in batch:
            if isinstance(self.handlers[job.kind], BatchHandler):
                if job.kind not in batched:
                    batched[job.kind] = []
                    groups.append(batched[job.kind])
                batched[job.kind].append(job)
            else:
                groups.append([job])
        for i, group in enumerate(groups):
            if self._stopping.is_set() or (
                    self.limiter is not None and not self.limiter.acquire(cancel=self._stopping)):
                self.queue.release([job.id for later in groups[i:] for job in later])
                return
            if time.monotonic() - claimed_at > self.lease / 2:
                # a long batch: keep the rest of it, or another runner would take it over
                held = set(self.queue.renew([job.id for later in groups[i:] for job in later],
                                            lease=self.lease))
                claimed_at = time.monotonic()
                group = [job for job in group if job.id in held]
                if not group:
                    continue
            handler = self.handlers[group[0].kind]
            try:
                if isinstance(handler, BatchHandler):
                    handler.run(group)
                else:
                    handler(group[0])
            except Exception as exc:  # a handler's failure is the job's, never the worker's
                for job in group:
                    self._after_failure(job, exc)
                continue
            for job in group:
                self.queue.complete(job.id)
                self._count("completed")

    def _after_failure(self, job: Job, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"
        if job.attempts >= self.max_attempts:
            logger.error("job %s (%s %s) failed for good after %d attempts: %s",
                         job.id, job.kind, job.memory_key, job.attempts, error)
            self.queue.fail(job.id, error)
            self._count("failed")
            return
        delay = min(self.max_backoff, self.initial_backoff * 2 ** (job.attempts - 1))
        logger.info("job %s (%s %s) failed (attempt %d), retrying in %.1fs: %s",
                    job.id, job.kind, job.memory_key, job.attempts, delay, error)
        self.queue.retry(job.id, error, delay)
        self._count("retried")
