"""An ``add_many`` batch leaves working memory, its persisted membership and the log exactly
as adding the same memories one by one does, on every backend, also when memories of the
batch enter and leave within it (the batch writes only its net membership change, but
logs every eviction)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from htm_core import HTM, FrozenClock, HashingEmbedder

ROBOT = "r1"


def _items(start: int, n: int) -> list[dict[str, Any]]:
    """Memories of 4 to 40 words and importance 1 to 9: under a 300-token budget, many
    leave within the batch that brought them, by the policy's order."""
    return [{"content": " ".join(f"w{i}x{j}" for j in range(4 + (i * 7) % 37)),
             "key": f"m{i}", "importance": float(1 + (i * 5) % 9)}
            for i in range(start, start + n)]


def _state(htm: HTM) -> dict[str, Any]:
    store = htm.store
    _version, rows = store.working_rows(ROBOT)
    return {
        "resident": [i.key for i in htm._wm.items()],  # in eviction order
        "rows": [(r.memory.key, r.state.seq, r.state.access_seq, r.state.access_count)
                 for r in rows],
        "evicted": [op.key for op in reversed(store.operations(op="evict", limit=10_000))],
        "added": sorted(op.key or "" for op in store.operations(op="add", limit=10_000)),
    }


def _htm(url: str, clock: FrozenClock) -> HTM:
    return HTM(robot=ROBOT, database_url=url, embedder=HashingEmbedder(dim=32), clock=clock,
               working_memory_tokens=300)


def test_a_batch_leaves_what_one_by_one_adds_leave(store_url: str, tmp_path: Any,
                                                   request: pytest.FixtureRequest) -> None:
    if store_url.startswith("postgresql"):
        from tests.pg import fresh_database

        other = fresh_database(request.getfixturevalue("postgres_server_url"))
        other_url = next(other)
    else:
        other, other_url = None, str(tmp_path / "one_by_one.db")
    start = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
    try:
        with _htm(store_url, FrozenClock(start)) as batched:
            batched.add_many(_items(0, 10))
            batched.add_many(_items(10, 60))
            want_in_process = [i.key for i in batched._wm.items()]
            got = _state(batched)
        with _htm(other_url, FrozenClock(start)) as single:
            for item in _items(0, 70):
                single.add(**item)
            expected = _state(single)
        assert len(got["evicted"]) > 40  # many left, some within the batch that brought them
        assert got == expected
        # A restart rebuilds the same working memory from the persisted rows.
        with _htm(store_url, FrozenClock(start)) as again:
            assert [i.key for i in again._wm.items()] == want_in_process
    finally:
        if other is not None:
            other.close()
