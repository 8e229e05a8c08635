"""The job queue (in memory, SQLite file, PostgreSQL) and the JobRunner over it.

SQL queues run on real databases: a SQLite file and the session's PostgreSQL (pgserver),
each test on a fresh database. The "killed worker" tests kill a real child process with
SIGKILL in the middle of its jobs.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from htm_core.enrich import (
    InMemoryJobQueue,
    Job,
    JobQueue,
    JobQueueError,
    JobRunner,
    LLMTagger,
    LLMUsage,
    SQLJobQueue,
    Summariser,
    UnknownJobKindError,
    enrichment_handlers,
    summary_job,
    tag_job,
)
from htm_core.errors import InvalidBudgetError, InvalidKeyError, ValidationError

REPO = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _database(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'jobs.db'}"
        return
    from htm_core.store.postgres import postgres_url
    from tests.pg import fresh_database

    for url in fresh_database(request.getfixturevalue("postgres_server_url")):
        yield postgres_url(url)


def _engines(url: str) -> Iterator[Callable[[], Engine]]:
    made: list[Engine] = []

    def make() -> Engine:
        engine = create_engine(url)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database URL: a SQLite file, or a new database on the session's PostgreSQL."""
    yield from _database(request.param, request, tmp_path)


@pytest.fixture
def engines(db_url: str) -> Iterator[Callable[[], Engine]]:
    """Make engines on ``db_url`` (each stands for a separate process); all disposed after."""
    yield from _engines(db_url)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., JobQueue]]:
    """Queues of each kind; for SQL, every call is a new engine on the same database."""
    if request.param == "memory":
        shared: dict[str, InMemoryJobQueue] = {}

        def memory(clock: Callable[[], float] = time.time) -> JobQueue:
            return shared.setdefault("q", InMemoryJobQueue(clock=clock))

        yield memory
        return
    for url in _database(request.param, request, tmp_path):
        for engines in _engines(url):

            def sql(clock: Callable[[], float] = time.time,
                    make: Callable[[], Engine] = engines) -> JobQueue:
                return SQLJobQueue(make(), clock=clock)

            yield sql


# -- the queue contract ----------------------------------------------------------------------

def test_put_claim_complete(make_queue: Callable[..., JobQueue]) -> None:
    queue = make_queue()
    assert isinstance(queue, JobQueue)
    first = queue.put("tags", "m1", {"content": "Straße – 東京 ✓"})
    second = queue.put("importance", "m1", {"content": "x"})
    assert queue.counts() == {"pending": 2, "running": 0, "failed": 0}
    jobs = queue.claim(10, lease=60)
    assert [(j.id, j.kind, j.attempts) for j in jobs] == [(first, "tags", 1), (second, "importance", 1)]
    assert jobs[0].payload == {"content": "Straße – 東京 ✓"}
    assert queue.claim(10, lease=60) == []  # all leased
    assert queue.counts()["running"] == 2
    queue.complete(first)
    queue.complete(second)
    assert queue.counts() == {"pending": 0, "running": 0, "failed": 0}


def test_dedupe_updates_pending_job(make_queue: Callable[..., JobQueue]) -> None:
    queue = make_queue()
    a = queue.put("tags", "m1", {"content": "old"})
    b = queue.put("tags", "m1", {"content": "new"})
    assert a == b
    c = queue.put("tags", "m1", {"content": "again"}, dedupe=False)
    assert c != a
    jobs = queue.claim(10, lease=60)
    assert [j.payload["content"] for j in jobs] == ["new", "again"]
    # a running job is not a duplicate: editing the memory again queues a new job
    assert queue.put("tags", "m1", {"content": "edited"}) not in (a, c)


def test_put_many_is_one_all_or_nothing_batch(make_queue: Callable[..., JobQueue]) -> None:
    queue = make_queue()
    with pytest.raises(ValidationError):
        queue.put_many([tag_job("m1", "fine"), ("tags", "m2", {"bad": {1, 2}})])
    assert queue.counts()["pending"] == 0  # the valid first job was not queued either
    ids = queue.put_many([tag_job("m1", "one"), tag_job("m2", "two"), tag_job("m1", "one, edited")])
    assert ids[0] == ids[2] and len(set(ids)) == 2  # deduplicated inside the batch too
    assert [j.payload["content"] for j in queue.claim(5, lease=60)] == ["one, edited", "two"]
    assert queue.put_many([]) == []


