"""Schema version 8: every memory and every superseded version has a kind, a source and a
confidence. A store of version 7 is migrated in place: its memories (and their history)
become ``episodic`` with no source and no confidence, without a row rewritten, and the
index of kinds serves filters from then on."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import text

from htm_core import HTM
from htm_core.store import SCHEMA_VERSION


def _to_version_7(htm: HTM) -> None:
    """Take the store back to schema version 7 (the columns and index of 8 dropped)."""
    with htm.store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(text("DROP INDEX memories_kind"))
        for table in ("memories", "memory_versions"):
            for column in ("kind", "source", "confidence"):
                conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(text("UPDATE htm_meta SET value = '7' WHERE key = 'schema_version'"))


def _indexes(htm: HTM, store_url: str) -> set[str]:
    sql = ("SELECT name FROM sqlite_master WHERE type = 'index'" if store_url.endswith(".db")
           else "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")
    with htm.store.engine.begin() as conn:  # type: ignore[attr-defined]
        return {str(r[0]) for r in conn.execute(text(sql))}


def test_a_store_of_version_7_is_migrated_to_kinds(
        htm_factory: Callable[..., HTM], store_url: str) -> None:
    htm = htm_factory(robot="r")
    htm.add("an old note about tea", key="old", tags=["t"])
    htm.update("old", "an old note about green tea")
    htm.add("another old note", key="older")
    _to_version_7(htm)
    htm.close()
    again = htm_factory(robot="r")
    assert again.store.schema_version() == SCHEMA_VERSION == 8
    assert "memories_kind" in _indexes(again, store_url)
    assert [(m.version, m.kind, m.source, m.confidence) for m in again.versions("old")] == [
        (1, "episodic", None, None), (2, "episodic", None, None)]
    again.add("I prefer green tea", key="new", kind="preference", source="user",
              confidence=0.9)
    assert [m.key for m in again.list(kinds="preference").memories] == ["new"]
    assert {m.key for m in again.list(kinds=["episodic"]).memories} == {"old", "older"}
    assert [h.memory.key for h in again.recall("tea", kinds="preference")] == ["new"]
    updated = again.update("old", "an old note about green tea", kind="fact", source="import")
    assert (updated.version, updated.kind, updated.source) == (3, "fact", "import")
    assert [m.kind for m in again.versions("old")] == ["episodic", "episodic", "fact"]
