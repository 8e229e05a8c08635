"""The working memory on its own: budget, eviction order, assembly, bad input, threads."""

from __future__ import annotations

import math
import threading
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htm_core import FrozenClock
from htm_core.errors import (
    HTMError,
    InvalidBudgetError,
    InvalidContentError,
    InvalidImportanceError,
    InvalidKeyError,
    InvalidTokensError,
    MemoryTooLargeError,
    UnknownPolicyError,
    UnknownStrategyError,
)
from htm_core.working import POLICIES, WorkingMemory


def make_clock() -> FrozenClock:
    return FrozenClock(datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc))


def test_seed_worked_example_evicts_lowest_importance_first():
    """A full 128,000-token memory receiving 5,000 tokens evicts the 1.0 and 2.0 nodes."""
    clock = make_clock()
    wm = WorkingMemory(max_tokens=128_000, clock=clock)
    for key, tokens, importance in [("low", 3_000, 1.0), ("mid", 3_000, 2.0),
                                    ("high", 60_000, 8.0), ("top", 62_000, 10.0)]:
        assert wm.add(key, f"memory {key}", tokens=tokens, importance=importance) == []
        clock.advance(minutes=1)
    assert wm.tokens == 128_000
    evicted = wm.add("new", "a new memory", tokens=5_000, importance=5.0)
    assert [item.key for item in evicted] == ["low", "mid"]
    assert set(wm.keys()) == {"new", "high", "top"}
    assert wm.tokens == 127_000


def test_nothing_is_evicted_when_it_fits():
    wm = WorkingMemory(max_tokens=100)
    assert wm.add("a", "x", tokens=40) == []
    assert wm.add("b", "y", tokens=60) == []
    assert wm.tokens == 100 and len(wm) == 2


def test_hybrid_breaks_importance_ties_by_age():
    clock = make_clock()
    wm = WorkingMemory(max_tokens=30, clock=clock)
    wm.add("newer", "n", tokens=10, importance=3.0, created_at=clock().timestamp())
    wm.add("older", "o", tokens=10, importance=3.0, created_at=clock().timestamp() - 3600)
    wm.add("vital", "v", tokens=10, importance=9.0)
    assert [i.key for i in wm.add("x", "x", tokens=10, importance=3.0)] == ["older"]


def test_lru_evicts_least_recently_accessed():
    clock = make_clock()
    wm = WorkingMemory(max_tokens=30, policy="lru", clock=clock)
    for key in "abc":
        wm.add(key, key, tokens=10, importance=9.0)
        clock.advance(seconds=1)
    wm.get("a")  # a is now the most recent
    clock.advance(seconds=1)
    assert [i.key for i in wm.add("d", "d", tokens=10)] == ["b"]


def test_frequency_evicts_least_often_accessed():
    clock = make_clock()
    wm = WorkingMemory(max_tokens=30, policy="frequency", clock=clock)
    for key in "abc":
        wm.add(key, key, tokens=10)
        clock.advance(seconds=1)
    for _ in range(3):
        wm.get("a")
    wm.get("c")
    assert [i.key for i in wm.add("d", "d", tokens=10)] == ["b"]


def test_importance_policy_ignores_age():
    clock = make_clock()
    wm = WorkingMemory(max_tokens=20, policy="importance", clock=clock)
    wm.add("first", "f", tokens=10, importance=2.0, created_at=0.0)
    wm.add("second", "s", tokens=10, importance=2.0, created_at=-1e9)  # older memory, added later
    assert [i.key for i in wm.add("x", "x", tokens=10)] == ["first"]


def test_item_larger_than_budget_is_refused_and_memory_unchanged():
    wm = WorkingMemory(max_tokens=100)
    wm.add("a", "a", tokens=50)
    with pytest.raises(MemoryTooLargeError, match="more than the whole working-memory budget"):
        wm.add("huge", "h", tokens=101)
    assert wm.keys() == ["a"] and wm.tokens == 50


