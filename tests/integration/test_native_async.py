"""Native async on PostgreSQL: the twins run on the event loop's own thread (greenlets
awaiting psycopg's async driver), answer as the sync methods do, and keep robots, users,
forgets and compare-and-set updates apart under concurrency, directly, through a
transaction-mode pooler and with a read replica."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from htm_core import HTM, FrozenClock, HashingEmbedder
from htm_core.errors import ConflictError
from tests.pgbouncer import through_pooler
from tests.replica import Pair, primary_and_replica

#: Every call in these tests is bounded: a deadlock fails the test instead of hanging it.
BOUND = 120.0


def worker_threads() -> list[str]:
    """The threads of asyncio's default executor (``asyncio.to_thread``) alive now."""
    return [t.name for t in threading.enumerate() if t.name.startswith("asyncio_")]


@pytest.fixture
def made() -> Iterator[Callable[..., HTM]]:
    """``HTM`` objects with the hashing embedder, closed at the end."""
    htms: list[HTM] = []

    def make(url: str, robot: str, **kwargs: Any) -> HTM:
        kwargs.setdefault("embedder", HashingEmbedder())
        htms.append(HTM(robot=robot, database_url=url, **kwargs))
        return htms[-1]

    yield make
    for htm in htms:
        htm.close()


def keys(hits: list[Any]) -> list[str]:
    return [h.memory.key for h in hits]


async def test_the_twins_run_on_the_loop_thread_and_answer_as_the_sync_methods(
        pg_url: str, made: Callable[..., HTM], clock: FrozenClock) -> None:
    """200 recalls, adds and forgets at once from one loop, then every other native twin:
    no worker thread is ever started, and each answer is the sync method's."""
    assert not worker_threads()
    htm = made(pg_url, "bot", clock=clock, working_memory_tokens=400)
    topics = ["tea", "kites", "harbour", "lantern"]
    for n in range(40):
        htm.add(f"note {n} about {topics[n % 4]} and the {n}th day", key=f"n{n}")
    expected = {t: keys(htm.recall(t, limit=5)) for t in topics}
    assert htm.native_async

    async def recall(n: int) -> tuple[str, list[str]]:
        topic = topics[n % 4]
        return topic, keys(await htm.arecall(topic, limit=5))

    done = await asyncio.wait_for(asyncio.gather(
        *(recall(n) for n in range(200)),
        *(htm.aadd(f"fresh fact {k} about quartz", key=f"q{k}") for k in range(10)),
        *(htm.aforget(f"n{k}", confirm=True) for k in (36, 37, 38, 39))), BOUND)
    forgotten = {"n36", "n37", "n38", "n39"}
    for topic, found in done[:200]:
        assert set(found) <= set(expected[topic]) | {f"n{k}" for k in range(40)}
        assert found  # each topic has ten notes
    assert {m.key for m in done[200:210]} == {f"q{k}" for k in range(10)}
    for topic in topics:  # after the forgets: what the sync method answers, never forgotten
        now = keys(await htm.arecall(topic, limit=5))
        assert now == keys(htm.recall(topic, limit=5)) and not set(now) & forgotten
    assert keys(await htm.arecall("quartz", limit=20, strategy="fulltext")) == keys(
        htm.recall("quartz", limit=20, strategy="fulltext"))

    updated = await htm.aupdate("q0", "fresh fact 0 about quartz, revised")
    assert updated.version == 2 and [m.version for m in await htm.aversions("q0")] == [
        m.version for m in htm.versions("q0")]
    assert (await htm.aget("q0")) == htm.get("q0")
    assert (await htm.arestore("n36")).key == "n36"
    assert await htm.apurge(confirm=True) == 3
    assert (await htm.aretrieve("n1")) is not None
    assert (await htm.acreate_context("recent", 300)).text == htm.create_context("recent", 300).text
    assert await htm.atags() == htm.tags() and await htm.arobots() == htm.robots()
    assert [o.id for o in await htm.aoperations(limit=30)] == [
        o.id for o in htm.operations(limit=30)]
    assert [m.key for m in (await htm.alist(limit=100)).memories] == [
        m.key for m in htm.list(limit=100).memories]
    assert len(await htm.aadd_many([f"batch note {k}" for k in range(300)])) == 300
    chunks = await htm.aadd_document("# Tea\n\nGreen tea is steeped briefly.\n", source="tea.md")
    assert chunks and chunks[0].metadata["source"] == "tea.md"
    assert await htm.adigests() == htm.digests()
    assert (await htm.astats()).long_term_total == htm.stats().long_term_total
    assert await htm.aclear_working_memory() >= 0
    assert not worker_threads()