def test_claim_only_requested_kinds(make_queue: Callable[..., JobQueue]) -> None:
    queue = make_queue()
    queue.put("tags", "m1")
    queue.put("summary", "s1")
    assert [j.kind for j in queue.claim(10, lease=60, kinds=["summary"])] == ["summary"]
    assert queue.counts() == {"pending": 1, "running": 1, "failed": 0}


def test_expired_lease_is_claimed_again(make_queue: Callable[..., JobQueue]) -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    job_id = queue.put("tags", "m1")
    assert queue.claim(1, lease=30)[0].attempts == 1
    clock.now += 29
    assert queue.claim(1, lease=30) == []
    clock.now += 2
    again = queue.claim(1, lease=30)
    assert [(j.id, j.attempts) for j in again] == [(job_id, 2)]


def test_retry_waits_fail_keeps_requeue_restores(make_queue: Callable[..., JobQueue]) -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    job_id = queue.put("tags", "m1", {"content": "x"})
    queue.claim(1, lease=30)
    queue.retry(job_id, "ModelCallError: timeout", delay=10)
    assert queue.claim(1, lease=30) == []
    clock.now += 10
    job = queue.claim(1, lease=30)[0]
    assert (job.attempts, job.last_error) == (2, "ModelCallError: timeout")
    queue.fail(job_id, "InvalidModelOutputError: gave up")
    assert queue.counts() == {"pending": 0, "running": 0, "failed": 1}
    assert [(j.id, j.last_error) for j in queue.failed()] == [(job_id, "InvalidModelOutputError: gave up")]
    assert queue.requeue_failed() == 1
    assert queue.claim(1, lease=30)[0].attempts == 1


def test_release_gives_back_without_counting(make_queue: Callable[..., JobQueue]) -> None:
    queue = make_queue()
    ids = [queue.put("tags", f"m{i}") for i in range(3)]
    queue.claim(3, lease=60)
    queue.release(ids[1:])
    assert queue.counts() == {"pending": 2, "running": 1, "failed": 0}
    assert [(j.id, j.attempts) for j in queue.claim(5, lease=60)] == [(ids[1], 1), (ids[2], 1)]


def test_bad_jobs_rejected(make_queue: Callable[..., JobQueue]) -> None:
    queue = make_queue()
    with pytest.raises(ValidationError, match="JSON"):
        queue.put("tags", "m1", {"when": object()})
    with pytest.raises(InvalidKeyError):
        queue.put("tags", "")
    with pytest.raises(ValidationError, match="kind"):
        queue.put("", "m1")
    assert queue.counts()["pending"] == 0


def test_sql_queue_survives_reopen(engines: Callable[[], Engine]) -> None:
    SQLJobQueue(engines()).put("tags", "m1", {"content": "kept"})
    again = SQLJobQueue(engines())  # a later process: the table exists, the job is there
    assert [j.payload for j in again.claim(5, lease=60)] == [{"content": "kept"}]


def test_concurrent_claims_never_share_a_job(engines: Callable[[], Engine]) -> None:
    """Four workers, each with its own engine (as separate processes would have)."""
    producer = SQLJobQueue(engines())
    for i in range(120):
        producer.put("tags", f"m{i}")
    queues = [SQLJobQueue(engines()) for _ in range(4)]
    claimed: list[list[int]] = [[] for _ in queues]

    def work(n: int) -> None:
        while batch := queues[n].claim(4, lease=60):
            claimed[n].extend(job.id for job in batch)
            for job in batch:
                queues[n].complete(job.id)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    every = [job_id for ids in claimed for job_id in ids]
    assert len(every) == 120 and len(set(every)) == 120
    assert producer.counts() == {"pending": 0, "running": 0, "failed": 0}


def test_unreachable_database_raises_job_queue_error(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'missing-dir' / 'jobs.db'}")
    with pytest.raises(JobQueueError, match="htm_jobs") as info:
        SQLJobQueue(engine)
    assert info.value.__cause__ is not None


# -- the runner ------------------------------------------------------------------------------