def test_re_adding_a_key_replaces_it():
    wm = WorkingMemory(max_tokens=100)
    wm.add("a", "old", tokens=30)
    assert wm.add("a", "new", tokens=50) == []
    assert wm.tokens == 50 and wm.peek("a").content == "new"


def test_get_remove_contains_len():
    wm = WorkingMemory(max_tokens=100)
    assert wm.get("missing") is None
    assert wm.remove("missing") is None
    wm.add("a", "alpha", tokens=5)
    assert "a" in wm and len(wm) == 1
    assert wm.get("a").access_count == 1
    assert wm.remove("a").key == "a"
    assert "a" not in wm and wm.tokens == 0


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"content": ""}, InvalidContentError),
        ({"content": "   \n\t"}, InvalidContentError),
        ({"content": "nul\x00byte"}, InvalidContentError),
        ({"tokens": -1}, InvalidTokensError),
        ({"tokens": float("nan")}, InvalidTokensError),
        ({"tokens": 1.5}, InvalidTokensError),
        ({"importance": -0.1}, InvalidImportanceError),
        ({"importance": 10.5}, InvalidImportanceError),
        ({"importance": float("nan")}, InvalidImportanceError),
        ({"importance": float("inf")}, InvalidImportanceError),
        ({"key": ""}, InvalidKeyError),
    ],
)
def test_bad_input_raises_specific_error_and_leaves_memory_unchanged(kwargs, error):
    wm = WorkingMemory(max_tokens=100)
    wm.add("keep", "kept", tokens=10)
    args = {"key": "k", "content": "text", "tokens": 5, "importance": 1.0} | kwargs
    with pytest.raises(error) as info:
        wm.add(args.pop("key"), args.pop("content"), **args)
    assert isinstance(info.value, HTMError)
    assert wm.keys() == ["keep"] and wm.tokens == 10


def test_unknown_policy_strategy_and_bad_budget():
    with pytest.raises(UnknownPolicyError, match="hybrid"):
        WorkingMemory(policy="random")
    for bad in (0, -5, 1.5, True):
        with pytest.raises(InvalidBudgetError):
            WorkingMemory(max_tokens=bad)
    wm = WorkingMemory(max_tokens=100)
    with pytest.raises(UnknownStrategyError, match="balanced"):
        wm.assemble("fancy")
    for bad in (0, -1):
        with pytest.raises(InvalidBudgetError):
            wm.assemble("recent", max_tokens=bad)


def _filled(clock: FrozenClock) -> WorkingMemory:
    wm = WorkingMemory(max_tokens=1_000, clock=clock, safety_margin=0.0)
    # (key, importance, hours ago accessed)
    for key, importance, hours_ago in [("old-vital", 9.0, 10), ("fresh-minor", 1.0, 0),
                                       ("mid", 5.0, 1), ("recent-high", 8.0, 0.5)]:
        wm.add(key, key, tokens=10, importance=importance,
               last_accessed=clock().timestamp() - hours_ago * 3600)
    return wm


def test_assembly_orders():
    clock = make_clock()
    wm = _filled(clock)
    assert wm.assemble("recent").keys == ("fresh-minor", "recent-high", "mid", "old-vital")
    assert wm.assemble("important").keys == ("old-vital", "recent-high", "mid", "fresh-minor")
    # balanced: 9/(1+10)=0.82, 1/1=1.0, 5/2=2.5, 8/1.5=5.33
    assert wm.assemble("balanced").keys == ("recent-high", "mid", "fresh-minor", "old-vital")


def test_assembly_respects_budget_and_margin_and_skips_what_does_not_fit():
    clock = make_clock()
    wm = WorkingMemory(max_tokens=1_000, clock=clock)  # default 10% margin
    wm.add("big", "b", tokens=80, importance=9.0)
    wm.add("small", "s", tokens=10, importance=5.0)
    wm.add("tiny", "t", tokens=5, importance=1.0)
    ctx = wm.assemble("important", max_tokens=100)
    assert ctx.budget == 90
    assert ctx.keys == ("big", "small") and ctx.tokens == 90
    ctx = wm.assemble("important", max_tokens=50)
    assert ctx.keys == ("small", "tiny") and ctx.tokens == 15


