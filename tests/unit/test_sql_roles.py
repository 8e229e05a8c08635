"""The shared SQL roles call their parts as ``_sql/parts.py`` says: listeners hear of each
forget, restore, purge and update inside its transaction and after its commit, in order,
and a write that does not commit puts back what a part cached (a real SQLite file)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Connection

from htm_core.errors import NotFoundError
from htm_core.models import Memory
from htm_core.store._sql.dialect import SQLITE
from htm_core.store._sql.forgetting import Forgetting
from htm_core.store._sql.parts import NoListener, RowListener
from htm_core.store._sql.versions import Versions
from htm_core.store.base import NewMemory
from htm_core.store.sqlite import SQLiteStore
from htm_core.store.sqlite.history import SQLiteHistory
from htm_core.store.sqlite.working import unhold

AT = datetime(2024, 1, 1, tzinfo=timezone.utc)


class Recorder(RowListener):
    """Writes down what it hears, and whether a transaction was open then."""

    def __init__(self) -> None:
        self.heard: list[tuple[Any, ...]] = []

    def visibility_changed(self, conn: Connection) -> None:
        self.heard.append(("changed", conn.in_transaction()))

    def purged(self, conn: Connection, ids: Sequence[int]) -> None:
        self.heard.append(("purged", list(ids), conn.in_transaction()))

    def after_visibility(self, memory_id: int, *, alive: bool) -> None:
        self.heard.append(("after_visibility", memory_id, alive))

    def after_purge(self, ids: Sequence[int]) -> None:
        self.heard.append(("after_purge", list(ids)))

    def after_update(self, memory: Memory, vector: Sequence[float] | None,
                     text_changed: bool) -> None:
        self.heard.append(("after_update", memory.content, text_changed))


def _record(key: str, content: str) -> NewMemory:
    return NewMemory(key=key, content=content, robot="ada", importance=1.0, token_count=2,
                     created_at=AT)


def test_forgetting_tells_each_listener_in_order(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "roles.db"))
    try:
        made = store.add_many([_record("Ada", "one"), _record("ada", "two")])
        upper, lower = (r.memory.id for r in made)
        first, second = Recorder(), Recorder()
        role = Forgetting(store.database, SQLITE, store.rows, unhold=unhold,
                          listeners=[first, NoListener(), second])
        assert role.forget("Ada", robot="ada", at=AT).forgotten_at == AT
        assert role.forget("Ada", robot="ada", at=AT).id == upper  # already forgotten: nothing
        assert role.restore("Ada", robot="ada").forgotten_at is None
        role.forget("ada", robot="ada", at=AT)
        assert role.purge(robot="ada") == 1
        assert store.get("ada", include_forgotten=True) is None
        assert store.get("Ada") is not None
        with pytest.raises(NotFoundError):
            role.forget("ADA", robot="ada", at=AT)
        assert first.heard == second.heard == [
            ("changed", True), ("after_visibility", upper, False),
            ("after_visibility", upper, False),
            ("changed", True), ("after_visibility", upper, True),
            ("changed", True), ("after_visibility", lower, False),
            ("changed", True), ("purged", [lower], True), ("after_purge", [lower])]
    finally:
        store.close()


def test_versions_tell_listeners_of_a_new_text(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "roles.db"))
    try:
        store.add_many([_record("k", "old text")])
        heard = Recorder()
        role = Versions(store.database, SQLITE, store.rows, SQLiteHistory(store.database),
                        listeners=[heard])
        role.update_memory(_record("k", "new text"), robot="ada", at=AT)
        role.update_memory(_record("k", "new text"), robot="ada", at=AT)  # nothing changes
        assert heard.heard == [("changed", True), ("after_update", "new text", True),
                               ("after_update", "new text", False)]
        assert [m.content for m in store.versions("k")] == ["old text", "new text"]
    finally:
        store.close()


def test_a_write_that_does_not_commit_puts_back_the_vector_generation(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "roles.db"))
    try:
        before = store.mirror.saved()
        with pytest.raises(RuntimeError), store.database.write() as conn:
            store.mirror.bump_generation(conn)
            assert store.mirror.saved() != before
            raise RuntimeError("the write fails after the bump")
        assert store.mirror.saved() == before
        with store.database.write() as conn:
            store.mirror.bump_generation(conn)
        assert store.mirror.saved() != before
    finally:
        store.close()
