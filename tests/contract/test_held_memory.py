"""A :class:`~htm_core.models.Memory` is a value: one a caller holds (from ``add``, ``get``,
``retrieve``, ``recall``, ``create_context``, ``update``, ``forget``) keeps every field it
was read with while later calls count accesses, re-add, rescore, update and forget the
memory, on every backend and on the in-memory store; assigning a field raises.

The keys are drawn to collide: case (``Ada`` / ``ada``), separators (``user:ada`` /
``user/ada``) and a lookalike (Cyrillic ``а`` in ``аda``)."""

from __future__ import annotations

import copy
import dataclasses
import threading
from datetime import datetime, timezone
from typing import Any

import pytest

from htm_core.enrich import LLMUsage
from htm_core.models import Memory
from htm_core.store.values import NewMemory
from htm_core.testing import InMemoryStore

KEYS = ("Ada", "ada", "user:ada", "user/ada", "\u0430da")
AT = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)


def _content(key: str) -> str:
    return f"Ada Lovelace note filed under {key}"


class _GatedScorer:
    """A model-backed importance scorer (so it runs in background jobs) that answers 7 once
    ``gate`` is set: the rescoring lands when the test says. A stand-in for a chat model,
    which would answer at a time the test cannot choose."""

    name = "gated"

    def __init__(self) -> None:
        self.usage = LLMUsage()
        self.gate = threading.Event()

    def score(self, content: str) -> float:
        self.gate.wait(30)
        return 7.0


def _snapshot(held: list[Memory]) -> list[dict[str, Any]]:
    return [copy.deepcopy(dataclasses.asdict(m)) for m in held]


def test_a_held_memory_does_not_change_under_later_calls(htm_factory):
    scorer = _GatedScorer()
    htm = htm_factory(robot="a", working_memory_tokens=1_000, importance_scorer=scorer)
    held = [htm.add(_content(k), key=k) for k in KEYS]
    held += [htm.get(k) for k in KEYS] + [htm.retrieve(k) for k in KEYS]
    held += [h.memory for h in htm.recall("Ada Lovelace note", limit=10)]
    held += list(htm.create_context(max_tokens=1_000).memories)
    assert {m.key for m in held} == set(KEYS) and all(m.in_working_memory for m in held[:5])
    before = _snapshot(held)

    scorer.gate.set()
    assert htm.flush_enrichment(timeout=30)  # the model's importance reaches working memory
    htm.recall("Ada Lovelace note", limit=10)
    htm.retrieve("Ada")
    htm.add(_content("ada"), key="ada")  # the same text again: touches it
    htm.update("user:ada", "Ada Lovelace wrote the first program")
    hits = htm.recall("Ada Lovelace", limit=10)
    other = htm_factory(robot="b")
    other.forget("user/ada", confirm=True)  # out of a's working memory; a's recall is refused
    htm.flush()
    htm.forget("\u0430da", confirm=True)

    assert _snapshot(held) == before
    assert {h.memory.key for h in hits} == set(KEYS)
    now = {k: htm.get(k, include_forgotten=True) for k in KEYS}  # the calls did change them
    assert now["Ada"].access_count > before[0]["access_count"]
    assert now["Ada"].importance == 7.0 and before[0]["importance"] == 1.0
    assert htm.working_memory.peek("Ada").importance == 7.0
    assert now["user:ada"].version == 2 and now["user/ada"].forgotten_at is not None
    assert now["\u0430da"].forgotten_at is not None
    assert "user/ada" not in htm.working_memory


def test_a_memory_field_cannot_be_assigned(htm_factory):
    htm = htm_factory(robot="a")
    added = htm.add(_content("Ada"), key="Ada")
    for memory in (added, htm.get("Ada"), htm.retrieve("Ada"), htm.recall("Ada")[0].memory,
                   htm.update("Ada", "Ada Lovelace, again"), htm.forget("Ada", confirm=True)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            memory.access_count += 1
        with pytest.raises(dataclasses.FrozenInstanceError):
            memory.in_working_memory = False
    assert dataclasses.replace(added, importance=5.0).importance == 5.0
    assert added.importance == 1.0


def _record(key: str) -> NewMemory:
    return NewMemory(key=key, content=_content(key), robot="r", importance=1.0, token_count=8,
                     created_at=AT)


def test_the_in_memory_store_keeps_changed_copies():
    store = InMemoryStore()
    store.add_many([_record(k) for k in KEYS])
    held = [store.get(k) for k in KEYS]
    held += store.get_many([m.id for m in held if m is not None])
    before = _snapshot([m for m in held if m is not None])
    ids = [m.id for m in held[:len(KEYS)] if m is not None]

    store.touch(ids, at=AT)
    store.add_many([_record("ada")])
    store.add_tags("Ada", ["person:ada"], robot="r")
    store.set_importance("user:ada", 9.0, robot="r")
    store.set_embeddings([(i, [1.0, 0.0]) for i in ids], "fake")
    store.forget("user/ada", robot="r", at=AT)
    store.restore("user/ada", robot="r")
    store.forget("\u0430da", robot="r", at=AT)
    store.reset_embeddings()

    assert _snapshot([m for m in held if m is not None]) == before
    now = {k: store.get(k, include_forgotten=True) for k in KEYS}
    assert now["ada"] is not None and now["ada"].access_count == 2
    assert now["Ada"] is not None and now["Ada"].tags == ("person:ada",)
    assert now["user:ada"] is not None and now["user:ada"].importance == 9.0
    assert now["\u0430da"] is not None and now["\u0430da"].forgotten_at == AT


def test_a_stored_memory_has_every_field(htm_factory, monkeypatch):
    """The stores build the memories they read and write without ``Memory.__init__``
    (:func:`htm_core.store.values.stored_memory`): each still has exactly the dataclass's
    fields and equals the one ``__init__`` makes of them."""
    htm = htm_factory(robot="a")
    if hasattr(htm.store, "copy_min_rows"):  # PostgreSQL: the COPY path makes them too
        monkeypatch.setattr(htm.store, "copy_min_rows", 1)
    made = htm.store.add_many([_record(k) for k in KEYS])  # the writer's memories
    ids = [r.memory.id for r in made]
    read = [*(htm.store.get(k, include_embedding=True) for k in KEYS),
            *htm.store.get_many(ids), *htm.store.get_many(ids, include_embedding=True)]
    names = {f.name for f in dataclasses.fields(Memory)}
    for memory in [r.memory for r in made] + read:
        assert memory is not None and set(vars(memory)) == names
        assert Memory(**vars(memory)) == memory
        with pytest.raises(dataclasses.FrozenInstanceError):
            memory.importance = 2.0
