"""The ``atypical@time`` arm runs only for a query whose words, less its time phrase, are
all common in the recall's scope (``RetrievalConfig.atypical_only_without_rare_words``),
and the stores' ``rare_terms`` that decides it counts inside the scope; on both backends."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text

from htm_core import HTM
from htm_core.explain import explain_recall
from htm_core.recall import RetrievalConfig
from htm_core.store import SearchFilters

both = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)

CHATTER = ["had a quiet evening with tea", "watched the rain over the harbour",
           "called my sister about the weekend", "cooked a big pot of lentil soup",
           "read two chapters of the novel", "fixed the squeaky hinge on the door",
           "walked the dog around the block", "sorted the old photos into albums",
           "tried a new bakery on the corner", "planned the garden beds for spring",
           "listened to the radio play", "wrote a long letter to grandma"]

VAGUE = "What did Ada do last May?"
PRECISE = "When did Ada go camping last May?"


def _chat(htm: HTM, tag: str, words: dict[str, int], *, n: int = 220) -> None:
    """``n`` turns of Ada's, tagged ``tag``, spread over March to July 2023 (so that a
    window of May leaves candidates out); ``words[w]`` of them (spread evenly) mention
    ``w``."""
    items = []
    for i in range(n):
        extra = [w for w, count in words.items() if count and i % (n // count) == 0
                 and i // (n // count) < count]
        when = datetime(2023, 3 + i % 5, 1 + i % 28, 10, tzinfo=timezone.utc) + timedelta(
            minutes=i)
        items.append({"content": f"Ada: {CHATTER[i % len(CHATTER)]} {' '.join(extra)} #{i}",
                      "key": f"{tag}-{i}", "tags": [tag], "created_at": when})
    htm.add_many(items)


def _arms(htm: HTM, query: str, tags: list[str] | None = None) -> set[str]:
    return set(explain_recall(htm, query, limit=10, tags=tags).arms)


@both
def test_the_atypical_arm_runs_only_without_a_rare_word(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    _chat(htm, "chat", {"camping": 4})
    # "ada" is in every memory: the vague question has nothing but the window.
    assert "atypical@time" in _arms(htm, VAGUE)
    assert any("atypical@time" in h.ranks for h in htm.recall(VAGUE, limit=10))
    # "camping" is in 4 of 220: it says what is wanted, the arm stays out.
    arms = _arms(htm, PRECISE)
    assert {"vector@time", "fulltext@time"} <= arms
    assert "atypical@time" not in arms
    assert all("atypical@time" not in h.ranks for h in htm.recall(PRECISE, limit=10))
    # A word found in no memory says nothing: the arm runs.
    assert "atypical@time" in _arms(htm, "When did Ada go skydiving last May?")
    # No time phrase, no question asked of the store, no time arm.
    assert not {a for a in _arms(htm, "When did Ada go camping?") if a.endswith("@time")}


@both
def test_the_option_off_runs_the_arm_for_every_time_phrase(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(retrieval=RetrievalConfig(atypical_only_without_rare_words=False))
    _chat(htm, "chat", {"camping": 4})
    assert "atypical@time" in _arms(htm, PRECISE)


@both
def test_rare_words_are_counted_inside_the_scope(htm_factory: Callable[..., HTM]) -> None:
    """``user:Ada`` and ``user:ada`` are two scopes (tags are compared exactly). "camping"
    is common among Ada's memories and rare in the store; "kayak" is common in the store
    and rare among ada's."""
    htm = htm_factory()
    _chat(htm, "user:Ada", {"camping": 30, "kayak": 60})
    _chat(htm, "user:ada", {"kayak": 3})
    store = htm.store
    terms = ["ada", "camping", "kayak", "skydiving"]
    assert store.rare_terms(terms, SearchFilters()) == ["camping"]
    assert store.rare_terms(terms, SearchFilters(tags=("user:Ada",))) == []
    assert store.rare_terms(terms, SearchFilters(tags=("user:ada",))) == ["kayak"]
    assert store.rare_terms([], SearchFilters(tags=("user:ada",))) == []
    # The recall asks in its scope: the same question, a different answer per user.
    assert "atypical@time" in _arms(htm, "When did Ada go camping last May?", ["user:Ada"])
    assert "atypical@time" not in _arms(htm, "When did Ada go camping last May?")
    assert "atypical@time" not in _arms(htm, "When did Ada kayak last May?", ["user:ada"])
    assert "atypical@time" in _arms(htm, "When did Ada kayak last May?", ["user:Ada"])
    assert "atypical@time" in _arms(htm, "When did Ada kayak last May?")


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_postgres_counts_the_same_with_the_tables_statistics(
        htm_factory: Callable[..., HTM]) -> None:
    """Without filters, a word all of whose lexemes ``ANALYZE`` found in more than a tenth
    of the rows is common without a count; the answer is the one the counts give."""
    htm = htm_factory()
    _chat(htm, "user:Ada", {"camping": 30, "kayak": 60})
    _chat(htm, "user:ada", {"kayak": 3})
    store = htm.store
    terms = ["ada", "camping", "kayak", "skydiving"]
    store.searcher.common_lexemes.cached = None
    counted = store.rare_terms(terms, SearchFilters())
    store.searcher.db.run("analyzing", lambda conn: conn.execute(text("ANALYZE memories")))
    store.searcher.common_lexemes.cached = None  # read the statistics now
    assert {"ada", "kayak"} <= set(store.searcher.common_lexemes() or [])
    assert store.rare_terms(terms, SearchFilters()) == counted == ["camping"]
    assert store.rare_terms(terms, SearchFilters(tags=("user:ada",))) == ["kayak"]
