"""The SQLite reads on recall's path keep what they read current: briefs (whose text a
store caches by memory version) follow an update or a forget made by another store object
on the same file, and ``get_many`` returns each memory's tags sorted by name."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from htm_core.store.base import NewMemory, SearchFilters
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
    from htm_core.store.base import ArmQuery

    for where in (":memory:", str(tmp_path / "f.db")):
        store = SQLiteStore(where)
        try:
            made = store.add_many([
                NewMemory(key=f"k{i}", content=f"garden note {i}", robot="r", importance=1.0,
                          token_count=3, created_at=START, tags=("home",) if i % 2 else (),
                          embedding=[1.0, float(i), 0.0], embedder="e")
                for i in range(4)])
            tagged = SearchFilters(tags=("home",))
            store._index_stale = True  # the next search reloads the vector index
            vector, text = store.search_arms([
                ArmQuery(vector=[1.0, 3.0, 0.0], limit=5, filters=tagged),
                ArmQuery(text="garden", limit=5, filters=tagged)])
            odd = {r.memory.id for r in made[1::2]}
            assert {mid for mid, _ in vector} == odd and {mid for mid, _ in text} == odd
        finally:
            store.close()
