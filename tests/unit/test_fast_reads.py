"""The SQLite reads on recall's path keep what they read current: briefs (whose text a
store caches by memory version) follow an update or a forget made by another store object
on the same file, and ``get_many`` returns each memory's tags sorted by name. The raw read
block (``store.reads.cursor``) maps errors as every other read does and lets go of its lock, and a
recall's search reads ``data_version`` once, in no read transaction."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from htm_core.errors import DatabaseCorruptError, StoreError, ValidationError
from htm_core.store.base import ArmQuery, NewMemory, SearchFilters
from htm_core.store.sqlite import SQLiteStore

START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _record(key: str, content: str, tags: tuple[str, ...] = ()) -> NewMemory:
    return NewMemory(key=key, content=content, robot="r", importance=1.0, token_count=3,
                     created_at=START, tags=tags)


def test_briefs_follow_another_stores_update_and_forget(tmp_path: Path) -> None:
    reader = SQLiteStore(str(tmp_path / "m.db"))
    writer = SQLiteStore(str(tmp_path / "m.db"))
    try:
        made = reader.add_many([_record(f"k{i}", f"first text {i}") for i in range(3)])
        ids = [r.memory.id for r in made]
        assert {b.content for b in reader.briefs(ids, SearchFilters()).values()} == {
            "first text 0", "first text 1", "first text 2"}
        writer.update_memory(_record("k1", "second text"), robot="r",
                             at=START + timedelta(days=1))
        writer.forget("k2", robot="r", at=START + timedelta(days=1))
        briefs = reader.briefs(ids, SearchFilters())
        assert sorted(briefs) == ids[:2]
        assert briefs[ids[1]].content == "second text"
        assert briefs[ids[0]].content == "first text 0"
    finally:
        reader.close()
        writer.close()


def test_get_many_tags_sorted_and_forgotten_left_out(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "m.db"))
    try:
        made = store.add_many([_record("a", "tagged", ("zeta", "Alpha", "émile", "beta")),
                               _record("b", "plain"), _record("c", "gone")])
        store.forget("c", robot="r", at=START + timedelta(days=1))
        got = store.get_many([r.memory.id for r in made][::-1])
        assert [m.key for m in got] == ["b", "a"]
        assert got[1].tags == tuple(sorted(("zeta", "Alpha", "émile", "beta")))
        assert got[0].tags == ()
        assert [m.key for m in store.get_many([made[2].memory.id], include_forgotten=True)] == ["c"]
    finally:
        store.close()


def test_search_arms_with_tags_and_a_reload_in_memory_and_on_a_file(tmp_path: Path) -> None:
    """search_arms reads its arms in one snapshot of the read connection; the parts that
    read through the pool meanwhile (a tag filter, an index reload) must work as well, also
    in an in-memory database, whose one connection is the pool's too."""
    for where in (":memory:", str(tmp_path / "f.db")):
        store = SQLiteStore(where)
        try:
            made = store.add_many([
                NewMemory(key=f"k{i}", content=f"garden note {i}", robot="r", importance=1.0,
                          token_count=3, created_at=START, tags=("home",) if i % 2 else (),
                          embedding=[1.0, float(i), 0.0], embedder="e")
                for i in range(4)])
            tagged = SearchFilters(tags=("home",))
            store.mirror.stale = True  # the next search reloads the vector index
            vector, text = store.search_arms([
                ArmQuery(vector=[1.0, 3.0, 0.0], limit=5, filters=tagged),
                ArmQuery(text="garden", limit=5, filters=tagged)])
            odd = {r.memory.id for r in made[1::2]}
            assert {mid for mid, _ in vector} == odd and {mid for mid, _ in text} == odd
        finally:
            store.close()


def test_read_block_maps_errors_and_lets_go(tmp_path: Path) -> None:
    """A driver error in a raw read becomes htm's (naming what was read), a value that
    cannot be read back is damage, htm's own errors and others pass as they are; after
    each, the read transaction is over and the lock is free for another thread."""
    store = SQLiteStore(str(tmp_path / "m.db"))
    try:
        with pytest.raises(StoreError, match="reading the test rows") as caught, \
                store.reads.cursor("reading the test rows") as cur:
            cur.execute("SELECT nothing FROM no_such_table")
        assert isinstance(caught.value.__cause__, sqlite3.Error)
        for raised, expected in ((ValueError("bad"), DatabaseCorruptError),
                                 (ValidationError("own"), ValidationError),
                                 (KeyError("other"), KeyError)):
            with pytest.raises(expected), store.reads.cursor() as cur:
                cur.execute("SELECT 1")
                raise raised
            assert not store.database.reader().in_transaction
            assert store.database.lock.acquire(blocking=False)  # not held by an unfinished block
            store.database.lock.release()
        with store.reads.cursor() as outer, store.reads.cursor(snapshot=False) as inner:
            assert inner.connection is outer.connection and outer.connection.in_transaction
        assert not store.database.reader().in_transaction
    finally:
        store.close()


def test_search_arms_reads_the_mark_once_without_a_transaction(tmp_path: Path) -> None:
    """Every arm of a recall's search goes by one ``data_version`` read first (what is read
    after it is as new or newer): no BEGIN, one PRAGMA, whatever the number of arms."""
    store = SQLiteStore(str(tmp_path / "m.db"))
    try:
        store.add_many([NewMemory(key=f"k{i}", content=f"garden note {i}", robot="r",
                                  importance=1.0, token_count=3, created_at=START,
                                  embedding=[1.0, float(i), 0.0], embedder="e")
                        for i in range(4)])
        arms = [ArmQuery(vector=[1.0, 2.0, 0.0], limit=5, filters=SearchFilters()),
                ArmQuery(text="garden", limit=5, filters=SearchFilters()),
                ArmQuery(vector=[1.0, 0.0, 0.0], limit=5, filters=SearchFilters())]
        first = store.search_arms(arms)
        seen: list[str] = []
        store.database.reader().set_trace_callback(seen.append)
        assert store.search_arms(arms) == first
        ours = [s for s in seen if not s.startswith("--")]  # not FTS5's own statements
        assert sum(s.startswith("PRAGMA data_version") for s in ours) == 1
        assert not any(s.startswith(("BEGIN", "ROLLBACK")) for s in ours)
    finally:
        store.close()