def test_assembly_is_deterministic_with_ties():
    clock = make_clock()
    wm = WorkingMemory(max_tokens=1_000, clock=clock)
    for i in range(20):
        wm.add(f"k{i}", f"same {i}", tokens=7, importance=3.0)
    first = [wm.assemble(s, max_tokens=60) for s in ("recent", "important", "balanced")]
    again = [wm.assemble(s, max_tokens=60) for s in ("recent", "important", "balanced")]
    assert first == again


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 30), st.integers(0, 120),
                  st.sampled_from([0.0, 1.0, 2.5, 5.0, 9.0, 10.0])),
        st.tuples(st.just("get"), st.integers(0, 30)),
        st.tuples(st.just("remove"), st.integers(0, 30)),
        st.tuples(st.just("tick"), st.integers(1, 7200)),
    ),
    max_size=80,
)


def _expected_victim_order(wm: WorkingMemory, policy: str) -> list[str]:
    items = wm.items()
    keys = {
        "hybrid": lambda i: (i.importance, i.created_at, i.seq),
        "importance": lambda i: (i.importance, i.seq),
        "lru": lambda i: (i.last_accessed, i.access_seq),
        "frequency": lambda i: (i.access_count, i.last_accessed, i.access_seq),
    }
    return [i.key for i in sorted(items, key=keys[policy])]


@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(max_examples=60, deadline=None)
@given(ops=operations, budget=st.integers(1, 300))
def test_property_budget_order_and_exactly_once(policy, ops, budget):
    """Random operation sequences: never over budget; evictions follow the policy's order
    (as a full sort would give it), only when needed, greedily, and each exactly once."""
    clock = make_clock()
    wm = WorkingMemory(max_tokens=budget, policy=policy, clock=clock)
    resident: set[str] = set()
    evicted_total: list[str] = []
    for op in ops:
        if op[0] == "add":
            _, k, tokens, importance = op
            key = f"k{k}"
            if tokens > budget:
                with pytest.raises(MemoryTooLargeError):
                    wm.add(key, "c", tokens=tokens, importance=importance)
                continue
            before = wm.tokens - (wm.peek(key).token_count if key in wm else 0)
            others = [x for x in _expected_victim_order(wm, policy) if x != key]
            evicted = [i.key for i in wm.add(key, "c", tokens=tokens, importance=importance)]
            need = before + tokens - budget
            if need <= 0:
                assert evicted == []
            else:
                assert evicted == others[: len(evicted)]
            resident.discard(key)
            for e in evicted:
                assert e in resident, "an item was evicted twice or was never resident"
                resident.discard(e)
            resident.add(key)
            evicted_total += evicted
        elif op[0] == "get":
            wm.get(f"k{op[1]}")
        elif op[0] == "remove":
            wm.remove(f"k{op[1]}")
            resident.discard(f"k{op[1]}")
        else:
            clock.advance(seconds=op[1])
        assert wm.tokens <= budget
        assert wm.tokens == sum(i.token_count for i in wm.items())
        assert set(wm.keys()) == resident


@settings(max_examples=40, deadline=None)
@given(ops=operations, budget=st.integers(1, 300))
def test_property_eviction_is_greedy(ops, budget):
    """Eviction stops as soon as the new item fits: without its last victim it would not."""
    wm = WorkingMemory(max_tokens=budget, clock=make_clock())
    for op in ops:
        if op[0] != "add" or op[2] > budget:
            continue
        _, k, tokens, importance = op
        key = f"k{k}"
        base = wm.tokens - (wm.peek(key).token_count if key in wm else 0)
        evicted = wm.add(key, "c", tokens=tokens, importance=importance)
        if evicted:
            freed = sum(i.token_count for i in evicted)
            assert base - freed + tokens <= budget
            assert base - (freed - evicted[-1].token_count) + tokens > budget


