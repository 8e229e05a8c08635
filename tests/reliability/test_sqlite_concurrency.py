"""Concurrency on the embedded store: threads sharing one HTM, processes sharing one file."""

from __future__ import annotations

import multiprocessing as mp
import threading

from htm_core import HTM, HashingEmbedder
from htm_core.testing import working_memories


def test_threads_sharing_one_htm_lose_nothing(sqlite_url):
    with HTM(robot="t", database_url=sqlite_url, embedder=HashingEmbedder(),
             working_memory_tokens=300) as htm:
        errors: list[BaseException] = []

        def worker(n: int) -> None:
            try:
                for i in range(60):
                    htm.add(f"thread {n} message {i}", key=f"t{n}-{i}", importance=float(i % 10))
                    if i % 5 == 0:
                        htm.recall(f"thread {n} message", limit=5)
                        htm.create_context(max_tokens=200)
                    assert htm.working_memory.tokens <= 300
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert htm.stats().long_term_total == 240
        assert all(htm.retrieve(f"t{n}-{i}") for n in range(4) for i in range(60))
        resident = set(htm.working_memory.keys())
        persisted = {m.key for m in working_memories(htm.store, "t")}
        assert resident == persisted


def _writer(url: str, robot: str, count: int, barrier) -> None:
    barrier.wait()
    with HTM(robot=robot, database_url=url, embedder=HashingEmbedder(),
             working_memory_tokens=500) as htm:
        for i in range(count):
            htm.add(f"{robot} wrote line {i}", key=f"{robot}-{i}")
            if i % 25 == 0:
                htm.recall("wrote line", limit=3)


def test_processes_on_one_sqlite_file(sqlite_url):
    """Three processes write to one SQLite file at once (WAL, busy timeout, write lock
    taken up front): no lost and no duplicated memory."""
    HTM(robot="init", database_url=sqlite_url, embedder=HashingEmbedder()).close()
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_writer, args=(sqlite_url, f"p{n}", 150, barrier)) for n in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with HTM(robot="reader", database_url=sqlite_url, embedder=HashingEmbedder()) as htm:
        assert htm.stats().long_term_total == 450
        assert {r.name: r.memory_count for r in htm.robots()} == {"init": 0, "p0": 150, "p1": 150,
                                                                  "p2": 150, "reader": 0}
        hits = htm.recall("p2 wrote line 149", limit=1, strategy="fulltext")
        assert hits[0].memory.key == "p2-149"
        vec = htm.recall("p1 wrote line 7", limit=5, strategy="vector")
        assert any(h.memory.key == "p1-7" for h in vec)
