"""Background jobs: a durable queue and a worker that drains it.

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

The parts: :mod:`~htm_core.jobs.queue` (the job, the queue protocol, the queue in
memory), :mod:`~htm_core.jobs.sql` (the durable queue), :mod:`~htm_core.jobs.runner` (the
worker) and :mod:`~htm_core.jobs.ratelimit` (the token bucket). The enrichers' jobs and
handlers are in :mod:`htm_core.enrich.kinds`; a store hands out a queue on its own database
(``open_job_queue``).
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
