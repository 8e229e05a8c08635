"""Background jobs: a durable queue and a worker that drains it, for any subsystem.

``add`` never calls a model: the application queues a *job* (a kind, a memory's key, a
JSON payload) and a :class:`JobRunner` works through the queue on daemon threads, batched,
rate-limited, retried with backoff and counted; with :class:`SQLJobQueue` the jobs live in
the table ``htm_jobs`` and survive restarts and killed workers (delivery is at least once).
Parts: :mod:`.queue` (the job, the protocol, the queue in memory), :mod:`.sql`,
:mod:`.runner`, :mod:`.ratelimit`. The enrichers' jobs: :mod:`htm_core.enrich.kinds`.
How it behaves, its table and its figures: docs/enrichment.md ("Background jobs").
"""

from .queue import InMemoryJobQueue, Job, JobQueue
from .ratelimit import TokenBucket
from .runner import BatchHandler, Handler, JobRunner, Usage
from .sql import SQLJobQueue, job_queue_on, jobs_table

__all__ = [
    "BatchHandler",
    "Handler",
    "InMemoryJobQueue",
    "Job",
    "JobQueue",
    "JobRunner",
    "SQLJobQueue",
    "TokenBucket",
    "Usage",
    "job_queue_on",
    "jobs_table",
]
