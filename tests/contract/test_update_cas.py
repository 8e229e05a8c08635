"""``HTM.update`` is compare-and-set, on every backend.

Two ``HTM`` objects on one store: a second writer updates the memory in the window between
the first one's read and its write (the first object's ``store.get`` is wrapped so the
other, real ``HTM`` writes right after it; that wrapper only fixes the interleaving). The
first writer's change is merged when it touches other fields, refused with a
``ConflictError`` naming both versions when it touches the same field, and the memory never
loses its vector. ``expected_version`` refuses any move. The store's own compare
(``update_memory(read_version=...)``) is pinned the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from htm_core import HTM
from htm_core.errors import ConflictError, ValidationError


def _race(first: HTM, other_write: Callable[[], Any]) -> None:
    """Make ``other_write`` run right after ``first``'s next read of a memory."""
    read = first.store.get

    def get_then_race(*args: Any, **kwargs: Any) -> Any:
        found = read(*args, **kwargs)
        first.store.get = read  # type: ignore[method-assign]
        other_write()
        return found

    first.store.get = get_then_race  # type: ignore[method-assign]


def _vector_finds(htm: HTM, text: str, key: str) -> bool:
    return key in [h.memory.key for h in htm.recall(text, strategy="vector", limit=5)]


def test_a_concurrent_text_change_survives_an_importance_update(htm_factory):
    ada, bob = htm_factory(robot="ada"), htm_factory(robot="bob")
    ada.add("Ada prefers Vim keybindings", key="Ada:editor", importance=2.0)
    ada.add("ada/editor is another memory", key="ada/editor")
    _race(ada, lambda: bob.update("Ada:editor", "Ada switched to the Helix editor"))
    merged = ada.update("Ada:editor", "Ada prefers Vim keybindings", importance=8.0)
    assert (merged.version, merged.content, merged.importance) == (
        3, "Ada switched to the Helix editor", 8.0)
    now = bob.get("Ada:editor")
    assert (now.content, now.importance, now.version) == (merged.content, 8.0, 3)
    assert [(v.content, v.importance) for v in bob.versions("Ada:editor")] == [
        ("Ada prefers Vim keybindings", 2.0), ("Ada switched to the Helix editor", 2.0),
        ("Ada switched to the Helix editor", 8.0)]
    assert now.embedder is not None
    assert _vector_finds(bob, "Ada switched to the Helix editor", "Ada:editor")
    assert bob.get("ada/editor").version == 1


def test_a_concurrent_importance_change_survives_a_text_update(htm_factory):
    ada, bob = htm_factory(robot="ada"), htm_factory(robot="bob")
    ada.add("The launch is on Tuesday", key="launch", importance=1.0, tags=["project:x"])
    _race(ada, lambda: bob.update("launch", "The launch is on Tuesday", importance=9.0,
                                  tags=["project:x", "Project:Y"]))
    merged = ada.update("launch", "The launch moved to Thursday")
    assert (merged.content, merged.importance, set(merged.tags), merged.version) == (
        "The launch moved to Thursday", 9.0, {"project:x", "Project:Y"}, 3)
    assert _vector_finds(bob, "The launch moved to Thursday", "launch")


def test_the_same_field_changed_by_both_is_a_conflict(htm_factory):
    ada, bob = htm_factory(robot="ada"), htm_factory(robot="bob")
    ada.add("Meeting at noon", key="meet", importance=3.0)
    _race(ada, lambda: bob.update("meet", "Meeting at 1 pm"))
    with pytest.raises(ConflictError) as caught:
        ada.update("meet", "Meeting at 2 pm", importance=4.0)
    err = caught.value
    assert (err.key, err.expected_version, err.current_version, err.fields) == (
        "meet", 1, 2, ("content",))
    assert "version 1" in str(err) and "version 2" in str(err)
    now = bob.get("meet")
    assert (now.content, now.importance, now.version) == ("Meeting at 1 pm", 3.0, 2)
    assert _vector_finds(bob, "Meeting at 1 pm", "meet")
    assert len(bob.operations(op="update", limit=10)) == 1


def test_the_same_value_set_by_both_merges_without_a_version(htm_factory):
    ada, bob = htm_factory(robot="ada"), htm_factory(robot="bob")
    ada.add("Meeting at noon", key="meet")
    _race(ada, lambda: bob.update("meet", "Meeting at 1 pm"))
    same = ada.update("meet", "Meeting at 1 pm")
    assert (same.content, same.version) == ("Meeting at 1 pm", 2)
    assert _vector_finds(bob, "Meeting at 1 pm", "meet")


def test_expected_version_refuses_a_memory_that_moved_on(htm_factory):
    htm = htm_factory(robot="ada")
    first = htm.add("User prefers tea", key="drink")
    htm.update("drink", "User prefers coffee")
    with pytest.raises(ConflictError) as caught:
        htm.update("drink", "User prefers water", expected_version=first.version)
    assert (caught.value.expected_version, caught.value.current_version) == (1, 2)
    assert htm.get("drink").content == "User prefers coffee"
    done = htm.update("drink", "User prefers water", expected_version=2)
    assert (done.version, done.content) == (3, "User prefers water")
    with pytest.raises(ConflictError):
        htm.update("drink", "User prefers juice", expected_version=5)
    assert htm.get("drink").version == 3


def test_expected_version_is_checked_under_the_lock(htm_factory):
    ada, bob = htm_factory(robot="ada"), htm_factory(robot="bob")
    ada.add("Budget is 10k", key="budget", importance=1.0)
    _race(ada, lambda: bob.update("budget", "Budget is 10k", importance=7.0))
    with pytest.raises(ConflictError) as caught:
        ada.update("budget", "Budget is 12k", expected_version=1)
    assert (caught.value.expected_version, caught.value.current_version) == (1, 2)
    now = bob.get("budget")
    assert (now.content, now.importance, now.version) == ("Budget is 10k", 7.0, 2)


@pytest.mark.parametrize("bad", [0, -1, True, "2", 1.0])
def test_expected_version_must_be_a_version(htm_factory, bad):
    htm = htm_factory(robot="ada")
    htm.add("User prefers tea", key="drink")
    with pytest.raises(ValidationError, match="expected_version"):
        htm.update("drink", "User prefers coffee", expected_version=bad)
    assert htm.get("drink").version == 1


def test_the_store_compares_under_its_lock(htm_factory, clock):
    htm = htm_factory(robot="ada")
    htm.add("Ada likes green tea", key="tea", importance=2.0, metadata={"n": 1})
    htm.update("tea", "Ada likes black tea")
    stale = htm._intake.record("Ada likes green tea", key="tea", importance=6.0,
                               metadata={"n": 1})
    merged = htm.store.update_memory(stale, robot="ada", at=clock(), read_version=1,
                                     fields=("importance",))
    assert (merged.content, merged.importance, merged.version) == ("Ada likes black tea", 6.0, 3)
    again = replace(stale, content="Ada likes oolong")
    with pytest.raises(ConflictError):
        htm.store.update_memory(again, robot="ada", at=clock(), read_version=1,
                                fields=("content",))
    with pytest.raises(ConflictError):
        htm.store.update_memory(stale, robot="ada", at=clock(), read_version=2,
                                fields=("metadata",), strict=True)
    assert htm.get("tea").version == 3
