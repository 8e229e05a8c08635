"""One coherent memory across instances, restarts and failures on both backends.

Each test here reproduces a bug of the code before the coherence work (see the test's
docstring) with several real ``HTM`` objects on one real SQLite file or PostgreSQL database.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from htm_core import HTM, FrozenClock
from htm_core.errors import NotFoundError, StoreError
from htm_core.store.base import SCHEMA_VERSION
from htm_core.store.values import content_hash
from htm_core.testing import working_memories

SECRET = "the admin password is hunter2"


def context_keys(htm: HTM, strategy: str = "balanced") -> list[str]:
    return [m.key for m in htm.create_context(strategy=strategy).memories]


def persisted(htm: HTM) -> set[str]:
    return {m.key for m in working_memories(htm.store, htm.robot)}


def test_a_purge_by_one_robot_leaves_no_trace_in_anothers_prompts(htm_factory):
    """Bug: B's create_context kept a memory A forgot and purged; B's forget of it failed."""
    ada, bob = htm_factory(robot="ada"), htm_factory(robot="bob")
    ada.add(SECRET, key="secret")
    assert [h.memory.key for h in bob.recall("admin password")] == ["secret"]
    assert "secret" in context_keys(bob)
    ada.forget("secret", confirm=True)
    assert "secret" not in context_keys(bob)  # forgotten: out of every prompt at once
    assert SECRET not in bob.create_context(strategy="recent").text
    ada.purge(confirm=True)
    assert SECRET not in bob.create_context().text
    assert bob.recall("admin password") == []
    assert "secret" not in bob.working_memory and "secret" not in persisted(bob)
    # B's own forget of a purged key: it says the memory is gone (NotFoundError) and B's
    # working memory does not hold it.
    with pytest.raises(NotFoundError, match="purged"):
        bob.forget("secret", confirm=True)
    assert "secret" not in bob.working_memory


def test_a_forget_between_a_recalls_read_and_its_entry_is_not_undone(htm_factory):
    """Bug: a forget landing while recall was between reading its hits and entering them
    put the forgotten memory back into working memory and persisted that membership."""
    ada, bob = htm_factory(robot="ada"), htm_factory(robot="bob")
    ada.add(SECRET, key="secret")
    read = bob.store.get_many

    def read_then_forget(*args: Any, **kwargs: Any) -> Any:
        found = read(*args, **kwargs)
        ada.forget("secret", confirm=True)  # another robot, another connection
        return found

    bob.store.get_many = read_then_forget  # type: ignore[method-assign]
    try:
        hits = bob.recall("admin password")
    finally:
        del bob.store.get_many
    assert "secret" not in [h.memory.key for h in hits]
    assert "secret" not in bob.working_memory
    assert "secret" not in persisted(bob)
    assert SECRET not in bob.create_context().text
    again = htm_factory(robot="bob")  # a restart does not bring it back either
    assert "secret" not in again.working_memory


def test_ids_are_never_reused_after_a_purge(htm_factory):
    """Bug (SQLite): the id of a purged newest memory went to the next memory, so a stale
    reference acted on the wrong one. (PostgreSQL's identity sequence never reused ids.)"""
    htm = htm_factory(robot="ada")
    htm.add("first note", key="a")
    newest = htm.add("second note", key="b")
    htm.forget("b", confirm=True)
    assert htm.purge(confirm=True) == 1
    later = htm.add("third note", key="c")
    assert later.id > newest.id
    reopened = htm_factory(robot="ada")
    assert reopened.add("fourth note", key="d").id > later.id


def _fail_membership_writes(htm: HTM) -> Callable[[], None]:
    """Make every working-memory insert fail inside the database; return the undo."""
    with htm.store.engine.begin() as conn:
        if htm.store.backend == "sqlite":
            conn.exec_driver_sql("CREATE TRIGGER fail_wm BEFORE INSERT ON working_memory "
                                 "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
        else:
            conn.exec_driver_sql("CREATE FUNCTION fail_wm() RETURNS trigger LANGUAGE plpgsql "
                                 "AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$")
            conn.exec_driver_sql("CREATE TRIGGER fail_wm BEFORE INSERT ON working_memory "
                                 "FOR EACH ROW EXECUTE FUNCTION fail_wm()")

    def undo() -> None:
        with htm.store.engine.begin() as conn:
            if htm.store.backend == "sqlite":
                conn.exec_driver_sql("DROP TRIGGER fail_wm")
            else:
                conn.exec_driver_sql("DROP TRIGGER fail_wm ON working_memory")
    return undo


def test_an_add_whose_membership_write_fails_leaves_nothing(htm_factory):
    """Bug: add committed the memory, then wrote membership and the eviction log in a second
    step; when that failed, add raised but the memory was stored and resident, and its
    eviction was not logged."""
    htm = htm_factory(robot="ada", working_memory_tokens=10)
    htm.add("alpha beta gamma delta", key="old", importance=1.0)
    before = (htm.working_memory.keys(), persisted(htm), len(htm.operations(limit=1000)))
    undo = _fail_membership_writes(htm)
    with pytest.raises(StoreError):
        htm.add("epsilon zeta eta theta iota kappa", key="new", importance=5.0)
    assert htm.retrieve("new") is None
    assert htm.store.get("new", include_forgotten=True) is None
    assert htm.working_memory.keys() == before[0] == ["old"]
    assert persisted(htm) == before[1] == {"old"}
    assert "old" in context_keys(htm)
    undo()
    htm.add("epsilon zeta eta theta iota kappa", key="new", importance=5.0)
    assert htm.working_memory.keys() == ["new"]
    assert persisted(htm) == {"new"}
    assert [o.key for o in htm.operations(op="evict")] == ["old"]


@pytest.mark.parametrize("policy", ["hybrid", "lru", "importance", "frequency"])
def test_a_restart_changes_nothing(htm_factory, clock: FrozenClock, policy: str):
    """Bug: reopening reset every restored item's last access to now and bumped its access
    count, so recent, balanced and LRU order changed across a restart."""
    htm = htm_factory(robot="ada", eviction=policy, working_memory_tokens=10_000)
    for n, (word, importance) in enumerate([("alpha", 3.0), ("bravo", 1.0), ("charlie", 3.0),
                                            ("delta", 2.0), ("echo", 1.0)]):
        htm.add(f"{word} note number {n}", key=word, importance=importance)
        clock.advance(minutes=7)
    htm.recall("charlie", strategy="fulltext")
    htm.retrieve("alpha")  # same instant as the recall: order by sequence
    clock.advance(minutes=3)
    htm.retrieve("bravo")

    def snapshot(h: HTM) -> Any:
        items = {i.key: (i.last_accessed, i.access_count, i.importance)
                 for i in h.working_memory.items()}
        return (items, h.working_memory.keys(),
                {s: context_keys(h, s) for s in ("recent", "important", "balanced")})

    first = snapshot(htm)
    htm.close()
    clock.advance(hours=5)  # the restart happens later
    again = htm_factory(robot="ada", eviction=policy, working_memory_tokens=10_000)
    clock.set(clock() - timedelta(hours=5))
    assert snapshot(again) == first


def test_an_access_at_a_frozen_clock_keeps_the_memory_in_lru(htm_factory):
    """Bug: with the clock not moving, LRU evicted the memory just retrieved first."""
    htm = htm_factory(robot="ada", eviction="lru", working_memory_tokens=30)
    for word in ("alpha", "bravo", "charlie"):
        htm.add(f"{word} {word} {word}", key=word)
    htm.retrieve("alpha")
    assert context_keys(htm, "recent")[0] == "alpha"
    htm.add("delta " * 20, key="delta")
    assert "alpha" in htm.working_memory and "bravo" not in htm.working_memory
    assert "alpha" in persisted(htm) and "bravo" not in persisted(htm)


def test_adding_the_same_content_again_merges_and_logs(htm_factory):
    """Bug: a second add of the same content silently dropped its tags, importance and
    metadata. Now: tags unioned, importance raised to a larger given one, metadata merged
    with the new keys winning; the touch line of the log says what changed."""
    htm = htm_factory(robot="ada")
    first = htm.add("User prefers Vim", tags=["user:editor"], importance=2.0,
                    metadata={"source": "chat", "turn": 1})
    again = htm.add("User prefers Vim", tags=["user:preferences"], importance=6.0,
                    metadata={"turn": 2, "lang": "en"})
    assert again.key == first.key and again.id == first.id
    assert again.tags == ("user:editor", "user:preferences")
    assert again.importance == 6.0
    assert again.metadata == {"source": "chat", "turn": 2, "lang": "en"}
    stored = htm.store.get(first.key)
    assert stored is not None and stored.tags == again.tags and stored.importance == 6.0
    assert htm.working_memory.peek(first.key).importance == 6.0
    line = htm.operations(op="touch", limit=1)[0]
    assert line.detail["merged"] == {"tags": ["user:preferences"], "importance": [2.0, 6.0],
                                     "metadata": ["lang", "turn"]}
    lower = htm.add("User prefers Vim", importance=1.0)  # never lowered
    assert lower.importance == 6.0
    default = htm.add("User prefers Vim")  # no importance given: unchanged, nothing merged
    assert default.importance == 6.0
    assert "merged" not in htm.operations(op="touch", limit=1)[0].detail


def test_two_instances_of_one_robot_share_one_working_memory(htm_factory):
    """Working memory is the robot's, kept in the store: what one instance adds, evicts or
    recalls is what the other's next call sees."""
    web, job = htm_factory(robot="ada"), htm_factory(robot="ada")
    web.add("the deploy is on friday", key="deploy")
    assert "deploy" in context_keys(job)
    job.forget("deploy", confirm=True)
    assert "deploy" not in context_keys(web)
    job.add("the standup moved to ten", key="standup")
    web.recall("standup", strategy="fulltext")
    assert context_keys(job) == context_keys(web) == ["standup"]
    assert set(job.working_memory.keys()) == set(web.working_memory.keys()) == persisted(web)


@pytest.mark.empty_database
def test_schema_upgrade_from_version_1_keeps_working_memory_and_ids(store_url: str,
                                                                    clock: FrozenClock):
    """A v1 store (made by executing the v1 statements) upgrades in place: membership gets
    its order and state from the old rows, and purged ids stay retired."""
    if store_url.startswith("postgresql"):
        from htm_core.store import postgres as backend
    else:
        from htm_core.store import sqlite as backend
    from sqlalchemy import create_engine

    url = store_url if store_url.startswith("postgresql") else f"sqlite:///{store_url}"
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    stamp = "now()" if store_url.startswith("postgresql") else "1715774400"
    with engine.begin() as conn:
        if store_url.startswith("postgresql"):
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
        for statement in backend._SCHEMA_V1:
            conn.exec_driver_sql(statement)
        conn.exec_driver_sql("INSERT INTO htm_meta(key, value) VALUES ('schema_version', '1')")
        conn.exec_driver_sql(f"INSERT INTO robots(name, created_at) VALUES ('ada', {stamp})")

        def ago(minutes: int) -> str:
            return (f"now() - interval '{minutes} minutes'" if stamp == "now()"
                    else str(1715774400 - minutes * 60))

        for n, key, offset in [(1, "one", 30), (2, "two", 10), (3, "three", 20)]:
            conn.execute(text(
                "INSERT INTO memories(key, content, content_hash, robot_id, token_count, "
                "created_at, last_accessed, access_count) VALUES (:k, :c, :h, "
                f"(SELECT id FROM robots), 3, {ago(offset)}, {ago(offset)}, :n)"),
                {"k": key, "c": f"memory {key}", "h": content_hash(f"memory {key}"), "n": n})
        for key, offset in [("one", 3), ("two", 1), ("three", 2)]:
            conn.execute(text(
                "INSERT INTO working_memory(robot_id, memory_id, added_at) SELECT robot_id, id, "
                f"{ago(offset)} FROM memories WHERE key = :k"), {"k": key})
        # A v1 file whose newest memories (up to id 9) were purged before the upgrade.
        conn.exec_driver_sql("INSERT INTO operations(at, op, robot_id, memory_id, key) VALUES "
                             f"({stamp}, 'purge', 1, 9, 'gone')")
    engine.dispose()
    with HTM(robot="ada", database_url=store_url, clock=clock, embedder="hashing",
             eviction="lru") as htm:
        assert htm.store.schema_version() == SCHEMA_VERSION
        assert [m.key for m in working_memories(htm.store, "ada")] == ["one", "three", "two"]
        # LRU order from the memories' last access (one is the least recent), counts kept.
        assert htm.working_memory.keys() == ["one", "three", "two"]
        assert {i.key: i.access_count for i in htm.working_memory.items()} == {
            "one": 1, "two": 2, "three": 3}
        # SQLite: past the purged id 9; PostgreSQL: its identity sequence never goes back.
        assert htm.add("a new memory", key="new").id > (3 if stamp == "now()" else 9)


def test_an_adapters_prompt_drops_what_another_robot_forgot(htm_factory):
    """Adapters take their context from working memory: a LangChain ``HTMMemory`` of robot B
    stops showing a memory robot A forgot, from its next call on."""
    pytest.importorskip("langchain_classic")
    from htm_integrations.langchain import HTMMemory

    ada, bob = htm_factory(robot="ada"), htm_factory(robot="bob")
    ada.add(SECRET, key="secret")
    bob.recall("admin password")
    memory = HTMMemory(htm=bob, shared=True)  # the robot's whole working memory
    assert SECRET in memory.load_memory_variables({"input": "what is new?"})["history"]
    ada.forget("secret", confirm=True)
    assert SECRET not in memory.load_memory_variables({"input": "what is new?"})["history"]
