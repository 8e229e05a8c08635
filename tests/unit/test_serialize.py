"""htm_core.serialize: the one way a memory, hit, context, stats or robot becomes a dict.

Memories come from a real HTM on both backends (``htm_factory``), so the types the stores
hand back (aware datetimes, tuples of tags, float importance) are what is serialised.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from htm_core import HTM
from htm_core.models import Hit, Memory
from htm_core.serialize import (
    context_to_dict,
    hit_to_dict,
    iso,
    memory_metadata,
    memory_to_dict,
    memory_to_record,
    robot_to_dict,
    stats_to_dict,
)
from htm_core.transfer import memory_from_record

RECORD_KEYS = ["key", "content", "robot", "importance", "token_count", "created_at",
               "last_accessed", "access_count", "tags", "metadata", "forgotten_at"]
METADATA_KEYS = ["id", "key", "score", "importance", "created_at", "robot", "tags", "kind"]


def _aware_utc(value: str) -> datetime:
    when = datetime.fromisoformat(value)
    assert when.tzinfo is not None and when.utcoffset() == timedelta(0), value
    return when


def _seeded(htm_factory: Callable[..., HTM]) -> tuple[HTM, Memory]:
    htm = htm_factory(robot="ada")
    htm.add("User prefers Vim keybindings", key="pref-vim", importance=9.0,
            tags=["user:preferences", "editor"], metadata={"source": "test", "n": 2})
    htm.add("Lunch was noodles", key="lunch")
    memory = htm.retrieve("pref-vim")
    assert memory is not None
    return htm, memory


def test_record_has_exact_keys_types_and_round_trips(htm_factory: Callable[..., HTM]) -> None:
    _, memory = _seeded(htm_factory)
    record = memory_to_record(memory)
    assert list(record) == RECORD_KEYS
    assert record["tags"] == list(memory.tags) and set(memory.tags) == {"user:preferences",
                                                                          "editor"}
    assert record["metadata"] == {"source": "test", "n": 2}
    assert isinstance(record["importance"], float) and record["forgotten_at"] is None
    assert _aware_utc(record["created_at"]) == memory.created_at
    assert _aware_utc(record["last_accessed"]) == memory.last_accessed
    back = memory_from_record(json.loads(json.dumps(record)), line=1)
    assert (back.key, back.content, back.robot, back.importance, back.token_count) == (
        memory.key, memory.content, memory.robot, memory.importance, memory.token_count)
    assert (back.created_at, back.last_accessed, back.access_count, back.tags, back.metadata) == (
        memory.created_at, memory.last_accessed, memory.access_count, memory.tags,
        memory.metadata)


def test_embedding_only_when_asked_and_computed(htm_factory: Callable[..., HTM]) -> None:
    htm, _ = _seeded(htm_factory)
    memory = next(m for batch in htm.store.iter_memories(include_embedding=True)
                  for m in batch if m.key == "pref-vim")
    assert memory.embedding is not None
    assert "embedding" not in memory_to_record(memory)
    assert "embedding" not in memory_to_dict(memory)
    record = memory_to_record(memory, include_embedding=True)
    assert list(record) == [*RECORD_KEYS, "embedding", "embedder"]
    assert record["embedding"] == pytest.approx(memory.embedding)
    assert all(isinstance(x, float) for x in record["embedding"])
    assert record["embedder"] == memory.embedder
    back = memory_from_record(json.loads(json.dumps(record)), line=1)
    assert back.embedding == pytest.approx(memory.embedding) and back.embedder == memory.embedder
    no_vector = Memory(id=1, key="k", content="c", robot="r", created_at=memory.created_at,
                       last_accessed=memory.created_at)
    assert "embedding" not in memory_to_record(no_vector, include_embedding=True)


def test_memory_dict_adds_id_and_state(htm_factory: Callable[..., HTM]) -> None:
    htm, memory = _seeded(htm_factory)
    d = memory_to_dict(memory)
    assert list(d) == ["id", *RECORD_KEYS, "kind", "source", "confidence", "forgotten",
                       "in_working_memory", "version", "superseded_at"]
    assert d["id"] == memory.id and d["forgotten"] is False
    assert (d["version"], d["superseded_at"]) == (1, None)
    forgotten = htm.forget("lunch", confirm=True)
    d = memory_to_dict(forgotten)
    assert d["forgotten"] is True and _aware_utc(d["forgotten_at"]) == forgotten.forgotten_at
    json.dumps(d)  # JSON-ready without a custom encoder


def test_hits_full_and_compact(htm_factory: Callable[..., HTM]) -> None:
    htm, _ = _seeded(htm_factory)
    hits = htm.recall("vim keybindings", limit=2)
    assert hits and hits[0].memory.key == "pref-vim"
    full = hit_to_dict(hits[0])
    assert list(full) == ["score", "id", *RECORD_KEYS, "kind", "source", "confidence",
                          "forgotten", "in_working_memory", "version", "superseded_at"]
    assert full["score"] == hits[0].score and full["key"] == "pref-vim"
    compact = hit_to_dict(hits[0], compact=True)
    assert list(compact) == ["key", "score", "content", "importance", "robot", "created_at",
                             "tags", "kind", "version", "superseded"]
    assert compact["robot"] == "ada" and compact["tags"] == list(hits[0].memory.tags)
    assert _aware_utc(compact["created_at"]) == hits[0].memory.created_at


def test_versions_are_told_apart(htm_factory: Callable[..., HTM]) -> None:
    """An updated memory and its superseded version, as dicts and as hits."""
    htm, memory = _seeded(htm_factory)
    htm.update(memory.key, "User prefers Helix keybindings")
    old, new = (memory_to_dict(m) for m in htm.versions(memory.key))
    assert (old["version"], new["version"]) == (1, 2)
    assert _aware_utc(old["superseded_at"]) == htm.versions(memory.key)[0].superseded_at
    assert new["superseded_at"] is None and new["content"] == "User prefers Helix keybindings"
    hits = htm.recall("Vim", strategy="fulltext", include_history=True)
    assert [(h["key"], h["version"], h["superseded"]) for h in (
        hit_to_dict(hit, compact=True) for hit in hits)] == [(memory.key, 1, True)]
    json.dumps(old)


def test_adapter_metadata(htm_factory: Callable[..., HTM]) -> None:
    _, memory = _seeded(htm_factory)
    meta = memory_metadata(memory, 0.25)
    assert list(meta) == METADATA_KEYS
    assert meta == {"id": memory.id, "key": "pref-vim", "score": 0.25, "importance": 9.0,
                    "created_at": meta["created_at"], "robot": "ada",
                    "tags": list(memory.tags), "kind": "episodic"}
    assert _aware_utc(meta["created_at"]) == memory.created_at
    assert memory_metadata(memory)["score"] is None
    assert memory_metadata(memory, tags=(t for t in memory.tags if t != "editor"))["tags"] == [
        "user:preferences"]


def test_times_in_other_zones_come_out_in_utc() -> None:
    cest = timezone(timedelta(hours=2))
    when = datetime(2024, 5, 15, 14, 30, tzinfo=cest)
    memory = Memory(id=1, key="k", content="c", robot="r", created_at=when, last_accessed=when,
                    forgotten_at=when)
    record = memory_to_record(memory)
    for name in ("created_at", "last_accessed", "forgotten_at"):
        assert record[name] == "2024-05-15T12:30:00+00:00"
    assert memory_metadata(memory)["created_at"] == "2024-05-15T12:30:00+00:00"
    assert hit_to_dict(Hit(memory=memory, score=1.0), compact=True)["created_at"] == (
        "2024-05-15T12:30:00+00:00")
    assert iso(None) is None


def test_a_kind_source_or_confidence_is_added_to_the_record_when_set() -> None:
    when = datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc)
    plain = Memory(id=1, key="k", content="c", robot="r", created_at=when, last_accessed=when)
    assert list(memory_to_record(plain)) == RECORD_KEYS
    assert memory_to_dict(plain)["kind"] == "episodic"
    for changed in ({"kind": "fact"}, {"source": "user"}, {"confidence": 0.5}):
        record = memory_to_record(replace(plain, **changed))
        assert list(record) == [*RECORD_KEYS, "kind", "source", "confidence"]
        back = memory_from_record(json.loads(json.dumps(record)), line=1)
        assert {name: getattr(back, name) for name in changed} == changed


def test_export_line_is_byte_compatible() -> None:
    """The export format (version 1) is pinned: files written before this module still
    read, and files written now read in older versions."""
    when = datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc)
    memory = Memory(id=9, key="k1", content="héllo", robot="r", importance=2.5,
                    token_count=3, created_at=when, last_accessed=when, access_count=4,
                    tags=("a", "b:c"), metadata={"x": 1})
    assert json.dumps(memory_to_record(memory), ensure_ascii=False) == (
        '{"key": "k1", "content": "héllo", "robot": "r", "importance": 2.5, '
        '"token_count": 3, "created_at": "2024-05-15T12:00:00+00:00", '
        '"last_accessed": "2024-05-15T12:00:00+00:00", "access_count": 4, '
        '"tags": ["a", "b:c"], "metadata": {"x": 1}, "forgotten_at": null}')


def test_context_stats_and_robots(htm_factory: Callable[..., HTM]) -> None:
    htm, _ = _seeded(htm_factory)
    ctx = htm.create_context(strategy="important", max_tokens=1_000)
    d = context_to_dict(ctx)
    assert list(d) == ["text", "tokens", "strategy", "max_tokens", "budget", "keys"]
    assert d["keys"] == list(ctx.keys) and d["keys"][0] == "pref-vim"
    assert d["text"] == ctx.text and d["strategy"] == "important"

    stats = htm.stats()
    full = stats_to_dict(stats)
    fields = list(stats.__dataclass_fields__)
    assert list(full) == [*fields, "working_memory_utilisation"]
    assert 0 < full["working_memory_utilisation"] <= 1
    assert full["long_term_total"] == 2 and full["robot"] == "ada"
    assert list(stats_to_dict(stats, utilisation=False)) == fields
    json.dumps(full)

    robots = [robot_to_dict(r) for r in htm.robots()]
    assert [r["name"] for r in robots] == ["ada"]
    assert list(robots[0]) == ["name", "created_at", "last_active", "memory_count"]
    assert robots[0]["memory_count"] == 2
    _aware_utc(robots[0]["created_at"])
