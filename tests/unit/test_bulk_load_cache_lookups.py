"""While a ``bulk_load`` has dropped the embedding-cache index, ``find_embeddings`` reads
the table once per call, not once per hash.

The lookup was a join from the list of hashes, which without the index became a scan of
the whole table for every hash: ``HTM.add_many`` inside ``SQLiteStore.bulk_load()`` grew
with the square of the store (a 50,000-memory load took four minutes). The work is counted
in SQLite's virtual-machine steps on the store's read connection (its progress handler),
so the test does not depend on the machine's speed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from htm_core.store import NewMemory
from htm_core.store.sqlite import SQLiteStore
from htm_core.store.values import content_hash

STORED = 3_000
EMBEDDER = "test-vectors"


def _rec(i: int) -> NewMemory:
    return NewMemory(key=f"k{i}", content=f"memory number {i}", robot="r1", importance=1.0,
                     token_count=3, created_at=datetime(2024, 5, 1, tzinfo=timezone.utc),
                     embedding=[1.0, float(i % 7), 0.5, 0.0], embedder=EMBEDDER)


def _steps(store: SQLiteStore, call: Callable[[], Any]) -> tuple[int, Any]:
    """SQLite virtual-machine steps (in hundreds) on the store's read connection during
    ``call``, and what it returned."""
    with store.database.lock:
        conn: sqlite3.Connection = store.database.reader()
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    conn.set_progress_handler(tick, 100)
    try:
        result = call()
    finally:
        conn.set_progress_handler(None, 100)
    return count[0], result


def test_cached_embeddings_are_read_in_one_pass_while_the_index_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    loader, other = SQLiteStore(path), SQLiteStore(path)
    try:
        loader.add_many([_rec(i) for i in range(STORED)])
        wanted = [content_hash(f"memory number {i}") for i in range(0, STORED, 3)]
        wanted += [content_hash(f"not stored {i}") for i in range(1_000)]
        indexed, expected = _steps(other, lambda: other.find_embeddings(wanted, EMBEDDER))
        assert len(expected) == STORED // 3 and indexed > 0  # the steps are counted
        with loader.bulk_load():  # drops the index, for every process and store object
            for store in (loader, other):
                steps, found = _steps(store, lambda s=store: s.find_embeddings(wanted, EMBEDDER))
                assert found == expected
                # One pass: about 3,000 rows and 2,000 hashes, a few thousand hundred-steps
                # at most. A scan of 3,000 rows for each of 2,000 hashes is over 100,000.
                assert steps < 2_000 + 2 * indexed, (steps, indexed)
        assert _steps(other, lambda: other.find_embeddings(wanted, EMBEDDER))[1] == expected
    finally:
        loader.close()
        other.close()
