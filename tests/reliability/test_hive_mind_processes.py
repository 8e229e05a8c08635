"""Hive mind across OS processes: four robots share one PostgreSQL memory.

Four spawned processes, each an ``HTM`` with its own robot name on one database, add 500
memories each while recalling (hybrid, then full text) every 25 adds. Afterwards the
database holds exactly 2,000 memories (none lost, none duplicated), every process finds
the others' memories through recall, each keeps its own working memory (its persisted
membership is its own), and stats show per-robot and global counts.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from htm_core.store.postgres import PostgresStore
from htm_core.testing import working_memories
from tests.pg import fresh_database

pytestmark = pytest.mark.postgres

ROBOTS = [f"hive{i}" for i in range(4)]
ADDS = 500
RECALL_EVERY = 25
WORDS = ["falcon", "harbour", "lantern", "meadow", "quartz", "signal", "timber", "violet"]


def content(robot: str, j: int) -> str:
    return (f"{robot} log entry {j}: marker{robot} saw the {WORDS[j % len(WORDS)]} "
            f"near sector{j}")


def worker(robot: str, url: str, start: Any, added: Any, results: Any) -> None:
    """One robot's life: add and recall concurrently with the others, then report."""
    from htm_core import HTM, HashingEmbedder

    report: dict[str, Any] = {"robot": robot, "problems": []}
    try:
        with HTM(robot=robot, database_url=url, embedder=HashingEmbedder(),
                 working_memory_tokens=3_000) as htm:
            start.wait()
            for j in range(ADDS):
                memory = htm.add(content(robot, j))
                if j % RECALL_EVERY == RECALL_EVERY - 1:
                    # Hybrid (vector + full text) while the others write; then an exact check:
                    # only the four robots' entry j carry the word sector{j}.
                    htm.recall(f"sector{j} {WORDS[j % len(WORDS)]}", limit=10)
                    hits = htm.recall(f"sector{j}", limit=10, strategy="fulltext")
                    if memory.key not in [h.memory.key for h in hits]:
                        report["problems"].append(f"recall after add {j} missed its own memory")
            added.wait()  # everyone has finished adding
            found: dict[str, list[str]] = {}
            for other in ROBOTS:
                if other != robot:
                    hits = htm.recall(f"marker{other}", limit=5)
                    found[other] = [h.memory.robot for h in hits]
            stats = htm.stats()
            report.update(
                found=found,
                working=sorted(htm.working_memory.keys()),
                long_term_robot=stats.long_term_robot,
                long_term_total=stats.long_term_total,
                robots=stats.robots,
            )
    except BaseException:
        report["problems"].append(traceback.format_exc())
    results.put(report)


@pytest.fixture
def hive_url(postgres_server_url: str) -> Iterator[str]:
    yield from fresh_database(postgres_server_url)


def test_four_processes_share_one_memory(hive_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    start, added = ctx.Barrier(len(ROBOTS)), ctx.Barrier(len(ROBOTS))
    results = ctx.Queue()
    PostgresStore(hive_url).close()  # migrate once up front (workers would race safely too)
    procs = [ctx.Process(target=worker, args=(r, hive_url, start, added, results))
             for r in ROBOTS]
    for p in procs:
        p.start()
    reports = {}
    try:
        for _ in procs:
            report = results.get(timeout=300)
            reports[report["robot"]] = report
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
    for robot, report in reports.items():
        assert report["problems"] == [], (robot, report["problems"])

    store = PostgresStore(hive_url)
    try:
        # Exactly 2,000 memories: none lost, none duplicated.
        memories = [m for batch in store.iter_memories(batch_size=500) for m in batch]
        assert len(memories) == len(ROBOTS) * ADDS
        assert sorted(m.content for m in memories) == sorted(
            content(r, j) for r in ROBOTS for j in range(ADDS))
        assert len({m.key for m in memories}) == len(memories)
        assert {r.name: r.memory_count for r in store.robots()} == dict.fromkeys(ROBOTS, ADDS)
        assert len(store.operations(op="add", limit=10_000)) == len(ROBOTS) * ADDS

        for robot, report in reports.items():
            # Every process found each other robot's memories through recall.
            for other, robots_hit in report["found"].items():
                assert robots_hit and set(robots_hit) == {other}, (robot, other, robots_hit)
            # Stats: per-robot and global figures.
            assert report["long_term_robot"] == ADDS
            assert report["long_term_total"] == len(ROBOTS) * ADDS
            assert report["robots"] == len(ROBOTS)
            # Each robot keeps its own working memory, persisted per robot.
            persisted = working_memories(store, robot)
            assert sorted(m.key for m in persisted) == report["working"] != []
            assert sum(m.token_count for m in persisted) <= 3_000
            assert any(m.robot == robot for m in persisted)
        sets = [frozenset(m.key for m in working_memories(store, r)) for r in ROBOTS]
        assert len(set(sets)) == len(ROBOTS)  # four different working memories
    finally:
        store.close()
