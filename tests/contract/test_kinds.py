"""Memory kinds with provenance through the facade, on both backends: what ``add`` and
``update`` take and check, what the kind rules decide, and the ``kinds`` filter of
``recall`` and ``list`` (inside each search, never widening a scope)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from htm_core import HTM
from htm_core.errors import ConflictError, ValidationError
from htm_core.scope import ChatScope


def test_add_keeps_kind_source_and_confidence(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="r")
    made = htm.add("Ada takes her tea green", kind="Preference", source="import:notes.md",
                   confidence=1)
    assert (made.kind, made.source, made.confidence) == ("preference", "import:notes.md", 1.0)
    batch = htm.add_many([{"content": "the deploy ran at noon", "source": "assistant"},
                          {"content": "Ada is a mathematician", "kind": "fact",
                           "confidence": 0.25},
                          "plain string item"])
    assert [(m.kind, m.source, m.confidence) for m in batch] == [
        ("episodic", "assistant", None), ("fact", None, 0.25), ("episodic", None, None)]
    htm.close()
    again = htm_factory(robot="r")
    read = again.get(made.key)
    assert read is not None and (read.kind, read.source, read.confidence) == (
        "preference", "import:notes.md", 1.0)
    assert [again.get(m.key).kind for m in batch] == ["episodic", "fact", "episodic"]  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "kind", "confidence"), [
    ("Hi! My name is Ada.", "fact", 0.9),
    ("I prefer green tea.", "preference", 0.85),
    ("Please remember that the door code is 4521", "fact", 0.9),
    ("I know how to juggle", "skill", 0.8),
    ("We met at noon and talked about the venue.", "episodic", None),
    ("What is my name?", "episodic", None),
])
def test_without_a_kind_the_rules_decide(htm_factory: Callable[..., HTM], text: str, kind: str,
                                         confidence: float | None) -> None:
    htm = htm_factory(robot="r")
    m = htm.add(text, source="user")
    assert (m.kind, m.source, m.confidence) == (kind, "user", confidence)
    assert htm.get(m.key).kind == kind  # type: ignore[union-attr]


def test_a_given_kind_or_confidence_wins_over_the_rules(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="r")
    assert (htm.add("My name is Ada", key="a", kind="episodic").kind,
            htm.get("a").confidence) == ("episodic", None)  # type: ignore[union-attr]
    m = htm.add("My name is Bob", key="b", confidence=0.3)
    assert (m.kind, m.confidence) == ("fact", 0.3)
    # A re-add of stored content keeps what the memory is; update changes it.
    again = htm.add("My name is Bob", key="b", kind="preference", source="x", confidence=1.0)
    assert (again.kind, again.source, again.confidence) == ("fact", None, 0.3)


BAD: list[tuple[dict[str, Any], str]] = [
    ({"kind": "facts"}, "kind must be one of episodic, fact"),
    ({"kind": 3}, "kind must be one of"),
    ({"confidence": 1.5}, "confidence must be a number from 0 to 1"),
    ({"confidence": -0.1}, "confidence must be"),
    ({"confidence": math.nan}, "confidence must be"),
    ({"confidence": math.inf}, "confidence must be"),
    ({"confidence": True}, "confidence must be"),
    ({"confidence": "0.5"}, "confidence must be"),
    ({"source": ""}, "source must be a non-blank string"),
    ({"source": "   "}, "source must be"),
    ({"source": "x" * 256}, "at most 255 characters"),
    ({"source": "user\nsystem"}, "without control characters"),
    ({"source": "user\x00"}, "without control characters"),
    ({"source": 5}, "source must be"),
]


@pytest.mark.parametrize(("given", "message"), BAD)
def test_bad_provenance_is_refused_and_nothing_is_written(
        htm_factory: Callable[..., HTM], given: dict[str, Any], message: str) -> None:
    htm = htm_factory(robot="r")
    htm.add("already here", key="here")
    with pytest.raises(ValidationError, match=message):
        htm.add("My name is Ada", key="new", **given)
    with pytest.raises(ValidationError, match=message):
        htm.add_many([{"content": "fine item", "key": "fine"},
                       {"content": "bad item", "key": "bad", **given}])
    with pytest.raises(ValidationError, match=message):
        htm.update("here", "already here", **given)
    assert [m.key for m in htm.list().memories] == ["here"]
    assert [m.version for m in htm.versions("here")] == [1]


def test_update_sets_kind_source_and_confidence_as_a_new_version(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="r")
    htm.add("I like tea", key="tea", source="user", confidence=0.5)
    assert htm.get("tea").kind == "preference"  # type: ignore[union-attr]
    # Not given: unchanged, and a new text is not classified again.
    same = htm.update("tea", "Ada drinks green tea at noon")
    assert (same.version, same.kind, same.source, same.confidence) == (
        2, "preference", "user", 0.5)
    changed = htm.update("tea", same.content, kind="fact", confidence=0.95)
    assert (changed.version, changed.kind, changed.source, changed.confidence) == (
        3, "fact", "user", 0.95)
    assert htm.update("tea", same.content, kind="fact").version == 3  # nothing differs
    assert [(v.kind, v.confidence) for v in htm.versions("tea")] == [
        ("preference", 0.5), ("preference", 0.5), ("fact", 0.95)]
    assert htm.get("tea", version=1).kind == "preference"  # type: ignore[union-attr]


def test_update_of_a_kind_is_compare_and_set(htm_factory: Callable[..., HTM]) -> None:
    """Two writers on one store: an update based on a version the other writer has moved
    on from is refused with ``expected_version`` (nothing written), and merges a kind
    with the other writer's fields without it."""
    one, two = htm_factory(robot="one"), htm_factory(robot="two")
    one.add("the venue is the old mill", key="venue", kind="episodic")
    read = one.get("venue")
    assert read is not None
    two.update("venue", read.content, kind="fact", source="two")
    with pytest.raises(ConflictError):
        one.update("venue", read.content, kind="digest", expected_version=read.version)
    assert [(v.version, v.kind) for v in one.versions("venue")] == [(1, "episodic"), (2, "fact")]
    merged = one.update("venue", read.content, importance=7.0)
    assert (merged.version, merged.kind, merged.source, merged.importance) == (
        3, "fact", "two", 7.0)