async def test_colliding_robots_and_users_stay_apart_from_one_loop(
        pg_url: str, made: Callable[..., HTM]) -> None:
    """Robots ``bot``/``Bot`` and users ``Ada``/``ada`` (tags) add, recall, forget and update
    at once through the twins: each scope (its robot, its user's tag) recalls only its own
    memories, a forgotten one never comes back, and no write is lost."""
    robots = {name: made(pg_url, name) for name in ("bot", "Bot")}
    users = ("Ada", "ada")
    scopes = [(r, u) for r in robots for u in users]

    async def fill(robot: str, user: str) -> None:
        htm = robots[robot]
        for n in range(12):
            await htm.aadd(f"{robot} {user} remembers lantern {n}", key=f"{robot}/{user}:{n}",
                           tags=[f"user:{user}"])

    await asyncio.wait_for(asyncio.gather(*(fill(r, u) for r, u in scopes)), BOUND)

    async def churn(robot: str, user: str) -> list[str]:
        htm, prefix = robots[robot], f"{robot}/{user}:"
        seen: list[str] = []
        for n in range(0, 12, 3):
            await htm.aforget(f"{prefix}{n}", confirm=True)
            hits = await htm.arecall("lantern", limit=20, tags=[f"user:{user}"], robot=robot)
            seen += keys(hits)
            assert f"{prefix}{n}" not in keys(hits)
            await htm.aupdate(f"{prefix}{n + 1}", f"{robot} {user} moved lantern {n + 1}")
        return seen

    seen = await asyncio.wait_for(asyncio.gather(*(churn(r, u) for r, u in scopes)), BOUND)
    for (robot, user), found in zip(scopes, seen, strict=True):
        assert found and all(k.startswith(f"{robot}/{user}:") for k in found)
    gone = {f"{r}/{u}:{n}" for r, u in scopes for n in range(0, 12, 3)}
    for robot, user in scopes:
        hits = await robots[robot].arecall(
            "lantern", limit=50, tags=[f"user:{user}"], robot=robot)
        assert {h.memory.key for h in hits} == {
            f"{robot}/{user}:{n}" for n in range(12)} - gone
        for n in range(1, 12, 3):
            memory = await robots[robot].aget(f"{robot}/{user}:{n}")
            assert memory is not None and memory.content == f"{robot} {user} moved lantern {n}"


async def test_compare_and_set_updates_through_the_twins_lose_nothing(
        pg_url: str, made: Callable[..., HTM]) -> None:
    """Eight writers (two robots, four each) read a counter memory and write it back with
    ``expected_version``, retrying on ``ConflictError``, all at once on one loop: the final
    count is the number of increments (none lost) and the history has one version each."""
    writers = [made(pg_url, name) for name in ("bot", "Bot")]
    await writers[0].aadd("counter 0", key="Ada:counter")
    rounds, each = 5, 4

    async def increment(htm: HTM) -> int:
        conflicts = 0
        for _ in range(rounds):
            while True:
                seen = await htm.aget("Ada:counter")
                assert seen is not None
                count = int(seen.content.split()[1])
                try:
                    await htm.aupdate("Ada:counter", f"counter {count + 1}",
                                      expected_version=seen.version)
                    break
                except ConflictError:
                    conflicts += 1
        return conflicts

    await asyncio.wait_for(asyncio.gather(
        *(increment(w) for w in writers for _ in range(each))), BOUND)
    total = rounds * each * len(writers)
    final = await writers[1].aget("Ada:counter")
    assert final is not None and final.content == f"counter {total}"
    assert len(await writers[1].aversions("Ada:counter")) == total + 1


