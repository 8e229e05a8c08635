"""The working memory's indexes against plain full sorts: eviction and assembly order, with
out-of-order access times, re-keyed and removed items, and index compaction."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htm_core import FrozenClock
from htm_core.working import POLICIES, WorkingItem, WorkingMemory
from htm_core.working import memory as memory_module
from htm_core.working.context import balanced_score

START = datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc)

EVICTION_KEYS = {
    "hybrid": lambda i: (i.importance, i.created_at, i.seq),
    "importance": lambda i: (i.importance, i.seq),
    "lru": lambda i: (i.last_accessed, i.access_seq),
    "frequency": lambda i: (i.access_count, i.last_accessed, i.access_seq),
}


def reference_order(items: list[WorkingItem], strategy: str, now: float) -> list[str]:
    """The strategy's order by a full sort of the scores the docs define."""
    if strategy == "recent":
        key = lambda i: (i.last_accessed, i.access_seq)  # noqa: E731
    elif strategy == "important":
        key = lambda i: (i.importance, i.last_accessed, i.access_seq)  # noqa: E731
    else:
        key = lambda i: (balanced_score(i, now), i.last_accessed, i.access_seq)  # noqa: E731
    return [i.key for i in sorted(items, key=key, reverse=True)]


def reference_select(items: list[WorkingItem], strategy: str, now: float, budget: int) -> list[str]:
    """Greedy over the full order: take every item that still fits."""
    by_key = {i.key: i for i in items}
    chosen, left = [], budget
    for key in reference_order(items, strategy, now):
        if by_key[key].token_count <= left:
            chosen.append(key)
            left -= by_key[key].token_count
    return chosen


operations = st.lists(
    st.one_of(
        # add: key, tokens, importance, last_accessed offset in seconds (None: now)
        st.tuples(st.just("add"), st.integers(0, 25), st.integers(0, 40),
                  st.sampled_from([0.0, 1.0, 2.5, 9.0, 10.0]),
                  st.none() | st.integers(-7200, 7200)),
        st.tuples(st.just("get"), st.integers(0, 25)),
        st.tuples(st.just("touch"), st.integers(0, 25), st.integers(-7200, 7200)),
        st.tuples(st.just("remove"), st.integers(0, 25)),
        st.tuples(st.just("tick"), st.integers(-600, 3600)),
    ),
    max_size=120,
)


def run(wm: WorkingMemory, clock: FrozenClock, ops: list[tuple]) -> None:
    for op in ops:
        now = clock().timestamp()
        if op[0] == "add":
            _, k, tokens, importance, offset = op
            wm.add(f"k{k}", f"content {k}", tokens=tokens, importance=importance,
                   last_accessed=None if offset is None else now + offset)
        elif op[0] == "get":
            wm.get(f"k{op[1]}")
        elif op[0] == "touch":
            wm.touch(f"k{op[1]}", at=now + op[2])
        elif op[0] == "remove":
            wm.remove(f"k{op[1]}")
        else:
            clock.advance(seconds=op[1])  # negative: the clock goes back


