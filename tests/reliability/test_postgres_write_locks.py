"""Many facades writing overlapping keys on one PostgreSQL store never fail on a deadlock.

Sixteen ``HTM`` objects share one ``PostgresStore`` and add batches of overlapping keys in
random order, each batch entering the writer's small working memory (so entries are evicted
and re-enter). Writers take their advisory locks in one order (robots, then keys), so a
batch meets another at the first shared lock instead of locking rows in two orders; the
deadlocks left between two robots' working-set changes are retried inside the store.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.errors import NotFoundError
from htm_core.store.postgres import PostgresStore
from htm_core.store.postgres.write_locks import key_lock_id
from htm_core.testing import working_memories
from tests.pg import fresh_database

pytestmark = pytest.mark.postgres

WRITERS = 16
ROUNDS = 30
KEYS = 30


@pytest.fixture
def pg_url(postgres_server_url: str) -> Iterator[str]:
    yield from fresh_database(postgres_server_url)


def _write(store: PostgresStore, robot: str, seed: int, forgets: bool,
           start: threading.Barrier, problems: list[str]) -> None:
    rnd = random.Random(seed)
    htm = HTM(robot, store=store, embedder=HashingEmbedder(), working_memory_tokens=200)
    try:
        start.wait()
        for n in range(ROUNDS):
            keys = rnd.sample(range(KEYS), 6)
            htm.add_many([{"content": f"note {k} about the lantern", "key": f"k{k:02d}"}
                          for k in keys])
            if forgets and n % 3 == 0:
                with contextlib.suppress(NotFoundError):
                    htm.forget(f"k{rnd.randrange(KEYS):02d}", confirm=True)
    except Exception as exc:  # every failure is reported, not only the first
        problems.append(f"{robot}#{seed}: {exc!r}"[:300])
    finally:
        htm.close()


def _run(url: str, robots: list[str], forgets: bool) -> list[str]:
    store = PostgresStore(url)
    start = threading.Barrier(WRITERS)
    problems: list[str] = []
    threads = [threading.Thread(target=_write, args=(
        store, robots[i % len(robots)], i, forgets and i % 4 == 0, start, problems))
        for i in range(WRITERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert not any(thread.is_alive() for thread in threads), "a writer hung"
        for robot in robots:
            assert len(working_memories(store, robot)) <= KEYS
    finally:
        store.close()
    return problems


def test_sixteen_facades_of_one_robot_adding_overlapping_keys(pg_url: str) -> None:
    """Writers locking rows in two orders would stop here with ``deadlock detected``."""
    assert _run(pg_url, ["bot"], forgets=False) == []
    store = PostgresStore(pg_url)
    try:
        keys = sorted(m.key for batch in store.iter_memories(batch_size=100) for m in batch)
    finally:
        store.close()
    assert keys == [f"k{k:02d}" for k in range(KEYS)]


def test_two_robots_differing_in_case_adding_and_forgetting(pg_url: str) -> None:
    assert _run(pg_url, ["bot", "Bot"], forgets=True) == []


def test_key_lock_ids_are_signed_32_bit_and_tell_case_and_separators_apart() -> None:
    ids = [key_lock_id(k) for k in ("Ada", "ada", "a:da", "a/da", "ada\u0301", "")]
    assert all(-(1 << 31) <= i < 1 << 31 for i in ids)
    assert len(set(ids)) == len(ids)
