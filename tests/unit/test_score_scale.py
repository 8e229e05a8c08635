"""The score a user reads: one 0..1 scale with few ties, a time word that cannot lift
memories it does not tell apart, and negations that count as words. Both backends, real
stores, the hashing embedder."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import timedelta

import pytest

from htm_core import HTM, FrozenClock
from htm_core.scoring import DEFAULT_MIN_SCORE
from htm_core.text import parse_query

#: A fresh store of one day: every memory is from "today".
TODAY = [
    "It rained all day in Leeds",
    "We agreed that billing moves to monthly invoices from June",
    "Lunch was a cheese sandwich at the desk",
    "The billing page shows the wrong currency for Swiss customers",
    "Remember to call mum about the weekend",
    "The deploy went out at noon without trouble",
    "Priya booked the meeting room for Thursday",
]


def _today_store(make: Callable[..., HTM], clock: FrozenClock) -> HTM:
    htm = make()
    start = clock() - timedelta(hours=3)
    htm.add_many([{"content": text, "key": f"t{i}", "created_at": start + timedelta(minutes=i)}
                  for i, text in enumerate(TODAY)])
    return htm


def _strictly_decreasing(scores: list[float]) -> bool:
    return all(a > b for a, b in itertools.pairwise(scores) if b > 0.0)


def test_a_time_word_whose_window_holds_every_memory_lifts_none(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm = _today_store(htm_factory, clock)
    plain = htm.recall("what did we say about billing", limit=5)
    timed = htm.recall("what did we say about billing today", limit=5)
    # "today" covers the whole store: it ranks as if it were not there.
    assert [h.memory.key for h in timed] == [h.memory.key for h in plain]
    assert {h.memory.key for h in timed[:2]} == {"t1", "t3"}
    scores = [h.score for h in timed]
    assert _strictly_decreasing(scores), scores
    assert timed[2].score < timed[1].score / 2  # the rest is far below the billing notes


def test_a_time_word_still_lifts_the_memories_of_its_window(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm = _today_store(htm_factory, clock)
    htm.add("Yesterday the billing export failed twice", key="old",
            created_at=clock() - timedelta(days=1))
    hits = htm.recall("billing today", limit=8)
    assert {h.memory.key for h in hits[:2]} == {"t1", "t3"}
    assert "old" in [h.memory.key for h in hits]


def test_neighboring_hits_never_tie(htm_factory: Callable[..., HTM],
                                     clock: FrozenClock) -> None:
    """Hits with the same evidence (the same words of the query, the same neighbor credit)
    still read best first, each a little above the next."""
    htm = _today_store(htm_factory, clock)
    for strategy in ("hybrid", "vector", "fulltext"):
        for query in ("billing", "what did we say about billing today", "Priya meeting",
                      "the weekend deploy"):
            scores = [h.score for h in htm.recall(query, limit=7, strategy=strategy)]
            assert _strictly_decreasing(scores), (strategy, query, scores)
            assert all(0.0 <= s < 1.0 for s in scores), scores


def test_every_word_held_scores_high_but_only_identical_text_scores_one(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm = _today_store(htm_factory, clock)
    hits = htm.recall("billing monthly invoices", limit=3)
    assert hits[0].memory.key == "t1"
    assert 0.8 <= hits[0].score < 1.0
    same = htm.recall(TODAY[2], limit=1, strategy="vector")[0]
    assert same.memory.key == "t2" and same.score == pytest.approx(1.0)


def test_negations_are_words_of_the_query() -> None:
    parsed = parse_query("what can't Priya stand")
    assert set(parsed.coverage_words()) == {"priya", "stand", "can't"}
    for question, word in (("why won't it start", "won't"), ("I don't like it", "don't"),
                           ("is it not ready", "not"), ("no sugar please", "no"),
                           ("she never called", "never"), ("Ana\u2019s car didn\u2019t start",
                                                           "didn't")):
        assert word in parse_query(question).coverage_words(), question


def test_a_negation_in_the_question_prefers_the_memory_that_holds_it(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    htm.add_many([
        {"content": "Priya can stand on her hands for a minute", "key": "can"},
        {"content": "Priya can't stand cilantro in anything", "key": "cant"},
        {"content": "Priya does not like early meetings", "key": "not"},
        {"content": "Priya likes early meetings", "key": "likes"},
    ])
    hits = htm.recall("what can't Priya stand", limit=4)
    assert hits[0].memory.key == "cant", [(h.memory.key, h.score) for h in hits]
    by_key = {h.memory.key: h.score for h in hits}
    assert by_key["cant"] > by_key["can"] + 0.1, by_key
    by_key = {h.memory.key: h.score for h in htm.recall("Priya not early meetings", limit=4)}
    assert by_key["not"] > by_key["likes"], by_key


def test_notes_written_next_to_a_match_do_not_score_like_matches(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    """Neighbor context ranks the turn after a match higher; it lends it no score, so the
    default cut-off leaves out the unrelated notes stored a minute before and after."""
    htm = _today_store(htm_factory, clock)
    hits = htm.recall("billing", limit=7)
    assert {h.memory.key for h in hits[:2]} == {"t1", "t3"}
    assert [h.memory.key for h in hits if h.score >= DEFAULT_MIN_SCORE] == \
        [h.memory.key for h in hits[:2]]
