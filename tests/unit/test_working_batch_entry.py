"""A batch entering working memory at once (``WorkingMemory.add_checked`` under
``ResidentSet.stage_enter``) leaves exactly what entering its memories one by one through
``WorkingMemory.add`` left: the same items with the same state, the same evictions in the
same order, the same change to write, the same flags on the memories; and a rollback puts
back exactly what was there before. Every policy, with re-adds, repeated keys within a
batch, items larger than the budget and accesses (recalls) as well as adds."""

from __future__ import annotations

import dataclasses
import logging
import random
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from htm_core import FrozenClock
from htm_core.clock import to_timestamp
from htm_core.errors import MemoryTooLargeError
from htm_core.models import Memory
from htm_core.working import WorkingMemory
from htm_core.working.eviction import POLICIES, WorkingItem
from htm_core.working.memory import _item
from htm_core.working.resident import ResidentSet

START = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)


def _memory(i: int, rng: random.Random) -> Memory:
    return Memory(id=i, key=f"k{i}", content=f"memory {i}", content_hash=f"h{i}", robot="r",
                  importance=float(rng.choice([1, 2, 5, 9, 9.5])),
                  token_count=rng.choice([1, 3, 7, 20, 45, 200]),
                  created_at=START + timedelta(seconds=rng.randrange(10_000)),
                  last_accessed=START, access_count=rng.randrange(3))


def _one_by_one(rs: ResidentSet, memories: list[Memory], accessed: datetime | None
                ) -> tuple[list[str], list[str], list[Memory]]:
    """What ``ResidentSet._enter`` did before batches: ``WorkingMemory.add`` per memory."""
    rs.rollback()
    undo: list[Any] = []
    rs._undo, rs._evicted = undo, []
    entered: dict[str, None] = {}
    evicted: list[str] = []
    shown: list[Memory] = []
    at = to_timestamp(accessed) if accessed is not None else None
    for memory in memories:
        old = rs.wm.peek(memory.key)
        try:
            gone = rs.wm.add(memory.key, memory.content, tokens=memory.token_count,
                             importance=memory.importance,
                             created_at=to_timestamp(memory.created_at), last_accessed=at,
                             access_count=memory.access_count)
        except MemoryTooLargeError:
            shown.append(dataclasses.replace(memory, in_working_memory=False))
            continue
        undo.append((memory.key, old, rs.memories.get(memory.key)))
        memory = dataclasses.replace(memory, in_working_memory=True)
        shown.append(memory)
        rs.memories[memory.key] = memory
        entered[memory.key] = None
        for item in gone:
            undo.append((item.key, item, rs.memories.pop(item.key, None)))
            evicted.append(item.key)
            rs._evicted.append((item.key, item.content))
    return [k for k in entered if k in rs.wm], evicted, shown


def _snapshot(rs: ResidentSet) -> dict[str, Any]:
    """Everything about the working memory that a caller can observe."""
    wm = rs.wm
    return {
        "items": [dataclasses.asdict(i) for i in wm.items()],  # eviction order
        "tokens": wm.tokens,
        "evictions": wm.evictions,
        "memories": {k: (m.id, m.in_working_memory) for k, m in rs.memories.items()},
        "contexts": [[i.key for i in wm.select(s, 10_000)]
                     for s in ("recent", "important", "balanced")],
    }


def _restorable(snapshot: dict[str, Any]) -> dict[str, Any]:
    """What a rollback restores: not the eviction counter, nor an item's ``added_at`` (a
    put-back item is added anew; both as before batches)."""
    items = [{k: v for k, v in i.items() if k != "added_at"} for i in snapshot["items"]]
    return {**snapshot, "items": items, "evictions": None}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("seed", range(6))
def test_a_batch_enters_as_one_by_one_adds_did(policy: str, seed: int,
                                               caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(seed)
    clock = FrozenClock(START)
    sets = [ResidentSet(WorkingMemory(150, policy, clock=clock), None,  # type: ignore[arg-type]
                        "r", clock=clock) for _ in range(2)]
    pool = [_memory(i, rng) for i in range(60)]
    told: set[str] = set()  # the keys of the too-large memories warned about
    for _step in range(25):
        batch = [dataclasses.replace(rng.choice(pool)) for _ in range(rng.randrange(1, 30))]
        accessed = clock() if rng.random() < 0.3 else None
        twins = [[dataclasses.replace(m) for m in batch] for _ in sets]
        before = [_snapshot(rs) for rs in sets]
        assert before[0] == before[1]
        with caplog.at_level(logging.WARNING, logger="htm_core.working.resident"):
            caplog.clear()
            batched, batch_shown = sets[0].stage_enter(twins[0], accessed=accessed)
            warned = [r.getMessage() for r in caplog.records]
        entered, evicted, one_shown = _one_by_one(sets[1], twins[1], accessed)
        assert batched.evict == evicted
        assert [s.key for s in batched.put] == entered
        assert batched.put == [sets[1].state(k) for k in entered]
        assert sets[0]._evicted == sets[1]._evicted
        assert [m.in_working_memory for m in batch_shown] == \
            [m.in_working_memory for m in one_shown]
        assert batch_shown == one_shown
        first_time = [k for k in dict.fromkeys(m.key for m in twins[0] if m.token_count > 150)
                      if k not in told]
        told.update(first_time)
        sizes = {m.key: m.token_count for m in twins[0]}
        assert warned == [f"item {k!r} has {sizes[k]} tokens, more than the whole "
                          f"working-memory budget of 150; it can live in long-term memory only"
                          for k in first_time]  # once per memory, not per batch
        assert _snapshot(sets[0]) == _snapshot(sets[1])
        if rng.random() < 0.3:  # the write failed: both put back what was there before
            for rs, was in zip(sets, before, strict=True):
                rs.rollback()
                assert _restorable(_snapshot(rs)) == _restorable(was)
            assert _snapshot(sets[0]) == _snapshot(sets[1])
        else:
            for rs in sets:
                rs.commit(None)
        clock.advance(seconds=rng.choice([0, 1, 30]))


def test_the_fast_item_is_the_dataclass_item() -> None:
    fast = _item("k", "text", 3, 2.5, 10.0, 11.0, 12.0, 4, 7, 8)
    slow = WorkingItem(key="k", content="text", token_count=3, importance=2.5, created_at=10.0,
                       added_at=11.0, last_accessed=12.0, access_count=4, seq=7, access_seq=8)
    assert dataclasses.asdict(fast) == dataclasses.asdict(slow)
    assert fast.metadata is not _item("j", "t", 1, 1.0, 1.0, 1.0, 1.0, 0, 1, 1).metadata


def test_add_checked_returns_the_error_add_raises() -> None:
    wm = WorkingMemory(10)
    out = wm.add_checked([("a", "x", 4, 1.0, 1.0, 0), ("b", "y", 11, 1.0, 1.0, 0),
                          ("c", "z", 7, 1.0, 1.0, 0)])
    assert out[0] == []
    assert isinstance(out[1], MemoryTooLargeError)
    with pytest.raises(MemoryTooLargeError) as raised:
        wm.add("b", "y", tokens=11)
    assert str(out[1]) == str(raised.value)
    assert [i.key for i in out[2]] == ["a"]  # type: ignore[union-attr]
    assert wm.keys() == ["c"]
