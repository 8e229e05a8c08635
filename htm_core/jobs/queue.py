"""The job queue: what a job is, the :class:`JobQueue` protocol, and a queue in memory.

A queue hands each job to one worker at a time under a lease; the durable queue on a
database is :class:`~htm_core.jobs.sql.SQLJobQueue`, the worker
:class:`~htm_core.jobs.runner.JobRunner` (the whole design: :mod:`htm_core.jobs`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import ValidationError
from ..validation import check_key

__all__ = ["FAILED", "PENDING", "RUNNING", "InMemoryJobQueue", "Job", "JobQueue"]

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

    def counts(self, kinds: Sequence[str] | None = None) -> dict[str, int]:
        """Jobs per status: ``pending``, ``running``, ``failed`` (only jobs of ``kinds``
        when given)."""
        ...

    def failed(self, limit: int = 100) -> list[Job]:
        """The failed jobs, oldest first, with their last error."""
        ...

    def requeue_failed(self) -> int:
        """Make every failed job pending again (attempts reset); returns how many."""
        ...


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

    def counts(self, kinds: Sequence[str] | None = None) -> dict[str, int]:
        with self._lock:
            out = dict.fromkeys((PENDING, RUNNING, FAILED), 0)
            for row in self._rows.values():
                if kinds is None or row.kind in kinds:
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