@pytest.mark.parametrize("strategy", ["hybrid", "vector", "fulltext"])
def test_a_kind_filter_runs_before_the_limit(htm_factory: Callable[..., HTM],
                                             strategy: str) -> None:
    htm = htm_factory(robot="r")
    htm.add_many([{"content": f"tea talk number {i}", "kind": "episodic"} for i in range(40)])
    facts = htm.add_many([{"content": f"tea fact {i}", "kind": "fact"} for i in range(3)])
    htm.add("tea preference", kind="preference")
    hits = htm.recall("tea talk", kinds="fact", limit=3, strategy=strategy)
    assert sorted(h.memory.key for h in hits) == sorted(m.key for m in facts)
    both = htm.recall("tea talk", kinds=["fact", "preference"], limit=10, strategy=strategy)
    assert {h.memory.kind for h in both} == {"fact", "preference"} and len(both) == 4
    assert htm.recall("tea talk", kinds="skill", strategy=strategy) == []
    assert len(htm.recall("tea talk", kinds="episodic", limit=25, strategy=strategy)) == 25


def test_list_by_kind_pages_through_every_one(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="r")
    htm.add_many([{"content": f"note {i}", "kind": "fact" if i % 3 == 0 else "episodic"}
                  for i in range(30)])
    seen, cursor = [], None
    while True:
        page = htm.list(kinds="fact", limit=4, cursor=cursor)
        seen += [m.content for m in page.memories]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"note {i}" for i in range(0, 30, 3)]
    assert len(htm.list(kinds=("fact", "episodic"), limit=100).memories) == 30


@pytest.mark.parametrize("bad", ["facts", [], [""], 5, b"fact", {"fact": 1}])
def test_a_bad_kind_filter_is_refused(htm_factory: Callable[..., HTM], bad: Any) -> None:
    htm = htm_factory(robot="r")
    with pytest.raises(ValidationError, match="kind"):
        htm.recall("tea", kinds=bad)
    with pytest.raises(ValidationError, match="kind"):
        htm.list(kinds=bad)


def test_a_kind_filter_never_widens_a_scope(htm_factory: Callable[..., HTM]) -> None:
    """Users ``Ada`` and ``ada`` (and a ``:``/``/`` lookalike) each keep facts; a recall or
    list scoped to one of them with a kind filter sees that user's memories of the kind
    and nothing of the others'."""
    htm = htm_factory(robot="r")
    users = ["Ada", "ada", "ada:x", "ada/x"]
    for user in users:
        scope = ChatScope.of(user_id=user)
        htm.add_many([
            {"content": f"{user} fact: the tea is green", "kind": "fact",
             "key": scope.key_prefix + "fact", "tags": scope.stored_tags(None)},
            {"content": f"{user} said the tea is green", "key": scope.key_prefix + "said",
             "tags": scope.stored_tags(None)}])
    for user in users:
        scope = ChatScope.of(user_id=user)
        hits = htm.recall("tea green fact", kinds="fact", tags=scope.filter_tags(), limit=10)
        assert [h.memory.content for h in hits] == [f"{user} fact: the tea is green"]
        listed = htm.list(kinds=["fact"], tags=scope.filter_tags())
        assert [m.content for m in listed.memories] == [f"{user} fact: the tea is green"]
        listed = htm.list(kinds="fact", key_prefix=scope.key_prefix)
        assert [m.content for m in listed.memories] == [f"{user} fact: the tea is green"]


def test_documents_and_summaries_have_their_kind(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="r")
    chunks = htm.add_document("# Tea\n\nGreen tea is steamed.\n", source="tea.md")
    assert {(m.kind, m.source) for m in chunks} == {("document", "tea.md")}
    long_name = "d" * 300
    assert {m.source for m in htm.add_document("# A\n\ntext\n", source=long_name)} == {None}
    htm._add_summary("summary:1", "They talked about tea.", ["k1"], "r")
    assert htm.get("summary:1").kind == "summary"  # type: ignore[union-attr]
