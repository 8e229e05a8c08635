"""Recalls written behind: when the pending change reaches the store, on both backends,
with real stores (see htm_core.working.resident and docs/reliability.md). The timer is
set far off here (the tests that show a write still pending must not race it); the timer
itself and the write at exit are tested across processes in test_write_behind_processes.py."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from htm_core.testing import working_memories
from htm_core.working import resident


@pytest.fixture(autouse=True)
def _no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resident, "FLUSH_AFTER_SECONDS", 3600.0)


def persisted(htm) -> set[str]:
    return {m.key for m in working_memories(htm.store, htm.robot)}


def _two_memories(htm_factory):
    htm = htm_factory(robot="ada", working_memory_tokens=1_000)
    htm.add("the kettle is in the left cupboard", key="kettle")
    htm.add("the wifi password is on the fridge", key="wifi")
    htm.clear_working_memory()
    return htm


def test_a_recall_waits_and_the_next_context_writes_it(htm_factory):
    htm = _two_memories(htm_factory)
    before = htm.store.get("kettle").access_count
    assert [h.memory.key for h in htm.recall("kettle cupboard", strategy="fulltext")] == ["kettle"]
    assert "kettle" in htm.working_memory  # in the process at once
    assert persisted(htm) == set() and htm.store.get("kettle").access_count == before
    htm.create_context()
    assert persisted(htm) == {"kettle"}
    assert htm.store.get("kettle").access_count == before + 1


def test_an_add_carries_pending_recalls_in_its_transaction(htm_factory):
    htm = _two_memories(htm_factory)
    htm.recall("kettle cupboard", strategy="fulltext")
    htm.add("the keys hang by the door", key="keys")
    assert persisted(htm) == {"kettle", "keys"}


def test_enough_pending_recalls_are_written_without_another_call(htm_factory, monkeypatch):
    monkeypatch.setattr(resident, "FLUSH_AFTER_READS", 3)
    htm = _two_memories(htm_factory)
    htm.recall("kettle cupboard", strategy="fulltext")
    htm.recall("wifi fridge", strategy="fulltext")
    assert persisted(htm) == set()
    htm.recall("kettle", strategy="fulltext")
    assert persisted(htm) == {"kettle", "wifi"}


def test_close_writes_pending_recalls_and_a_restart_keeps_them(htm_factory):
    htm = _two_memories(htm_factory)
    htm.recall("wifi fridge", strategy="fulltext")
    htm.close()
    again = htm_factory(robot="ada", working_memory_tokens=1_000)
    assert set(again.working_memory.keys()) == {"wifi"} == persisted(again)


@pytest.mark.parametrize("read", ["recall", "retrieve"])
def test_another_robots_forget_is_honoured_with_reads_pending(htm_factory, read):
    htm = _two_memories(htm_factory)
    other = htm_factory(robot="bob")
    if read == "recall":
        htm.recall("kettle cupboard", strategy="fulltext")
    else:
        htm.retrieve("kettle")
    other.forget("kettle", confirm=True)
    assert "kettle" not in [m.key for m in htm.create_context().memories]
    assert "kettle" not in htm.working_memory and "kettle" not in persisted(htm)


def test_a_pending_eviction_never_takes_out_a_memory_that_took_its_key(htm_factory):
    """A recall's eviction waits; meanwhile another robot forgets and purges the evicted
    memory and adds a new one under the same key (``note:K``, beside ``note:k``), which
    another instance of the robot recalls. The waiting eviction names the memory it took
    out: it neither removes the other instance's membership of the new memory nor logs an
    eviction of it."""
    writer = htm_factory(robot="setup")
    tokens = writer.add("the kettle key is under the blue flowerpot", key="note:K").token_count
    writer.add("the kettle manual lies in the drawer", key="note:k")
    ada = htm_factory(robot="ada", working_memory_tokens=tokens + 4)
    ada.clear_working_memory()
    ada.recall("flowerpot", strategy="fulltext")
    ada.flush()  # note:K resident and written
    assert persisted(ada) == {"note:K"}
    ada.recall("manual drawer", strategy="fulltext")  # evicts note:K; the write waits
    assert set(ada.working_memory.keys()) == {"note:k"} and persisted(ada) == {"note:K"}
    bob = htm_factory(robot="bob")
    bob.forget("note:K", confirm=True)
    bob.purge(confirm=True)
    newcomer = bob.add("the newcomer says the shed is green", key="note:K")
    twin = htm_factory(robot="ada", working_memory_tokens=1_000)
    assert [h.memory.id for h in twin.recall("newcomer shed", strategy="fulltext")] == [
        newcomer.id]
    twin.flush()
    assert persisted(ada) == {"note:K"}  # the twin's: the newcomer
    ada.flush()
    assert newcomer.id in {m.id for m in working_memories(ada.store, "ada")}
    with ada.store.engine.begin() as conn:
        logged = {r[0] for r in conn.execute(text(
            "SELECT memory_id FROM operations WHERE op = 'evict'"))}
    assert newcomer.id not in logged


def test_a_read_only_reader_drops_what_a_writer_purged_while_its_recall_waited(tmp_path):
    """SQLite opened read-only: the recall's write is never made, but the flush still
    checks what it names, so a memory a writer purged (its key then taken by a new
    memory) or updated meanwhile leaves the reader's context."""
    from htm_core import HTM, HashingEmbedder

    url = str(tmp_path / "shared.db")
    with HTM(robot="writer", database_url=url, embedder=HashingEmbedder()) as writer:
        writer.add("the kettle key is under the blue flowerpot", key="note:K")
        writer.add("the kettle manual lies in the drawer", key="note:k")
        with HTM(robot="reader", database_url=url, embedder=HashingEmbedder(),
                 read_only=True) as reader:
            assert {h.memory.key for h in reader.recall("kettle", strategy="fulltext")} == {
                "note:K", "note:k"}
            writer.forget("note:K", confirm=True)
            writer.purge(confirm=True)
            writer.add("the newcomer says the shed is green", key="note:K")
            writer.update("note:k", "the kettle manual went to the recycling")
            text = reader.create_context().text
            assert "flowerpot" not in text and "newcomer" not in text
            assert "lies in the drawer" not in text
