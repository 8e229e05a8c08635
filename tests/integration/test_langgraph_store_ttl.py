"""``HTMStore`` TTLs, LangGraph's way (``TTLConfig``, ``put(..., ttl=)``, ``refresh_ttl``), the
htm way: an expired item is forgotten (restorable), never purged.

Real htm databases on every backend, LangGraph's own ``BaseStore`` methods; time moves by a
``FrozenClock`` given to both the ``HTM`` and the store, never by sleeping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp, TTLConfig

from htm_core import HTM, FrozenClock
from htm_core.errors import NotFoundError, ValidationError
from htm_integrations.langchain import HTMStore

NS = ("memories", "ada")


def memory_of(htm: HTM, namespace: tuple[str, ...], key: str) -> Any:
    return htm.get(HTMStore.memory_key(namespace, key), include_forgotten=True)


def make_store(htm_factory: Callable[..., HTM], clock: FrozenClock,
               ttl: TTLConfig | None = None, **kwargs: Any) -> tuple[HTM, HTMStore]:
    htm = htm_factory(**kwargs)
    return htm, HTMStore(htm=htm, fields=["text"], ttl=ttl, clock=clock)


def test_put_with_ttl_expires_into_forgotten_and_restores(htm_factory: Callable[..., HTM],
                                                          clock: FrozenClock) -> None:
    htm, store = make_store(htm_factory, clock)
    store.put(NS, "tea", {"text": "Ada drinks tea"}, ttl=60)
    store.put(NS, "keep", {"text": "Ada lives in Lisbon"})
    clock.advance(minutes=59)
    assert store.get(NS, "tea", refresh_ttl=False) is not None
    clock.advance(minutes=1)
    assert store.get(NS, "tea") is None
    assert store.get(NS, "keep") is not None  # no ttl: never expires
    forgotten = memory_of(htm, NS, "tea")
    assert forgotten is not None and forgotten.forgotten_at is not None  # forgotten, not purged
    assert [op.key for op in htm.operations(op="forget")] == [forgotten.key]
    item = store.restore(NS, "tea")
    assert item.value == {"text": "Ada drinks tea"}
    assert store.get(NS, "tea") is not None  # its TTL started again at the restore
    clock.advance(minutes=61)
    assert store.get(NS, "tea") is None
    assert htm.purge(confirm=True) == 1  # only a purge deletes it, as for any forgotten memory


def test_reads_refresh_the_ttl_unless_told_not_to(htm_factory: Callable[..., HTM],
                                                  clock: FrozenClock) -> None:
    _, store = make_store(htm_factory, clock)
    store.put(NS, "a", {"text": "alpha"}, ttl=60)
    store.put(NS, "b", {"text": "beta"}, ttl=60)
    clock.advance(minutes=50)
    assert store.get(NS, "a") is not None                      # refreshes a
    assert store.get(NS, "b", refresh_ttl=False) is not None   # leaves b's expiry
    clock.advance(minutes=20)                                  # 70 after the put, 20 after a's read
    assert store.get(NS, "b") is None
    assert store.get(NS, "a") is not None
    assert [i.key for i in store.search(NS)] == ["a"]


def test_search_omits_and_forgets_expired_items_and_refreshes_what_it_returns(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm, store = make_store(htm_factory, clock)
    for i in range(6):
        store.put(NS, f"k{i}", {"text": f"note {i} about tea"}, ttl=10 if i % 2 else 100)
        clock.advance(seconds=1)
    clock.advance(minutes=30)
    assert [i.key for i in store.search(NS, limit=2)] == ["k4", "k2"]  # newest first, live only
    assert [i.key for i in store.search(NS, limit=10, offset=1)] == ["k2", "k0"]
    assert {i.key for i in store.search(NS, query="tea", limit=10)} == {"k0", "k2", "k4"}
    assert all(memory_of(htm, NS, f"k{i}").forgotten_at is not None for i in (1, 3, 5))
    clock.advance(minutes=90)  # 120 after the puts; k4 and k2 were read 90 minutes ago
    assert [i.key for i in store.search(NS, limit=2, refresh_ttl=False)] == ["k4", "k2"]
    clock.advance(minutes=15)
    assert store.search(NS) == []


def test_default_ttl_and_refresh_on_read_from_the_config(htm_factory: Callable[..., HTM],
                                                          clock: FrozenClock) -> None:
    _, store = make_store(htm_factory, clock,
                          ttl={"default_ttl": 30, "refresh_on_read": False})
    store.put(NS, "default", {"text": "takes the default"})
    store.put(NS, "never", {"text": "explicitly kept"}, ttl=None)
    store.put(NS, "long", {"text": "its own ttl"}, ttl=120)
    clock.advance(minutes=20)
    assert store.get(NS, "default") is not None  # no refresh: the config says so
    clock.advance(minutes=10)
    assert store.get(NS, "default") is None
    assert store.get(NS, "never") is not None and store.get(NS, "long") is not None
    assert store.get(NS, "long", refresh_ttl=True) is not None  # per read, the caller wins
    clock.advance(minutes=100)  # 130 after the put, 100 after the refreshing read
    assert store.get(NS, "long") is not None


def test_a_put_restarts_the_ttl_and_brings_back_an_expired_item(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm, store = make_store(htm_factory, clock)
    store.put(NS, "k", {"text": "same"}, ttl=60)
    clock.advance(minutes=50)
    store.put(NS, "k", {"text": "same"}, ttl=60)  # same value: nothing new written, TTL reset
    assert memory_of(htm, NS, "k").version == 1
    clock.advance(minutes=50)
    assert store.get(NS, "k", refresh_ttl=False) is not None
    store.put(NS, "k", {"text": "same"}, ttl=5)  # a new ttl is written
    clock.advance(minutes=5)
    assert store.get(NS, "k") is None
    store.put(NS, "k", {"text": "back"}, ttl=60)  # a put over the expired item restores it
    assert store.get(NS, "k").value == {"text": "back"}  # type: ignore[union-attr]
    store.put(NS, "k", {"text": "back"}, ttl=None)  # and a put without a ttl keeps it for good
    clock.advance(days=400)
    assert store.get(NS, "k") is not None


def test_sweep_forgets_every_expired_item_of_its_robot(htm_factory: Callable[..., HTM],
                                                       clock: FrozenClock) -> None:
    htm = htm_factory(robot="planner")
    store = HTMStore(htm=htm, fields=["text"], clock=clock, robot="planner")
    other = HTMStore(htm=htm_factory(robot="writer"), ttl={"default_ttl": 10}, clock=clock,
                     robot="writer")
    # namespaces drawn to collide: letter case, a lookalike, separators
    spaces = [("users", "Ada"), ("users", "ada"), ("users", "\u0430da"), ("users", "a:b"),
              ("users", "a/b")]
    for ns in spaces:
        store.put(ns, "k", {"text": f"note of {ns[1]}"}, ttl=10)
        store.put(ns, "kept", {"text": f"kept for {ns[1]}"})
        other.put(ns, "w", {"text": f"writer's note for {ns[1]}"})
    assert store.sweep_ttl() == 0
    clock.advance(minutes=10)
    assert store.sweep_ttl() == len(spaces)  # only the planner's items: store(robot=...) scope
    for ns in spaces:
        assert memory_of(htm, ns, "k").forgotten_at is not None
        assert store.get(ns, "kept") is not None
        assert memory_of(htm, ns, "w").forgotten_at is None
    assert other.sweep_ttl() == len(spaces)
    assert store.sweep_ttl() == 0
    assert htm.stats().long_term_total >= len(spaces)  # nothing was purged


def test_expiry_seen_by_another_htm_on_the_same_database(htm_factory: Callable[..., HTM],
                                                         clock: FrozenClock) -> None:
    _, first = make_store(htm_factory, clock)
    second = HTMStore(htm=htm_factory(robot="second"), fields=["text"], clock=clock)
    first.put(NS, "k", {"text": "shared note"}, ttl=30)
    clock.advance(minutes=20)
    assert second.get(NS, "k") is not None  # the other reader's read refreshes it too
    clock.advance(minutes=20)
    assert first.get(NS, "k") is not None
    clock.advance(minutes=30)
    assert second.get(NS, "k") is None and first.get(NS, "k") is None


def test_batch_ops_and_async(htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    import asyncio

    _, store = make_store(htm_factory, clock)

    async def run() -> list[Any]:
        await store.aput(NS, "k", {"text": "async note"}, ttl=5)
        clock.advance(minutes=5)
        return [await store.aget(NS, "k"), await store.asweep_ttl()]

    assert asyncio.run(run()) == [None, 0]
    store.batch([PutOp(NS, "b", {"text": "batch"}, ttl=1.5)])
    clock.advance(seconds=89)
    assert store.batch([GetOp(NS, "b", refresh_ttl=False)])[0] is not None
    clock.advance(seconds=1)
    assert store.batch([GetOp(NS, "b"), SearchOp(NS)]) == [None, []]


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "5", True])
def test_bad_ttls_are_refused_and_write_nothing(htm_factory: Callable[..., HTM],
                                                clock: FrozenClock, ttl: Any) -> None:
    htm, store = make_store(htm_factory, clock)
    with pytest.raises(ValidationError, match="ttl must be a positive number of minutes"):
        store.put(NS, "k", {"text": "x"}, ttl=ttl)
    assert memory_of(htm, NS, "k") is None
    with pytest.raises(ValidationError, match="default_ttl must be a positive number"):
        HTMStore(htm=htm, ttl={"default_ttl": ttl})


def test_bad_ttl_configs_are_refused(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    with pytest.raises(ValidationError, match=r"unknown ttl settings \['default'\]"):
        HTMStore(htm=htm, ttl={"default": 5})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ValidationError, match="refresh_on_read must be True or False"):
        HTMStore(htm=htm, ttl={"refresh_on_read": "yes"})  # type: ignore[typeddict-item]
    with pytest.raises(ValidationError, match="TTLConfig dict"):
        HTMStore(htm=htm, ttl=60)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        HTMStore(htm=htm).restore(NS, "never-stored")


def test_sweeper_thread_starts_and_stops(htm_factory: Callable[..., HTM],
                                         clock: FrozenClock) -> None:
    htm, store = make_store(htm_factory, clock, ttl={"default_ttl": 5,
                                                     "sweep_interval_minutes": 60})
    assert HTMStore(htm=htm).start_ttl_sweeper().done()  # no ttl config: nothing to sweep
    running = store.start_ttl_sweeper()
    assert not running.done() and store.start_ttl_sweeper() is running
    assert store.stop_ttl_sweeper(timeout=10)
    assert running.done() and running.exception() is None
    assert store.stop_ttl_sweeper()


def test_expiry_reads_the_htms_clock_by_default(htm_factory: Callable[..., HTM],
                                                clock: FrozenClock) -> None:
    """Without ``clock=``, the store keeps time with its ``HTM`` (here a frozen clock far
    from the machine's): an item lives its TTL on that clock, not on the local one."""
    htm = htm_factory()
    store = HTMStore(htm=htm, fields=["text"])
    assert store.clock is htm.clock
    store.put(NS, "tea", {"text": "Ada drinks tea"}, ttl=60)
    clock.advance(minutes=59)
    assert store.get(NS, "tea", refresh_ttl=False) is not None
    clock.advance(minutes=1)
    assert store.get(NS, "tea") is None
