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
