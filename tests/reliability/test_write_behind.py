"""Recalls written behind: when the pending change reaches the store, on both backends,
with real stores (see htm_core.working.resident and docs/reliability.md). The timer is
set far off here (the tests that show a write still pending must not race it); the timer
itself and the write at exit are tested across processes in test_write_behind_processes.py."""

from __future__ import annotations

import pytest

from htm_core.working import resident


@pytest.fixture(autouse=True)
def _no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resident, "FLUSH_AFTER_SECONDS", 3600.0)


def persisted(htm) -> set[str]:
    return {m.key for m in htm.store.working_set(htm.robot)}


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
