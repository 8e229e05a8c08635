"""The worker: :class:`JobRunner` drains a :class:`~htm_core.jobs.queue.JobQueue` on
daemon threads, batched, rate-limited and retried with backoff (the whole design:
:mod:`htm_core.jobs`)."""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import HTMError, InvalidBudgetError, UnknownJobKindError, ValidationError
from ..validation import check_int
from .queue import FAILED, PENDING, RUNNING, Job, JobQueue, _check_kind
from .ratelimit import TokenBucket

__all__ = ["BatchHandler", "Handler", "JobRunner", "Usage"]

logger = logging.getLogger("htm_core.jobs")

Handler = Callable[[Job], None]


@dataclass(frozen=True)
class BatchHandler:
    """Marks a handler that takes all claimed jobs of its kind at once (one model request).

    The runner takes one rate-limit token per call. If it raises, every job in the call is
    retried (or failed) as if each had raised.
    """

    run: Callable[[list[Job]], None]


class Usage(Protocol):
    """Counters a runner adds to its stats (the enrichers' :class:`~htm_core.enrich.llm.LLMUsage`)."""

    def snapshot(self) -> dict[str, Any]:
        """The counters now, by name."""
        ...



class JobRunner:
    """Works through a :class:`JobQueue` on daemon threads (see :mod:`htm_core.jobs`).

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
        usage: counters added to stats() (the enrichers' shared
            :class:`~htm_core.enrich.llm.LLMUsage`).

    >>> from htm_core.jobs import InMemoryJobQueue
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
                 lease: float = 300.0, poll_interval: float = 1.0, usage: Usage | None = None,
                 name: str = "htm-enrich") -> None:
        check_int("workers", workers, 1, 32)
        check_int("batch_size", batch_size, 1, 1000)
        check_int("max_attempts", max_attempts, 1, 100)
        if not (0 < initial_backoff <= max_backoff) or lease <= 0 or poll_interval <= 0:
            raise InvalidBudgetError(
                "need 0 < initial_backoff <= max_backoff, lease > 0 and poll_interval > 0")
        if not handlers:
            raise ValidationError("give at least one handler (kind -> function)")
        self.queue = queue
        self.handlers = {_check_kind(kind): handler for kind, handler in handlers.items()}
        self._by_kind = "kinds" in inspect.signature(queue.counts).parameters
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
        """Jobs of this runner's kinds pending or running (every job, for a queue whose
        ``counts`` cannot tell kinds apart): other kinds are another runner's to wait for."""
        counts = self.queue.counts(kinds=sorted(self.handlers)) if self._by_kind \
            else self.queue.counts()
        return counts[PENDING] + counts[RUNNING]

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until no job of this runner's kinds is pending or running (failed ones
        excepted); ``False`` on timeout."""
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
