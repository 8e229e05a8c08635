"""An ``add_many`` batch leaves working memory, its persisted membership and the log exactly
as adding the same memories one by one does, on every backend and under every eviction
policy, also when memories of the batch enter and leave within it (the batch writes only
its net membership change, but logs every eviction), when it re-adds memories of an earlier
batch and when one of its memories is larger than the whole budget."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from htm_core import HTM, FrozenClock, HashingEmbedder

ROBOT = "r1"


def _items(start: int, n: int) -> list[dict[str, Any]]:
    """Memories of 4 to 40 words and importance 1 to 9: under a 300-token budget, many
    leave within the batch that brought them, by the policy's order. Every 13th is one of
    an earlier batch added again; m33 is larger than the whole budget."""
    def content(i: int) -> str:
        return " ".join(f"w{i}x{j}" for j in range(4 + (i * 7) % 37 + (400 if i == 33 else 0)))

    return [{"content": content(j), "key": f"m{j}", "importance": float(1 + (j * 5) % 9)}
            for i in range(start, start + n) for j in [i % 10 if i % 13 == 0 and i >= 10 else i]]


def _state(htm: HTM, results: list[Any]) -> dict[str, Any]:
    store = htm.store
    _version, rows = store.working_rows(ROBOT)
    return {
        "resident": [i.key for i in htm._wm.items()],  # in eviction order
        "items": [(i.key, i.importance, i.created_at, i.last_accessed, i.access_count, i.seq,
                   i.access_seq, i.token_count) for i in htm._wm.items()],
        "results": [(m.key, m.id, m.access_count, m.in_working_memory) for m in results],
        "metrics": htm.metrics.snapshot().get("evictions"),
        "rows": [(r.memory.key, r.state.seq, r.state.access_seq, r.state.access_count)
                 for r in rows],
        "evicted": [(op.key, op.robot, op.detail)
                    for op in reversed(store.operations(op="evict", limit=10_000))],
        "added": sorted(op.key or "" for op in store.operations(op="add", limit=10_000)),
    }


def _htm(url: str, clock: FrozenClock, policy: str) -> HTM:
    return HTM(robot=ROBOT, database_url=url, embedder=HashingEmbedder(dim=32), clock=clock,
               working_memory_tokens=300, eviction=policy)


@pytest.mark.parametrize("policy", ["hybrid", "lru", "importance", "frequency"])
def test_a_batch_leaves_what_one_by_one_adds_leave(store_url: str, tmp_path: Any,
                                                   request: pytest.FixtureRequest,
                                                   policy: str) -> None:
    if store_url.startswith("postgresql"):
        from tests.pg import fresh_database

        other = fresh_database(request.getfixturevalue("postgres_server_url"))
        other_url = next(other)
    else:
        other, other_url = None, str(tmp_path / "one_by_one.db")
    start = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
    try:
        with _htm(store_url, FrozenClock(start), policy) as batched:
            results = batched.add_many(_items(0, 10))
            results += batched.add_many(_items(10, 60))
            want_in_process = [i.key for i in batched._wm.items()]
            got = _state(batched, results)
        with _htm(other_url, FrozenClock(start), policy) as single:
            results = [single.add(**item) for item in _items(0, 70)]
            expected = _state(single, results)
        assert len(got["evicted"]) > 40  # many left, some within the batch that brought them
        assert ("m33", False) in [(k, w) for k, _i, _n, w in got["results"]]
        assert got == expected
        # A restart rebuilds the same working memory from the persisted rows.
        with _htm(store_url, FrozenClock(start), policy) as again:
            assert [i.key for i in again._wm.items()] == want_in_process
    finally:
        if other is not None:
            other.close()
