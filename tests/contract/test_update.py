"""``HTM.update`` on every backend: a new version in place, the old one kept and recoverable,
logged, re-embedded and re-indexed; working memories (also another ``HTM``'s) show the new
text; one transaction; recall of history only when asked; the re-add of a replaced text;
the version-2 upgrade."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest
from sqlalchemy import create_engine, text

from htm_core import HTM
from htm_core.errors import DimensionMismatchError, NotFoundError
from htm_core.store import SCHEMA_VERSION, ArmQuery, NewMemory, SearchFilters, open_store


def _keys_and_versions(hits):
    return [(h.memory.key, h.memory.version, h.memory.superseded) for h in hits]


def test_update_keeps_the_memory_and_its_history(htm_factory):
    htm = htm_factory(robot="ada")
    first = htm.add("Ada prefers Vim keybindings", key="editor", importance=4.0,
                    tags=["user:prefs"], metadata={"source": "chat"})
    updated = htm.update("editor", "Ada switched to Helix", tags=["user:prefs", "tools"])
    assert (updated.id, updated.key, updated.created_at) == (first.id, first.key,
                                                            first.created_at)
    assert (updated.version, updated.content, updated.importance) == (
        2, "Ada switched to Helix", 4.0)
    assert set(updated.tags) == {"user:prefs", "tools"} and updated.metadata == {"source": "chat"}
    assert updated.superseded_at is None and not updated.superseded
    assert htm.get("editor").content == "Ada switched to Helix"
    old, current = htm.versions("editor")
    assert (old.version, old.content, old.tags, old.importance) == (
        1, "Ada prefers Vim keybindings", ("user:prefs",), 4.0)
    assert old.superseded and old.key == "editor" and old.id == first.id
    assert current.version == 2 and not current.superseded
    assert htm.get("editor", version=1).content == "Ada prefers Vim keybindings"
    assert htm.get("editor", version=2).content == "Ada switched to Helix"
    assert htm.get("editor", version=3) is None
    line = htm.operations(op="update", limit=1)[0]
    assert (line.key, line.robot, line.detail["version"], line.detail["superseded"]) == (
        "editor", "ada", 2, 1)
    # Restoring the old text is one more version; every step stays in the history.
    htm.update("editor", old.content)
    assert [v.content for v in htm.versions("editor")] == [
        "Ada prefers Vim keybindings", "Ada switched to Helix", "Ada prefers Vim keybindings"]
    assert htm.stats().long_term_total == 1


def test_recall_follows_the_new_text_and_history_only_when_asked(htm_factory):
    htm = htm_factory(robot="ada")
    htm.add("The launch is planned for Tuesday", key="launch")
    htm.add("Lunch with Bob on Friday", key="lunch")
    htm.update("launch", "The launch moved to Thursday afternoon")
    for strategy in ("fulltext", "hybrid", "vector"):
        keys = [h.memory.key for h in htm.recall("Thursday afternoon launch", strategy=strategy)]
        assert keys[0] == "launch", strategy
    assert all(h.memory.content != "The launch is planned for Tuesday"
               for h in htm.recall("Tuesday", strategy="hybrid", limit=10))
    assert htm.recall("Tuesday", strategy="fulltext") == []
    hits = htm.recall("Tuesday", strategy="fulltext", include_history=True)
    assert _keys_and_versions(hits) == [("launch", 1, True)]
    assert hits[0].memory.content == "The launch is planned for Tuesday"
    both = htm.recall("launch Tuesday Thursday", include_history=True, limit=10)
    assert {("launch", 1, True), ("launch", 2, False)} <= set(_keys_and_versions(both))
    assert len(htm.recall("launch Tuesday Thursday", include_history=True, limit=1)) == 1
    # A superseded version never enters working memory; its memory's current text does.
    assert htm.working_memory.get("launch").content == "The launch moved to Thursday afternoon"
    # Filters apply to the memory: another robot's scope, a tag the memory lacks.
    assert htm.recall("Tuesday", strategy="fulltext", include_history=True, robot="bob") == []
    assert htm.recall("Tuesday", strategy="fulltext", include_history=True, tags=["x"]) == []


def test_identical_update_is_a_no_op_and_attribute_changes_are_versions(htm_factory):
    htm = htm_factory(robot="ada")
    htm.add("Tea at five", key="tea", importance=2.0)
    logged = len(htm.operations(limit=1000))
    same = htm.update("tea", "Tea at five")
    assert same.version == 1 and htm.versions("tea")[-1].version == 1
    assert len(htm.operations(limit=1000)) == logged
    before = htm.store.get("tea", include_embedding=True)
    raised = htm.update("tea", "Tea at five", importance=8.0)
    assert (raised.version, raised.importance) == (2, 8.0)
    after = htm.store.get("tea", include_embedding=True)
    assert after.embedding == before.embedding  # same text: the vector is kept
    assert [v.importance for v in htm.versions("tea")] == [2.0, 8.0]


def test_unknown_and_forgotten_keys_are_refused_and_nothing_changes(htm_factory):
    htm = htm_factory(robot="ada")
    htm.add("A note", key="note")
    htm.forget("note", confirm=True)
    logged = len(htm.operations(limit=1000))
    with pytest.raises(NotFoundError, match="never stored"):
        htm.update("nope", "text")
    with pytest.raises(NotFoundError, match="restore"):
        htm.update("note", "text")
    assert len(htm.operations(limit=1000)) == logged
    assert htm.get("note", include_forgotten=True).content == "A note"
    htm.restore("note")
    assert htm.update("note", "text").version == 2


def test_a_failed_update_changes_nothing(store_url):
    """The store's update is one transaction: a vector of the wrong dimension fails it after
    the history row and the new text were written; neither stays."""
    store = open_store(store_url)
    try:
        at = datetime.now(timezone.utc)
        record = NewMemory(key="k", content="first text", robot="r", importance=1.0,
                           token_count=2, created_at=at, tags=("a",),
                           embedding=[1.0, 0.0, 0.0], embedder="e")
        store.add_many([record])
        logged = len(store.operations(limit=1000))
        with pytest.raises(DimensionMismatchError):
            store.update_memory(replace(record, content="second text", tags=("b",),
                                        embedding=[1.0, 0.0]), robot="r", at=at)
        assert [(m.version, m.content, m.tags) for m in store.versions("k")] == [
            (1, "first text", ("a",))]
        assert len(store.operations(limit=1000)) == logged
        assert store.search_history(ArmQuery(limit=5, filters=SearchFilters(),
                                             text="first")) == []
        assert [mid for mid, _ in store.fulltext_search("first", limit=5,
                                                         filters=SearchFilters())] != []
    finally:
        store.close()


def test_another_htm_shows_the_new_text_never_the_old(htm_factory):
    """Two instances of one robot and another robot, each holding the memory in working
    memory: after one updates it, every context shows the new text and never the old."""
    writer, twin, other = (htm_factory(robot="ada"), htm_factory(robot="ada"),
                           htm_factory(robot="bob"))
    writer.add("Meeting room is B12", key="room")
    writer.add("Coffee machine is broken", key="coffee")
    other.recall("meeting room", strategy="fulltext")
    assert "Meeting room is B12" in twin.create_context().text
    assert "Meeting room is B12" in other.create_context().text
    writer.update("room", "Meeting room moved to C3")
    for htm in (writer, twin, other):
        ctx = htm.create_context()
        assert "Meeting room moved to C3" in ctx.text and "B12" not in ctx.text
        assert htm.working_memory.get("room").content == "Meeting room moved to C3"
    assert "Coffee machine is broken" in twin.create_context().text
    twin.update("room", "Meeting room moved to D4 (C3 flooded)")
    assert "D4" in writer.create_context().text and "C3 flooded" in other.create_context().text


def test_an_update_that_keeps_the_text_reaches_every_working_memory(htm_factory):
    """Importance, tags and metadata changed without a new text are seen by the updating
    instance, a twin of its robot and another robot holding the memory (the catch-up
    compares versions, not only content hashes)."""
    writer, twin, other = (htm_factory(robot="ada"), htm_factory(robot="ada"),
                           htm_factory(robot="bob"))
    writer.add("Meeting room is B12", key="room", importance=3.0, tags=["office"])
    other.recall("meeting room", strategy="fulltext")
    twin.create_context()
    assert twin.working_memory.get("room").importance == 3.0
    writer.update("room", "Meeting room is B12", importance=9.5, tags=["office", "rooms"])
    for htm in (writer, twin, other):
        htm.create_context()
        assert htm.working_memory.get("room").importance == 9.5, htm.robot
    other.recall("meeting room", strategy="fulltext")  # its access written behind, pending
    writer.update("room", "Meeting room moved to C3")
    assert "C3" in other.create_context().text and "B12" not in other.create_context().text


def test_update_in_background_mode_gets_its_vector(htm_factory):
    htm = htm_factory(robot="ada", background_embeddings=True)
    htm.add("Parking is on level two", key="parking")
    htm.flush(timeout=60)
    htm.update("parking", "Parking moved to the garage roof")
    htm.flush(timeout=60)
    assert htm.stats().pending_embeddings == 0
    hits = htm.recall("garage roof parking", strategy="vector", limit=1)
    assert hits[0].memory.content == "Parking moved to the garage roof"


def test_readding_a_replaced_text_makes_a_memory_of_its_own(htm_factory):
    """A memory added without a key has its text's key; after an update that key holds
    other text, and adding the old text again makes one new memory (found again on the
    next add), not a DuplicateKeyError."""
    htm = htm_factory(robot="ada")
    first = htm.add("Remember the milk")
    htm.update(first.key, "Remember the oat milk")
    again = htm.add("Remember the milk")
    assert again.key == f"{first.key}.2" and again.content == "Remember the milk"
    assert htm.add("Remember the milk").key == again.key
    assert htm.get(first.key).content == "Remember the oat milk"
    assert htm.stats().long_term_total == 2
    with pytest.raises(Exception, match="different content"):  # an explicit key still clashes
        htm.add("Another text", key=first.key)


def test_purge_deletes_the_history_with_the_memory(htm_factory):
    htm = htm_factory(robot="ada")
    htm.add("Old address: 1 Elm Street", key="address")
    htm.update("address", "New address: 9 Oak Avenue")
    htm.forget("address", confirm=True)
    assert htm.recall("Elm", strategy="fulltext", include_history=True) == []
    htm.purge(confirm=True)
    assert htm.store.versions("address") == []
    htm.add("Another Elm tree", key="tree")
    assert [h.memory.key for h in htm.recall("Elm", strategy="fulltext",
                                             include_history=True)] == ["tree"]


def _make_v2(url: str) -> None:
    """A store exactly as htm with schema version 2 left it, holding one memory."""
    postgres = url.startswith("postgresql")
    if postgres:
        from htm_core.store.postgres import postgres_url
        from htm_core.store.postgres._schema import _MIGRATIONS

        engine = create_engine(postgres_url(url))
        now = "now()"
    else:
        from htm_core.store.sqlite._schema import _MIGRATIONS

        engine = create_engine(f"sqlite:///{url}")
        now = "0"
    with engine.begin() as conn:
        if postgres:
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
        for statement in [*_MIGRATIONS[1], *_MIGRATIONS[2]]:
            conn.exec_driver_sql(statement)
        conn.execute(text("INSERT INTO htm_meta(key, value) VALUES ('schema_version', '2')"))
        conn.execute(text(f"INSERT INTO robots(name, created_at) VALUES ('old', {now})"))
        conn.execute(text(
            "INSERT INTO memories(key, content, content_hash, robot_id, token_count, "
            "created_at, last_accessed) SELECT 'kept', 'written by version two', "
            f"'0ca707e6df5bbff34369cbb7a0133b3254f14b075548f1f96dd1c8267f7c4009', id, 4, "
            f"{now}, {now} FROM robots WHERE name = 'old'"))
    engine.dispose()


@pytest.mark.empty_database
def test_a_version_2_store_is_upgraded_and_its_memories_can_be_updated(store_url):
    _make_v2(store_url)
    with HTM(database_url=store_url, embedder="hashing:64", robot="new") as htm:
        assert htm.store.schema_version() == SCHEMA_VERSION
        kept = htm.get("kept")
        assert (kept.content, kept.version) == ("written by version two", 1)
        assert htm.update("kept", "rewritten by version three").version == 2
        assert [v.content for v in htm.versions("kept")] == [
            "written by version two", "rewritten by version three"]
        assert htm.operations(op="migrate", limit=1)[0].detail["to"] == SCHEMA_VERSION
    with HTM(database_url=store_url, embedder="hashing:64", robot="new") as htm:
        assert htm.migrate() == SCHEMA_VERSION and htm.get("kept").version == 2
