"""The SQLite store's reads keep what they cached over the store's own working-set writes
(a recall's write-behind flush changes nothing they hold), and still notice every commit of
another connection, also one that lands right after such a write. A real SQLite file; the
other connection is a second store object on it (another process's, as far as SQLite can
tell)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from htm_core.embeddings import HashingEmbedder
from htm_core.store import NewMemory, SearchFilters, open_store
from htm_core.store.base import WorkingChange
from htm_core.store.sqlite.store import SQLiteStore

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
EMB = HashingEmbedder(dim=16)
EVERYTHING = SearchFilters()


def _new(i: int) -> NewMemory:
    text = f"turn {i} of the conversation"
    return NewMemory(key=f"k{i}", content=text, robot="r", importance=1.0, token_count=5,
                     created_at=T0 + timedelta(seconds=i), embedding=EMB.embed_query(text),
                     embedder=EMB.name)


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SQLiteStore, SQLiteStore, list[int]]]:
    url = str(tmp_path / "marks.db")
    mine, other = open_store(url), open_store(url)
    assert isinstance(mine, SQLiteStore) and isinstance(other, SQLiteStore)
    try:
        ids = [r.memory.id for r in mine.add_many([_new(i) for i in range(6)])]
        yield mine, other, ids
    finally:
        mine.close()
        other.close()


def _statements(store: SQLiteStore) -> list[str]:
    """Every statement the store's read connection runs from now on."""
    seen: list[str] = []
    with store.reads.cursor() as cur:
        conn: sqlite3.Connection = cur.connection
    conn.set_trace_callback(seen.append)
    return seen


def test_the_stores_own_working_write_keeps_what_reads_cached(
        stores: tuple[SQLiteStore, SQLiteStore, list[int]]) -> None:
    mine, _other, ids = stores
    assert set(mine.briefs(ids, EVERYTHING)) == set(ids)
    before = mine.working_version("r")
    mine.apply_working(WorkingChange(robot="r", at=T0, touch=[ids[0]]))
    statements = _statements(mine)
    assert set(mine.briefs(ids, EVERYTHING)) == set(ids)
    assert not [s for s in statements if s.startswith("SELECT m.id, m.version")]
    # What the write did change is read again: the robot's working-set version.
    assert mine.working_version("r") == before + 1


def test_a_commit_of_another_connection_is_seen_after_the_own_write(
        stores: tuple[SQLiteStore, SQLiteStore, list[int]]) -> None:
    mine, other, ids = stores
    assert set(mine.briefs(ids, EVERYTHING)) == set(ids)
    mine.apply_working(WorkingChange(robot="r", at=T0, touch=[ids[0]]))
    other.forget("k2", robot="r", at=T0)
    assert ids[2] not in mine.briefs(ids, EVERYTHING)


def test_a_commit_landing_right_after_the_own_write_is_seen(
        stores: tuple[SQLiteStore, SQLiteStore, list[int]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another connection commits between the own write's commit and its second reading of
    the marks: the reads must not take the new state for the one before the write."""
    from htm_core.store.sqlite.reads import OwnWrite

    mine, other, ids = stores
    assert set(mine.briefs(ids, EVERYTHING)) == set(ids)
    after = OwnWrite.after

    def racing(self: Any, writer: Any) -> None:
        other.forget("k3", robot="r", at=T0)
        after(self, writer)

    monkeypatch.setattr(OwnWrite, "after", racing)
    mine.apply_working(WorkingChange(robot="r", at=T0, touch=[ids[0]]))
    assert ids[3] not in mine.briefs(ids, EVERYTHING)
    assert ids[3] not in {m.id for m in mine.get_many(ids)}
