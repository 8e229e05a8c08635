"""The ``sources`` and ``min_confidence`` filters of ``recall`` and ``list`` through the
facade, on both backends: applied inside each search (before the limit), exact sources,
a memory without a confidence never passing, bad filters refused, scopes never widened."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from htm_core import HTM
from htm_core.errors import ValidationError
from htm_core.scope import ChatScope


def _seed(htm: HTM) -> None:
    htm.add_many([{"content": f"tea talk number {i}", "source": "User", "confidence": 0.9}
                  for i in range(40)])
    htm.add_many([
        {"content": "tea talk from user sure", "source": "user", "confidence": 0.9},
        {"content": "tea talk from user unsure", "source": "user", "confidence": 0.2},
        {"content": "tea talk from user unknown", "source": "user", "kind": "episodic"},
        {"content": "tea talk from user:x", "source": "user:x", "confidence": 1.0},
        {"content": "tea talk from nobody", "confidence": 1.0}])


@pytest.mark.parametrize("strategy", ["hybrid", "vector", "fulltext"])
def test_source_and_confidence_filters_run_before_the_limit(htm_factory: Callable[..., HTM],
                                                            strategy: str) -> None:
    htm = htm_factory(robot="r")
    _seed(htm)

    def contents(**filters: Any) -> set[str]:
        return {h.memory.content for h in htm.recall("tea talk", strategy=strategy, **filters)}

    assert contents(sources="user", limit=3) == {
        "tea talk from user sure", "tea talk from user unsure", "tea talk from user unknown"}
    assert contents(sources=["user:x"], limit=3) == {"tea talk from user:x"}
    assert contents(sources="user", min_confidence=0.5, limit=3) == {"tea talk from user sure"}
    assert contents(sources=("user", "user:x"), min_confidence=0, limit=10) == {
        "tea talk from user sure", "tea talk from user unsure", "tea talk from user:x"}
    assert contents(min_confidence=1.0, limit=2) == {
        "tea talk from user:x", "tea talk from nobody"}
    assert contents(sources="USER") == set()
    assert len(contents(sources="User", min_confidence=0.9, limit=25)) == 25
    assert contents(sources="user", kinds="fact") == set()


def test_list_by_source_and_confidence_pages_through_every_one(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="r")
    htm.add_many([{"content": f"note {i}", "source": "user" if i % 3 == 0 else "User",
                   "confidence": None if i % 2 else 0.5} for i in range(30)])
    seen, cursor = [], None
    while True:
        page = htm.list(sources="user", min_confidence=0.5, limit=2, cursor=cursor)
        seen += [m.content for m in page.memories]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"note {i}" for i in range(0, 30, 6)]
    assert len(htm.list(sources=["user", "User"], limit=100).memories) == 30
    assert len(htm.list(min_confidence=0.0, limit=100).memories) == 15
    assert htm.list(sources="user:x").memories == ()


@pytest.mark.parametrize(("sources", "min_confidence", "match"), [
    ([], None, "sources is empty"), ([""], None, "source must"), ("  ", None, "source must"),
    ([None], None, "sources holds None"), (5, None, "sources must"),
    (b"user", None, "sources must"), ("a\nb", None, "source must"),
    ("x" * 256, None, "source must"),
    (None, 1.5, "min_confidence"), (None, -0.1, "min_confidence"),
    (None, math.nan, "min_confidence"), (None, math.inf, "min_confidence"),
    (None, "0.5", "min_confidence"), (None, True, "min_confidence")])
def test_a_bad_source_or_confidence_filter_is_refused(
        htm_factory: Callable[..., HTM], sources: Any, min_confidence: Any, match: str) -> None:
    htm = htm_factory(robot="r")
    htm.add("tea", key="tea", source="user", confidence=0.5)
    def state() -> tuple[int, int]:
        return (htm.stats().working_memory_count, htm.list().memories[0].access_count)

    before = state()
    with pytest.raises(ValidationError, match=match):
        htm.recall("tea", sources=sources, min_confidence=min_confidence)
    with pytest.raises(ValidationError, match=match):
        htm.list(sources=sources, min_confidence=min_confidence)
    assert state() == before


def test_source_and_confidence_filters_never_widen_a_scope(
        htm_factory: Callable[..., HTM]) -> None:
    """Users ``Ada`` and ``ada`` (and ``:``/``/`` lookalikes) each keep memories from the
    same sources; a scoped recall or list with a source and confidence filter sees only
    that user's memories that pass."""
    htm = htm_factory(robot="r")
    users = ["Ada", "ada", "ada:x", "ada/x"]
    for user in users:
        scope = ChatScope.of(user_id=user)
        htm.add_many([
            {"content": f"{user} said the tea is green", "source": "user", "confidence": 0.9,
             "key": scope.key_prefix + "sure", "tags": scope.stored_tags(None)},
            {"content": f"{user} guessed the tea is green", "source": "user",
             "key": scope.key_prefix + "guess", "tags": scope.stored_tags(None)},
            {"content": f"{user} was told the tea is green", "source": "assistant",
             "confidence": 1.0, "key": scope.key_prefix + "told",
             "tags": scope.stored_tags(None)}])
    for user in users:
        scope = ChatScope.of(user_id=user)
        hits = htm.recall("tea green", sources="user", min_confidence=0.5,
                          tags=scope.filter_tags(), limit=10)
        assert [h.memory.content for h in hits] == [f"{user} said the tea is green"]
        listed = htm.list(sources=["user"], min_confidence=0.5, tags=scope.filter_tags())
        assert [m.content for m in listed.memories] == [f"{user} said the tea is green"]
        listed = htm.list(sources="user", key_prefix=scope.key_prefix)
        assert sorted(m.content for m in listed.memories) == sorted(
            [f"{user} said the tea is green", f"{user} guessed the tea is green"])


def test_explain_recall_takes_the_source_and_confidence_filters(
        htm_factory: Callable[..., HTM]) -> None:
    from htm_core.explain import explain_recall

    htm = htm_factory(robot="r")
    _seed(htm)
    why = explain_recall(htm, "tea talk", sources="user", min_confidence=0.5, limit=3)
    assert [h.memory.content for h in why.fused] == ["tea talk from user sure"]
    with pytest.raises(ValidationError, match="min_confidence"):
        explain_recall(htm, "tea talk", min_confidence=math.nan)