def test_runner_applies_results_and_counts(make_queue: Callable[..., JobQueue]) -> None:
    queue = make_queue()
    usage = LLMUsage()
    tags: dict[str, list[str]] = {}
    summaries: list[tuple[str, str, list[str]]] = []
    tagger = LLMTagger(FakeListChatModel(responses=["no idea", '["database:postgresql"]']), usage=usage)
    summariser = Summariser(FakeListChatModel(responses=["Alice picked Postgres."]), usage=usage)
    handlers = enrichment_handlers(tagger=tagger, on_tags=tags.__setitem__,
                                   summariser=summariser, on_summary=lambda *a: summaries.append(a))
    runner = JobRunner(queue, handlers, usage=usage, initial_backoff=0.01, poll_interval=0.05)
    with runner:
        runner.submit(*tag_job("m1", "psql"))
        runner.submit(*summary_job(["m1", "m2"], ["Alice: Postgres?", "Bob: yes"]))
        assert runner.flush(timeout=20)
    assert tags == {"m1": ["database:postgresql"]}
    assert summaries == [(summary_job(["m1", "m2"], ["a", "b"])[1], "Alice picked Postgres.", ["m1", "m2"])]
    stats = runner.stats()
    assert (stats["completed"], stats["retried"], stats["failed"]) == (2, 0, 0)
    assert (stats["calls"], stats["invalid_outputs"], stats["pending"]) == (3, 1, 0)


def test_malformed_output_retried_with_backoff_then_failed_never_stored(
        make_queue: Callable[..., JobQueue]) -> None:
    queue = make_queue()
    stored: dict[str, list[str]] = {}
    tagger = LLMTagger(FakeListChatModel(responses=["tags: python, pytest"]), max_retries=1)
    runner = JobRunner(queue, enrichment_handlers(tagger=tagger, on_tags=stored.__setitem__),
                       usage=tagger.usage, max_attempts=3, initial_backoff=0.01, poll_interval=0.02)
    with runner:
        runner.submit(*tag_job("m1", "pytest"))
        assert runner.flush(timeout=20)
    assert stored == {}
    stats = runner.stats()
    assert (stats["retried"], stats["failed"], stats["failed_in_queue"]) == (2, 1, 1)
    assert stats["invalid_outputs"] == 6 and stats["gave_up"] == 3
    (failed,) = queue.failed()
    assert failed.attempts == 3 and failed.last_error.startswith("InvalidModelOutputError")


def test_transient_failures_back_off_exponentially() -> None:
    clock_calls: list[float] = []
    attempts: list[int] = []

    def flaky(job: Job) -> None:
        attempts.append(job.attempts)
        clock_calls.append(time.monotonic())
        if job.attempts < 3:
            raise ConnectionError("model server restarting")

    queue = InMemoryJobQueue()
    with JobRunner(queue, {"tags": flaky}, initial_backoff=0.1, max_backoff=10, poll_interval=0.01) as runner:
        runner.submit("tags", "m1")
        assert runner.flush(timeout=20)
    assert attempts == [1, 2, 3]
    gaps = [b - a for a, b in itertools.pairwise(clock_calls)]
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2  # 0.1 s, then doubled
    assert runner.stats()["retried"] == 2 and runner.stats()["completed"] == 1


def test_rate_limit_holds_in_the_runner() -> None:
    stamps: list[float] = []
    queue = InMemoryJobQueue()
    for i in range(12):
        queue.put("tags", f"m{i}")
    runner = JobRunner(queue, {"tags": lambda job: stamps.append(time.monotonic())}, workers=2,
                       requests_per_second=20.0, poll_interval=0.01)
    with runner:
        assert runner.flush(timeout=30)
    assert len(stamps) == 12
    stamps.sort()
    # 12 jobs at 20/s with a burst of 1: at least 11 intervals of 50 ms (5% timer slack)
    assert stamps[-1] - stamps[0] >= 11 / 20 * 0.95
    assert runner.stats()["rate_limit_wait_s"] > 0


def test_jobs_of_unknown_kinds_are_left_for_another_runner() -> None:
    queue = InMemoryJobQueue()
    queue.put("translate", "m1")
    done: list[str] = []
    with JobRunner(queue, {"tags": lambda job: done.append(job.memory_key)}, poll_interval=0.01) as runner:
        with pytest.raises(UnknownJobKindError, match="translate"):
            runner.submit("translate", "m2")
        runner.submit("tags", "m3")
        time.sleep(0.2)
    assert done == ["m3"]
    assert queue.counts() == {"pending": 1, "running": 0, "failed": 0}


