"""Concurrency on PostgreSQL: threads sharing one ``HTM``, and processes sharing one database.

No memory is lost or duplicated, a key claimed by two writers at once ends with exactly one
memory (the same content is merged, different content gives ``DuplicateKeyError`` to all
but one), and working memory is never over its budget, however the writes interleave.
(tests/reliability/test_hive_mind_processes.py covers four robots' processes sharing
recall; tests/reliability/test_sqlite_concurrency.py the same questions on SQLite.)
"""

from __future__ import annotations

import multiprocessing
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.errors import DuplicateKeyError
from htm_core.store.postgres import PostgresStore
from htm_core.testing import working_memories
from tests.pg import fresh_database

pytestmark = pytest.mark.postgres

THREADS = 6
ADDS = 40
BUDGET = 300


@pytest.fixture
def pg_url(postgres_server_url: str) -> Iterator[str]:
    yield from fresh_database(postgres_server_url)


def stored(url: str) -> list[Any]:
    store = PostgresStore(url)
    try:
        return [m for batch in store.iter_memories(batch_size=1_000) for m in batch]
    finally:
        store.close()


def test_threads_sharing_one_htm(pg_url: str) -> None:
    htm = HTM(robot="shared", database_url=pg_url, embedder=HashingEmbedder(),
              working_memory_tokens=BUDGET)
    start = threading.Barrier(THREADS)
    problems: list[str] = []
    duplicate_errors: list[int] = []

    def run(t: int) -> None:
        try:
            start.wait()
            for j in range(ADDS):
                htm.add(f"thread {t} wrote item {j} about the lantern number{t}x{j}")
                if j % 5 == 4:
                    hits = htm.recall(f"number{t}x{j}", strategy="fulltext", limit=3)
                    if not hits or not hits[0].memory.content.endswith(f"number{t}x{j}"):
                        problems.append(f"thread {t} could not recall item {j}")
                    htm.recall("lantern item", limit=5)
                if htm.working_memory.tokens > htm.working_memory.max_tokens:
                    problems.append(f"working memory over budget: {htm.working_memory.tokens}")
                # Every thread adds the same shared content (one memory in the end) and
                # claims one contested key with its own content (one winner).
                if j == ADDS // 2:
                    htm.add("the content every thread adds", key="same-content")
                    try:
                        htm.add(f"thread {t} claims the key", key="contested")
                    except DuplicateKeyError:
                        duplicate_errors.append(t)
        except BaseException:
            problems.append(traceback.format_exc())

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert problems == []
        assert len(duplicate_errors) == THREADS - 1
        memories = stored(pg_url)
        expected = {f"thread {t} wrote item {j} about the lantern number{t}x{j}"
                    for t in range(THREADS) for j in range(ADDS)}
        contents = [m.content for m in memories]
        assert len(contents) == len(set(contents)) == THREADS * ADDS + 2
        assert expected <= set(contents)
        winner = next(m for m in memories if m.key == "contested")
        (winner_thread,) = set(range(THREADS)) - set(duplicate_errors)
        assert winner.content == f"thread {winner_thread} claims the key"
        assert len(htm.operations(op="add", limit=10_000)) == THREADS * ADDS + 2
        # Working memory within budget, and what is persisted is what is in memory.
        assert htm.working_memory.tokens <= BUDGET
        persisted = {m.key for m in working_memories(htm.store, htm.robot)}
        assert persisted == set(htm.working_memory.keys())
    finally:
        htm.close()


PROCS = 3
PROC_ADDS = 60


def proc_worker(n: int, url: str, start: Any, results: Any) -> None:
    """One process: its own memories, shared keys with the same content, a contested key."""
    report: dict[str, Any] = {"n": n, "problems": [], "added": [], "lost_race": False}
    try:
        with HTM(robot=f"proc{n}", database_url=url, embedder=HashingEmbedder(),
                 working_memory_tokens=BUDGET) as htm:
            start.wait()
            for j in range(PROC_ADDS):
                memory = htm.add(f"process {n} note {j} signal{n}x{j}")
                report["added"].append(memory.key)
                htm.add(f"shared fact {j % 10}", key=f"shared-{j % 10}")
                if j == PROC_ADDS // 2:
                    try:
                        htm.add(f"process {n} owns this", key="contested")
                    except DuplicateKeyError:
                        report["lost_race"] = True
                if j % 10 == 9:
                    htm.recall("shared fact signal", limit=10)
                if htm.working_memory.tokens > htm.working_memory.max_tokens:
                    report["problems"].append("working memory over budget")
            htm.flush()  # recalls are written behind (docs/reliability.md)
            persisted = {m.key for m in working_memories(htm.store, htm.robot)}
            if persisted != set(htm.working_memory.keys()):
                report["problems"].append("persisted working memory differs")
    except BaseException:
        report["problems"].append(traceback.format_exc())
    results.put(report)


def test_processes_on_one_database(pg_url: str) -> None:
    PostgresStore(pg_url).close()  # migrate once up front
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(PROCS)
    results = ctx.Queue()
    procs = [ctx.Process(target=proc_worker, args=(n, pg_url, start, results))
             for n in range(PROCS)]
    for p in procs:
        p.start()
    reports = []
    try:
        for _ in procs:
            reports.append(results.get(timeout=300))
    finally:
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
    for report in reports:
        assert report["problems"] == [], report["problems"]
    assert sum(not r["lost_race"] for r in reports) == 1
    memories = stored(pg_url)
    keys = [m.key for m in memories]
    assert len(keys) == len(set(keys)) == PROCS * PROC_ADDS + 10 + 1
    assert {k for r in reports for k in r["added"]} <= set(keys)
    assert {m.content for m in memories if m.key.startswith("shared-")} == {
        f"shared fact {i}" for i in range(10)}
    winner = next(r["n"] for r in reports if not r["lost_race"])
    assert next(m for m in memories if m.key == "contested").content == f"process {winner} owns this"
