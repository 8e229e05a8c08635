"""Fusion weights that follow the full-text arm's evidence (``RetrievalConfig.adaptive``, on
by default): each full-text arm weighs the coverage of its best hit, so an arm that found
only an incidental word of the question cannot bury the vector arm's clear answer, and an
arm whose best hit holds every word keeps its weight."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import pytest

from htm_core import HTM, FrozenClock, RetrievalConfig
from htm_core.recall.fusion import coverage_rrf
from htm_core.store.base import Brief

from .test_ranking_round_two import START

DIM = 40


class _Known:
    """Briefs already at hand (the fusion under test reads no store)."""

    def __init__(self, texts: dict[int, str]) -> None:
        self.found = {i: Brief(i, t, "r", START) for i, t in texts.items()}

    def fetch(self, ids: Iterable[int]) -> dict[int, Brief]:
        return self.found


def _fuse(arms: dict[str, list[int]], texts: dict[int, str], query: str,
          **options: object) -> list[tuple[int, float]]:
    config = RetrievalConfig().with_options(**options)
    return [(r.id, r.score) for r in coverage_rrf(arms, query, config,
                                                    _Known(texts))]  # type: ignore[arg-type]


def test_adaptive_is_the_default_and_plain_rrf_stays_plain() -> None:
    assert RetrievalConfig().adaptive is True
    assert RetrievalConfig.plain().adaptive is False


# Query words: "beagle", "garden", "violin". Memory 1 is the vector arm's first hit and has
# none of them; memories 20..29 each hold "garden" only (a third of the query) and sit
# far down the vector arm.
QUERY = "beagle garden violin"
VECTOR = [1, *range(2, 20), *range(20, 30)]
INCIDENTAL = {i: f"the garden gate number {i}" for i in range(20, 30)}
OTHERS = {i: f"unrelated remark {i}" for i in range(1, 20)}


def test_an_arm_of_incidental_words_weighs_its_best_hits_share() -> None:
    """Fixed weights: the hits on one word of three pass the vector arm's first hit; the
    adaptive arm weighs a third, and that hit stays first."""
    arms = {"vector": VECTOR, "fulltext": list(range(20, 30))}
    texts = {**OTHERS, **INCIDENTAL}
    fixed = _fuse(arms, texts, QUERY, adaptive=False)
    adaptive = _fuse(arms, texts, QUERY)
    assert fixed[0][0] == 20 and [m for m, _ in fixed].index(1) > 0
    assert adaptive[0][0] == 1
    # The full-text term of hit 20 (vector rank 20, full-text rank 1) is a third of a third.
    score = dict(adaptive)[20]
    assert score == pytest.approx(1 / (60 + 20) + (1 / 3) * (1 / 3) / (60 + 1))


def test_an_arm_whose_best_hit_holds_every_word_keeps_its_weight() -> None:
    """The tie case: the best hit covers the whole query, so adaptive and fixed weights
    give the same scores and order, the incidental hits included."""
    texts = {**OTHERS, **INCIDENTAL, 30: "a beagle in the garden learning the violin"}
    arms = {"vector": VECTOR, "fulltext": [30, *range(20, 30)]}
    assert _fuse(arms, texts, QUERY) == _fuse(arms, texts, QUERY, adaptive=False)


def test_a_better_best_hit_weighs_the_whole_arm_more() -> None:
    """Two of three words in the best hit: every hit of the arm counts two thirds as much
    as with fixed weights, and more than when the best hit has one word."""
    two = {**OTHERS, **INCIDENTAL, 30: "a beagle in the garden"}
    arms = {"vector": VECTOR, "fulltext": [30, *range(20, 30)]}
    fixed = dict(_fuse(arms, two, QUERY, adaptive=False))
    adaptive = dict(_fuse(arms, two, QUERY))
    for mid in range(20, 30):
        vector_term = 1 / (60 + VECTOR.index(mid) + 1)
        assert adaptive[mid] - vector_term == pytest.approx((fixed[mid] - vector_term) * 2 / 3)
    one = dict(_fuse({"vector": VECTOR, "fulltext": list(range(20, 30))},
                     {**OTHERS, **INCIDENTAL}, QUERY))
    assert adaptive[25] > one[25]


def test_each_full_text_arm_is_weighed_by_its_own_best_hit() -> None:
    """The time-window full-text arm has its own best hit: a window holding the whole
    query keeps its weight while the arm over everything is weighed down."""
    texts = {**OTHERS, **INCIDENTAL, 30: "a beagle in the garden learning the violin"}
    arms = {"vector": VECTOR, "fulltext": list(range(20, 30)), "fulltext@time": [30]}
    scores = dict(_fuse(arms, texts, QUERY))
    assert scores[30] == pytest.approx(6.0 / 61)  # weight 6, coverage 1, not scaled
    assert scores[20] == pytest.approx(1 / 80 + (1 / 9) / 61)


def test_an_arm_without_any_query_word_adds_nothing() -> None:
    texts = {**OTHERS, 40: "nothing to see", 41: "nor here"}
    fused = dict(_fuse({"vector": VECTOR[:19], "fulltext": [40, 41]}, texts, QUERY))
    assert fused[40] == 0.0 and fused[41] == 0.0
    assert fused[1] == pytest.approx(1 / 61)


def test_fusion_is_deterministic() -> None:
    """Same arms, same order and scores, whatever the order the arms are given in; ties
    broken by the best single rank, then the id."""
    texts = {**OTHERS, **INCIDENTAL}
    arms = {"vector": VECTOR, "fulltext": list(range(20, 30))}
    first = _fuse(arms, texts, QUERY)
    again = _fuse(dict(reversed(list(arms.items()))), texts, QUERY)
    assert first == again
    tied = _fuse({"vector": [6, 5], "other": [5, 6]}, texts, QUERY)
    assert tied[0][1] == tied[1][1] and [m for m, _ in tied] == [5, 6]
    assert all(math.isfinite(s) for _, s in first)


# -- end to end, both backends --------------------------------------------------------


def _axis_vector(cos: float, axis: int) -> list[float]:
    """A unit vector at cosine ``cos`` to axis 0, the rest along ``axis``."""
    v = [0.0] * DIM
    v[0], v[axis] = cos, math.sqrt(1.0 - cos * cos)
    return v


FACT = "My kid Elsa turns six next month."
ASIDES = [f"Thinking about {w} again." for w in (
    "tomatoes", "sourdough", "kayaks", "lanterns", "glaciers", "marmalade", "harbours",
    "orchards", "compasses", "puzzles", "chimneys", "lighthouses", "meadows", "ferries",
    "telescopes", "quilts", "volcanoes", "windmills", "canyons", "saddles")]
NAMED = [f"Please name the {w} folder before lunch." for w in (
    "invoice", "archive", "backup", "drafts", "photos", "scans", "budget", "travel",
    "receipts", "notes")]
QUESTION = "What is my child's name?"


class _Table:
    """Fixed vectors: the fact at cosine 0.9 to the question, twenty asides from 0.8 down,
    the ten memories holding "name" at 0.3 and below (far down the vector arm)."""

    name = "table-adaptive-40"

    def __init__(self) -> None:
        self.table = {QUESTION: _axis_vector(1.0, 1), FACT: _axis_vector(0.9, 1)}
        for i, text in enumerate(ASIDES):
            self.table[text] = _axis_vector(0.8 - 0.02 * i, 2 + i)
        for i, text in enumerate(NAMED):
            self.table[text] = _axis_vector(0.3 - 0.02 * i, 22 + i)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.table[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.table[text]


def test_recall_keeps_the_clear_vector_answer_first(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    """"What is my child's name?" over a store where "name" is an incidental word of ten
    memories: with fixed weights they all pass the fact the vector arm ranks first; with
    the default (adaptive) weights the fact comes first, on both backends."""
    embedder = _Table()
    htm = htm_factory(robot="r", embedder=embedder)
    for text in [FACT, *ASIDES, *NAMED]:
        clock.advance(hours=2)  # never neighbors
        htm.add(text)
    base = RetrievalConfig(centering=False, duplicates=None)  # the geometry as written
    fixed = htm_factory(robot="r", store=htm.store, embedder=embedder,
                        retrieval=base.with_options(adaptive=False))
    adaptive = htm_factory(robot="r", store=htm.store, embedder=embedder, retrieval=base)
    before = [h.memory.content for h in fixed.recall(QUESTION, limit=15)]
    after = [h.memory.content for h in adaptive.recall(QUESTION, limit=15)]
    assert before.index(FACT) >= 10 and set(before[:10]) == set(NAMED)
    assert after[0] == FACT
    assert after == [h.memory.content for h in adaptive.recall(QUESTION, limit=15)]