def test_stop_without_drain_persists_rest_and_next_runner_finishes(engines: Callable[[], Engine]) -> None:
    seen: list[str] = []
    lock = threading.Lock()

    def slow(job: Job) -> None:
        time.sleep(0.03)
        with lock:
            seen.append(job.memory_key)

    first = JobRunner(SQLJobQueue(engines()), {"tags": slow}, batch_size=4, poll_interval=0.02)
    for i in range(30):
        first.queue.put("tags", f"m{i}")
    first.start()
    while len(seen) < 3:
        time.sleep(0.01)
    assert first.stop(timeout=10)
    left = first.queue.counts()
    assert left["running"] == 0 and 0 < left["pending"] < 30  # unstarted claims were given back
    done_first = len(seen)
    second = JobRunner(SQLJobQueue(engines()), {"tags": slow}, batch_size=4, poll_interval=0.02)
    with second:
        assert second.flush(timeout=30)
    assert sorted(seen) == sorted(f"m{i}" for i in range(30))  # each exactly once
    assert second.stats()["completed"] == 30 - done_first


def test_runner_settings_validated() -> None:
    queue = InMemoryJobQueue()
    with pytest.raises(InvalidBudgetError):
        JobRunner(queue, {"tags": print}, workers=0)
    with pytest.raises(InvalidBudgetError):
        JobRunner(queue, {"tags": print}, requests_per_second=0)
    with pytest.raises(ValidationError):
        JobRunner(queue, {})
    with pytest.raises(ValidationError, match="callback"):
        enrichment_handlers(tagger=LLMTagger(FakeListChatModel(responses=["[]"])))


# -- a killed worker -------------------------------------------------------------------------

WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from sqlalchemy import create_engine
    from htm_core.enrich import JobRunner, SQLJobQueue

    url, marker = sys.argv[1], Path(sys.argv[2])

    def hang(job):
        with marker.open("a") as f:
            f.write(job.memory_key + "\\n")
        time.sleep(600)   # never finishes: the parent kills this process

    runner = JobRunner(SQLJobQueue(create_engine(url)), {"tags": hang}, batch_size=5, lease=1.0)
    runner.start()
    time.sleep(600)