@settings(max_examples=40, deadline=None)
@given(ops=operations, limit=st.integers(1, 400), strategy=st.sampled_from(["recent", "important",
                                                                           "balanced"]))
def test_property_assembly_within_budget(ops, limit, strategy):
    wm = WorkingMemory(max_tokens=300, clock=make_clock())
    for op in ops:
        if op[0] == "add" and op[2] <= 300:
            wm.add(f"k{op[1]}", f"content {op[1]}", tokens=op[2], importance=op[3])
    ctx = wm.assemble(strategy, max_tokens=limit)
    assert ctx.tokens <= math.floor(limit * 0.9)
    assert len(set(ctx.keys)) == len(ctx.keys)
    assert all(k in wm for k in ctx.keys)


def test_thread_safety_under_concurrent_adds():
    wm = WorkingMemory(max_tokens=5_000)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(300):
                wm.add(f"t{n}-{i}", "x", tokens=(i % 50) + 1, importance=float(i % 11))
                wm.get(f"t{n}-{i // 2}")
                wm.assemble("balanced", max_tokens=1_000)
                assert wm.tokens <= 5_000
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert wm.tokens == sum(i.token_count for i in wm.items()) <= 5_000


@pytest.mark.parametrize("policy", ["lru", "frequency"])
def test_an_access_at_a_frozen_clock_still_counts_for_eviction(policy):
    """Regression: with the clock not moving, the memory just read was evicted first."""
    wm = WorkingMemory(max_tokens=30, policy=policy, clock=make_clock())
    for key in ("a", "b", "c"):
        wm.add(key, f"memory {key}", tokens=10)
    assert wm.get("a") is not None  # same timestamp as every add
    if policy == "frequency":
        wm.touch("b")
        wm.touch("c")  # b and c now have as many accesses as a, and later ones
        assert wm.get("a") is not None
    gone = [i.key for i in wm.add("d", "memory d", tokens=10)]
    assert gone == ["b"]
    assert "a" in wm


def test_recent_context_puts_the_last_access_first_at_a_frozen_clock():
    wm = WorkingMemory(max_tokens=100, clock=make_clock())
    for key in ("a", "b", "c"):
        wm.add(key, f"memory {key}", tokens=10)
    wm.touch("a")
    assert [i.key for i in wm.select("recent")] == ["a", "c", "b"]
    wm.touch("b")
    assert [i.key for i in wm.select("recent")] == ["b", "a", "c"]


def test_saved_order_numbers_are_kept_when_restoring_items():
    """``seq`` / ``access_seq`` restore a saved working memory's order exactly."""
    wm = WorkingMemory(max_tokens=100, policy="lru", clock=make_clock())
    wm.add("x", "memory x", tokens=10, seq=7, access_seq=40)
    wm.add("y", "memory y", tokens=10, seq=3, access_seq=9)
    assert wm.keys() == ["y", "x"]
    wm.add("z", "memory z", tokens=10)
    assert wm.peek("z").seq == 41  # new numbers continue after the restored ones


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_an_item_put_back_with_its_own_numbers_keeps_its_place(policy):
    """Removing an item and adding it back as it was (a rolled-back change) restores the
    order exactly, with no tie against the stale index entries it left behind."""
    wm = WorkingMemory(max_tokens=100, policy=policy, clock=make_clock())
    for key in ("a", "b", "c"):
        wm.add(key, f"memory {key}", tokens=10)
    wm.touch("b")
    order, recent = wm.keys(), [i.key for i in wm.select("recent")]
    item = wm.remove("b")
    wm.add("b", item.content, tokens=item.token_count, importance=item.importance,
           created_at=item.created_at, last_accessed=item.last_accessed,
           access_count=item.access_count, seq=item.seq, access_seq=item.access_seq)
    assert wm.keys() == order
    assert [i.key for i in wm.select("recent")] == recent