@pytest.mark.parametrize("slack", [memory_module._DEAD_SLACK, -(10**9)], ids=["lazy", "compact-always"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(max_examples=40, deadline=None)
@given(ops=operations, budget=st.integers(40, 400))
def test_property_orders_equal_full_sorts(slack, policy, ops, budget):
    """Whatever the history (clock going back, accesses in the past or future, re-adds,
    removals), eviction order and every assembly order equal a full sort of their key,
    and selection equals greedy over that order; also when the recency indexes are
    compacted on every removal."""
    clock = FrozenClock(START)
    wm = WorkingMemory(max_tokens=budget, policy=policy, clock=clock, safety_margin=0.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory_module, "_DEAD_SLACK", slack)
        run(wm, clock, ops)
    items = wm.items()
    assert [i.key for i in items] == [i.key for i in sorted(items, key=EVICTION_KEYS[policy])]
    now = clock().timestamp()
    for strategy in ("recent", "important", "balanced"):
        everything = wm.select(strategy, max_tokens=budget)
        assert [i.key for i in everything] == reference_order(items, strategy, now)
        for limit in (1, 7, 30, budget // 2):
            got = [i.key for i in wm.select(strategy, max_tokens=limit)]
            assert got == reference_select(items, strategy, now, limit)


def test_long_churn_compacts_and_keeps_every_order():
    """Thousands of evictions and accesses (enough to compact the indexes several times)
    leave the same orders a full sort gives, and the indexes no larger than needed."""
    clock = FrozenClock(START)
    wm = WorkingMemory(max_tokens=600, clock=clock, safety_margin=0.0)
    for i in range(12_000):
        wm.add(f"k{i}", f"content {i}", tokens=5 + i % 17, importance=float(i % 11))
        if i % 3 == 0:
            wm.get(f"k{i - 5}")
        clock.advance(seconds=7)
    items = wm.items()
    assert wm.tokens == sum(i.token_count for i in items) <= 600
    live = len(items)
    # internals, checked once: dead entries never outnumber live ones by more than the slack
    assert len(wm._by_recency) <= 3 * live + memory_module._DEAD_SLACK
    now = clock().timestamp()
    for strategy in ("recent", "important", "balanced"):
        assert wm.select(strategy)
        assert [i.key for i in wm.select(strategy, max_tokens=10**6)] == reference_order(
            items, strategy, now)


def test_clear_then_reuse():
    clock = FrozenClock(START)
    wm = WorkingMemory(max_tokens=50, clock=clock)
    for i in range(20):
        wm.add(f"k{i}", "x", tokens=10, importance=float(i % 3))
    assert len(wm.clear()) == 5
    assert wm.tokens == 0 and wm.keys() == [] and wm.select("recent") == []
    wm.add("a", "x", tokens=30)
    clock.advance(seconds=1)
    wm.add("b", "x", tokens=20)
    assert [i.key for i in wm.add("c", "x", tokens=10)] == ["a"]
    assert [i.key for i in wm.select("recent", max_tokens=1_000)] == ["c", "b"]


def test_touch_in_the_past_counts_but_keeps_recency():
    clock = FrozenClock(START)
    wm = WorkingMemory(max_tokens=100, policy="frequency", clock=clock)
    wm.add("a", "x", tokens=10)
    clock.advance(seconds=10)
    wm.add("b", "x", tokens=10)
    before = wm.peek("a").last_accessed
    assert wm.touch("a", at=before - 100)
    assert wm.peek("a").last_accessed == before and wm.peek("a").access_count == 1
    assert [i.key for i in wm.select("recent")] == ["b", "a"]
    assert wm.keys() == ["b", "a"]  # frequency: b was never accessed


def test_default_clock_stamps_the_current_time():
    wm = WorkingMemory(max_tokens=100)
    before = time.time()
    wm.add("a", "x", tokens=1)
    item = wm.get("a")
    after = time.time()
    assert before <= item.added_at == item.created_at <= item.last_accessed <= after


def test_naive_clock_is_read_as_local_time():
    aware = datetime(2024, 5, 15, 12, 0).astimezone()
    wm = WorkingMemory(max_tokens=100, clock=lambda: aware.replace(tzinfo=None))
    wm.add("a", "x", tokens=1)
    assert wm.peek("a").added_at == aware.timestamp()


def test_numeric_importance_and_tokens_are_normalised():
    wm = WorkingMemory(max_tokens=100, clock=lambda: START)
    wm.add("a", "x", tokens=3.0, importance=7)
    item = wm.peek("a")
    assert item.token_count == 3 and type(item.token_count) is int
    assert item.importance == 7.0 and type(item.importance) is float


def test_smallest_size_survives_sizes_leaving_and_returning():
    """Sizes that leave and come back many times: selection still fills small gaps."""
    clock = FrozenClock(START)
    wm = WorkingMemory(max_tokens=100, clock=clock, safety_margin=0.0)
    for i in range(500):
        wm.add(f"k{i}", "x", tokens=1 + i % 3, importance=5.0)
        wm.remove(f"k{i}")
        clock.advance(seconds=1)
    wm.add("big", "x", tokens=9, importance=9.0)
    clock.advance(seconds=1)
    wm.add("tiny", "x", tokens=1, importance=1.0)
    assert [i.key for i in wm.select("important", max_tokens=10)] == ["big", "tiny"]
    assert len(wm._size_heap) <= 2 * len(wm._size_counts) + 64


def test_clock_going_back_keeps_recency_order():
    clock = FrozenClock(START)
    wm = WorkingMemory(max_tokens=100, policy="lru", clock=clock)
    wm.add("late", "x", tokens=10)
    clock.set(START - timedelta(hours=1))
    wm.add("early", "x", tokens=10)
    assert [i.key for i in wm.select("recent")] == ["late", "early"]
    assert wm.keys() == ["early", "late"]


class LargestFirst:
    """A policy of the user's own: the biggest item goes first."""

    name = "largest"
    tracks_access = False

    def sort_key(self, item: WorkingItem) -> tuple[float, ...]:
        return (-item.token_count,)


@settings(max_examples=40, deadline=None)
@given(ops=operations, budget=st.integers(40, 400))
def test_property_custom_policy_evicts_in_its_key_order(ops, budget):
    clock = FrozenClock(START)
    wm = WorkingMemory(max_tokens=budget, policy=LargestFirst(), clock=clock)
    run(wm, clock, ops)
    items = wm.items()
    assert [i.key for i in items] == [i.key for i in sorted(items, key=lambda i: (-i.token_count,
                                                                                  i.seq))]
    evicted = [i.key for i in wm.add("new", "x", tokens=budget, importance=5.0)]
    assert evicted == [i.key for i in items][: len(evicted)]
    assert wm.tokens == budget  # what stays behind holds no tokens