""")


def test_killed_worker_jobs_resume_in_a_new_runner(db_url: str, engines: Callable[[], Engine],
                                                   tmp_path: Path) -> None:
    queue = SQLJobQueue(engines())
    for i in range(5):
        queue.put("tags", f"m{i}", {"content": f"text {i}"})
    script, marker = tmp_path / "worker.py", tmp_path / "started.txt"
    script.write_text(WORKER)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, str(script), db_url, str(marker)], cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text().strip()):
            assert child.poll() is None, "the worker process died on its own"
            assert time.monotonic() < deadline, "the worker never started a job"
            time.sleep(0.05)
        assert queue.counts()["running"] == 5  # the whole batch is claimed by the child
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    assert queue.counts() == {"pending": 0, "running": 5, "failed": 0}  # left behind, leased
    done: dict[str, int] = {}
    runner = JobRunner(SQLJobQueue(engines()), {"tags": lambda job: done.__setitem__(job.memory_key,
                                                                                        job.attempts)},
                       poll_interval=0.1)
    with runner:
        assert runner.flush(timeout=30)  # the 1 s lease runs out, then the jobs are claimed again
    assert done == {f"m{i}": 2 for i in range(5)}
    assert queue.counts() == {"pending": 0, "running": 0, "failed": 0}




def test_from_url_sqlite_uses_wal_and_round_trips(tmp_path: Path) -> None:
    queue = SQLJobQueue.from_url(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        queue.put("tags", "m1", {"content": "x"})
        with queue.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        assert [j.memory_key for j in queue.claim(5, lease=60)] == ["m1"]
    finally:
        queue.close()
    with pytest.raises(JobQueueError, match="cannot open"):
        SQLJobQueue.from_url("nosuchdialect://x")


def test_database_failure_in_bookkeeping_does_not_kill_the_worker() -> None:
    """A queue whose ``complete`` fails once (as a dropped connection would): the worker
    survives, counts it, and the job runs again when its lease runs out."""

    class Flaky(InMemoryJobQueue):
        broken = 1

        def complete(self, job_id: int) -> None:
            if self.broken:
                self.broken -= 1
                raise JobQueueError("the job queue failed: server closed the connection")
            super().complete(job_id)

    runs: list[int] = []
    queue = Flaky()
    runner = JobRunner(queue, {"tags": lambda job: runs.append(job.attempts)}, lease=0.2,
                       initial_backoff=0.05, poll_interval=0.02)
    with runner:
        runner.submit("tags", "m1")
        assert runner.flush(timeout=20)
        assert all(thread.is_alive() for thread in runner._threads)
    assert runs == [1, 2]  # at least once: it ran again after the lease
    assert runner.stats()["queue_errors"] == 1 and runner.stats()["completed"] == 1


def test_batched_tagging_sends_one_request_per_claimed_batch(make_queue: Callable[..., JobQueue]) -> None:
    queue = make_queue()
    answers = ['{"1": ["a:b"], "2": ["c"]}',                                   # keys missing: rejected
               '{"1": ["a:b"], "2": ["c"], "3": [], "4": ["d:e"], "5": ["Bad Tag!"]}',  # bad tag: rejected
               '{"1": ["a:b"], "2": ["c"], "3": [], "4": ["d:e"], "5": ["f"]}']
    tagger = LLMTagger(FakeListChatModel(responses=answers), max_retries=2)
    stored: dict[str, list[str]] = {}
    queue.put_many([tag_job(f"m{i}", f"text {i}") for i in range(1, 6)])
    runner = JobRunner(queue, enrichment_handlers(tagger=tagger, on_tags=stored.__setitem__, batch_tags=True),
                       usage=tagger.usage, batch_size=8, requests_per_second=50.0, poll_interval=0.02)
    with runner:
        assert runner.flush(timeout=20)
    assert stored == {"m1": ["a:b"], "m2": ["c"], "m3": [], "m4": ["d:e"], "m5": ["f"]}
    stats = runner.stats()
    assert (stats["calls"], stats["invalid_outputs"], stats["completed"]) == (3, 2, 5)
    assert runner.limiter is not None and runner.limiter.acquired == 1  # one token for the whole batch


def test_long_batch_renews_its_lease_so_no_other_runner_takes_over(engines: Callable[[], Engine]) -> None:
    """Six 0.2 s jobs claimed together under a 1 s lease: the runner renews the lease half-way,
    so a competitor polling the same database never gets one."""
    done: list[str] = []

    def slow(job: Job) -> None:
        time.sleep(0.2)
        done.append(job.memory_key)

    queue = SQLJobQueue(engines())
    queue.put_many([("tags", f"m{i}", None) for i in range(6)])
    competitor = SQLJobQueue(engines())
    stolen: list[int] = []
    runner = JobRunner(queue, {"tags": slow}, batch_size=6, lease=1.0, poll_interval=0.05)
    with runner:
        while queue.counts()["running"] < 6:  # the runner holds the whole batch first
            time.sleep(0.01)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            stolen.extend(job.id for job in competitor.claim(6, lease=60))
            time.sleep(0.05)
        assert runner.flush(timeout=20)
    assert stolen == []
    assert sorted(done) == [f"m{i}" for i in range(6)]


def test_queue_on_the_sqlite_stores_own_engine(sqlite_url: str) -> None:
    """The store's engine issues its own BEGIN from a listener; the queue must live with that."""
    from htm_core import HTM, HashingEmbedder

    with HTM(database_url=sqlite_url, embedder=HashingEmbedder()) as htm:
        engine = htm.store.engine  # type: ignore[attr-defined]
        queue = SQLJobQueue(engine)
        others = [SQLJobQueue(engine) for _ in range(3)]
        claimed: list[int] = []
        lock = threading.Lock()

        def work(q: SQLJobQueue) -> None:
            while batch := q.claim(3, lease=60):
                with lock:
                    claimed.extend(job.id for job in batch)
                for job in batch:
                    q.complete(job.id)

        for i in range(30):
            memory = htm.add(f"note {i} about the deploy")
            queue.put_many([tag_job(memory.key, memory.content)])
        threads = [threading.Thread(target=work, args=(q,)) for q in others]
        for thread in threads:
            thread.start()
        for i in range(10):
            htm.add(f"more notes {i} while workers claim")  # the store keeps writing meanwhile
        for thread in threads:
            thread.join(60)
        assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == 30
        assert queue.counts() == {"pending": 0, "running": 0, "failed": 0}
        assert len(htm.recall("notes", limit=100, strategy="fulltext")) >= 10