async def test_the_twins_work_through_a_transaction_mode_pooler(
        pooler_url: str, pg_url: str, made: Callable[..., HTM]) -> None:
    """Through PgBouncer in transaction mode (no prepared statement, every read of a
    recall in one transaction) the native twins of two colliding robots keep apart."""
    url = through_pooler(pooler_url, pg_url) + "?pooler=transaction"
    upper, lower = made(url, "Ada"), made(url, "ada")
    assert upper.native_async

    async def fill(htm: HTM, word: str) -> None:
        for k in range(10):
            await htm.aadd(f"{htm.robot} keeps {word} notebook {k}", key=f"{htm.robot}:k{k}",
                           tags=[f"owner:{htm.robot}"])

    await asyncio.wait_for(asyncio.gather(fill(upper, "blue"), fill(lower, "red")), BOUND)
    answers = await asyncio.wait_for(asyncio.gather(*(
        htm.arecall("notebook", limit=20, tags=[f"owner:{htm.robot}"])
        for _ in range(20) for htm in (upper, lower))), BOUND)
    for n, hits in enumerate(answers):
        owner = ("Ada", "ada")[n % 2]
        assert {h.memory.key for h in hits} == {f"{owner}:k{k}" for k in range(10)}
    await upper.aforget("Ada:k0", confirm=True)
    assert "Ada:k0" not in keys(await lower.arecall("blue notebook", limit=20))
    assert not worker_threads()


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    yield from primary_and_replica()


async def test_the_twins_read_their_own_writes_with_a_replica(
        pair: Pair, made: Callable[..., HTM]) -> None:
    """With ``read_database_url``, native adds are found at once by native recalls and
    lists (the replica waited for, or the primary read), and a forget is never undone
    by a replica that has not replayed it."""
    primary, replica = pair.fresh_database()
    ada = made(primary, "Ada", read_database_url=replica)
    lower = made(primary, "ada", read_database_url=replica)
    for k in range(5):
        await ada.aadd(f"Ada planted tree number {k} by the lake", key=f"Ada:tree{k}")
        assert f"Ada:tree{k}" in keys(await ada.arecall(f"tree number {k}", limit=10))
        assert f"Ada:tree{k}" in {m.key for m in (await ada.alist(limit=50)).memories}
    await ada.aforget("Ada:tree0", confirm=True)
    found = await asyncio.wait_for(asyncio.gather(
        *(lower.arecall("planted tree", limit=10) for _ in range(20)),
        *(ada.arecall("planted tree", limit=10) for _ in range(20))), BOUND)
    for hits in found:  # this process wrote the forget: its reads wait for it
        assert "Ada:tree0" not in keys(hits)
    assert not worker_threads()


async def test_cancelled_native_calls_leave_no_broken_connection(
        pg_url: str, made: Callable[..., HTM]) -> None:
    """Native recalls cancelled at every point of their reads (a task cancelled while its
    statement runs): the calls after them answer as the sync method does."""
    htm = made(pg_url, "bot")
    for n in range(30):
        htm.add(f"note {n} about harbour lanterns", key=f"n{n}")
    expected = keys(htm.recall("harbour lanterns", limit=5))
    for delay in (0.0, 0.001, 0.003, 0.01):
        tasks = [asyncio.ensure_future(htm.arecall("harbour lanterns", limit=5))
                 for _ in range(12)]
        await asyncio.sleep(delay)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        after = await asyncio.wait_for(asyncio.gather(
            *(htm.arecall("harbour lanterns", limit=5) for _ in range(12))), BOUND)
        assert all(keys(hits) == expected for hits in after)
