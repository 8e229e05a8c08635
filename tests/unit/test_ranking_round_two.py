"""Hybrid ranking options of recall round two: the typicality penalty on the centered
query and near-duplicate demotion (newest first), on both backends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from htm_core import HTM, FrozenClock, RetrievalConfig
from htm_core.errors import ValidationError
from htm_core.recall import centered_query
from htm_core.recall.coverage import stems_of
from htm_core.recall.duplicates import demote_duplicates
from htm_core.store.base import Brief

DIM = 16
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _unit(v: np.ndarray) -> list[float]:
    return (v / np.linalg.norm(v)).tolist()


def _axis(i: int) -> np.ndarray:
    v = np.zeros(DIM)
    v[i] = 1.0
    return v


class TableEmbedder:
    """Fixed vectors by text: a deterministic geometry no model could promise."""

    name = "table-test-16"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.table[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.table[text]


# Ten fillers along the common direction e0, one typical memory that leans towards the
# query (e0 and e1) and one atypical memory that shares less of the query but nothing of
# the common direction. Centered, the typical one wins by 0.07; penalised, the atypical one
# wins by 0.08 (worked out in test_penalty_flips_a_typical_memory_below_an_atypical_one).
FILLERS = {f"Filler remark number {i}.": _unit(0.9 * _axis(0) + 0.1 * _axis(3 + i))
           for i in range(10)}
TYPICAL = "Typical chatter about the weather."
ATYPICAL = "Adopted a greyhound called Juno."
QUERY = "Which xylophone quartz?"
TABLE = {**FILLERS,
         TYPICAL: _unit(0.8 * _axis(0) + 0.5 * _axis(1) + 0.1 * _axis(14)),
         ATYPICAL: _unit(0.45 * _axis(1) + 0.1 * _axis(13) + 1.1 * _axis(15)),
         QUERY: _unit(0.3 * _axis(0) + 0.6 * _axis(1) + 0.3 * _axis(13))}


def test_penalty_lowers_each_similarity_by_its_share_of_the_centroid() -> None:
    """Ranking by the penalised query is ranking by ``q'·d - p (μ·d)`` (q' centered)."""
    rng = np.random.default_rng(4)
    for _ in range(20):
        q, mu = rng.normal(size=DIM), rng.normal(size=DIM)
        mu /= np.linalg.norm(mu)
        docs = [d / np.linalg.norm(d) for d in rng.normal(size=(30, DIM))]
        centered = np.asarray(centered_query(q.tolist(), mu.tolist()))
        penalised = np.asarray(centered_query(q.tolist(), mu.tolist(), 0.2))
        assert float(np.linalg.norm(penalised)) == pytest.approx(1.0)
        want = [float(centered @ d - 0.2 * (mu @ d)) for d in docs]
        got = [float(penalised @ d) for d in docs]
        assert np.argsort(want).tolist() == np.argsort(got).tolist()
    assert centered_query([0.6, 0.8], None, 0.2) == [0.6, 0.8]


def test_penalty_flips_a_typical_memory_below_an_atypical_one() -> None:
    vectors = [np.asarray(v) for v in TABLE.values() if v is not TABLE[QUERY]]
    mu = np.mean(vectors, axis=0)
    mu /= np.linalg.norm(mu)
    q = TABLE[QUERY]
    centered = np.asarray(centered_query(q, mu.tolist()))
    penalised = np.asarray(centered_query(q, mu.tolist(), 0.2))
    typical, atypical = np.asarray(TABLE[TYPICAL]), np.asarray(TABLE[ATYPICAL])
    assert centered @ typical > centered @ atypical + 0.05
    assert penalised @ atypical > penalised @ typical + 0.05


def _recall_order(make: Callable[..., HTM], clock: FrozenClock,
                  configs: dict[str, RetrievalConfig]) -> dict[str, list[str]]:
    htm = make(robot="r", embedder=TableEmbedder(TABLE))
    for text in [*FILLERS, TYPICAL, ATYPICAL]:
        clock.advance(hours=2)  # never neighbors
        htm.add(text)
    out = {}
    for name, config in configs.items():
        facade = make(robot="r", store=htm.store, embedder=TableEmbedder(TABLE),
                      retrieval=config)
        out[name] = [h.memory.content for h in facade.recall(QUERY, limit=5)]
    return out


def test_recall_puts_the_atypical_memory_first_with_the_penalty(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    order = _recall_order(htm_factory, clock, {
        "off": RetrievalConfig(typical_penalty=0.0), "default": RetrievalConfig()})
    assert order["off"][:2] == [TYPICAL, ATYPICAL]  # centering alone: the typical first
    assert order["default"][:2] == [ATYPICAL, TYPICAL]


REPEAT = ["Work has been crazy lately.", "Work has been crazy lately!",
          "work has been CRAZY lately", "Work... has been crazy, lately?"]
ANSWER = "Finished the book Dune yesterday."


def _store_repeats(htm: HTM, clock: FrozenClock) -> None:
    htm.add(ANSWER)
    for text in REPEAT:
        clock.advance(days=7)
        htm.add(text)


def test_near_duplicates_give_way_to_a_different_memory(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    """The same small talk said four times takes one place, held by its newest copy;
    the memory that says something else comes next instead of fifth."""
    htm = htm_factory(robot="r")
    _store_repeats(htm, clock)
    off = htm_factory(robot="r", store=htm.store, retrieval=RetrievalConfig(duplicates=None))
    query = "has work been crazy lately, and the book?"
    before = [h.memory.content for h in off.recall(query, limit=5)]
    assert before.index(ANSWER) == 4  # four copies first: what the option is for
    after = [h.memory.content for h in htm.recall(query, limit=5)]
    assert after[0] == REPEAT[-1]  # the newest copy holds the group's place
    assert after[1] == ANSWER
    assert sorted(after[2:]) == sorted(REPEAT[:-1])  # nothing dropped


def test_newer_of_two_identical_statements_ranks_first(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm = htm_factory(robot="r")
    old = htm.add("Dinner-wise I'm vegan these days.", key="old")
    clock.advance(days=30)
    new = htm.add("Dinner-wise, I'm vegan these days!", key="new")
    off = htm_factory(robot="r", store=htm.store, retrieval=RetrievalConfig(duplicates=None))
    assert [h.memory.key for h in off.recall("vegan dinner", limit=2)] == [old.key, new.key]
    assert [h.memory.key for h in htm.recall("vegan dinner", limit=2)] == [new.key, old.key]


def test_demote_duplicates_keeps_unrelated_order_and_every_id() -> None:
    texts = {1: "Kenji: work has been crazy", 2: "Kenji: we adopted a hamster",
             3: "Kenji: work has been crazy", 4: "Kenji: Riverside, near the park",
             5: "Kenji: work has been crazy"}
    known = {i: Brief(i, t, "r", START + timedelta(days=i)) for i, t in texts.items()}
    scores = {1: 0.9, 3: 0.8, 2: 0.7, 5: 0.6, 4: 0.5}
    order, out = demote_duplicates([1, 3, 2, 5, 4], scores, known, stems_of, pool=5,
                                   threshold=0.9)
    assert order == [5, 2, 4, 1, 3]
    assert out[5] == 0.9 and set(out) == set(scores)
    # Outside the pool nothing is grouped.
    order, _ = demote_duplicates([1, 3, 2, 5, 4], scores, known, stems_of, pool=1,
                                 threshold=0.9)
    assert order == [1, 3, 2, 5, 4]


@pytest.mark.parametrize("bad", [{"typical_penalty": -0.1}, {"typical_penalty": 1.5},
                                 {"duplicates": 0.0}, {"duplicates": 1.2}])
def test_bad_options_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValidationError, match=r"typical_penalty"):
        RetrievalConfig(**bad)  # type: ignore[arg-type]


def test_demote_duplicates_below_one_groups_nearly_equal_stems() -> None:
    """Threshold 0.9: nine stems and the same nine plus one (Jaccard 0.9) are one group;
    at 1.0 (the default) only the same stems are."""
    base = "alpha bravo charlie delta echo foxtrot golf hotel india"
    texts = {1: base, 2: base + " juliet", 3: "kilo lima mike"}
    known = {i: Brief(i, t, "r", START + timedelta(days=i)) for i, t in texts.items()}
    scores = {1: 0.9, 2: 0.8, 3: 0.7}
    order, _ = demote_duplicates([1, 2, 3], scores, known, stems_of, pool=3, threshold=0.9)
    assert order == [2, 3, 1]
    order, _ = demote_duplicates([1, 2, 3], scores, known, stems_of, pool=3, threshold=1.0)
    assert order == [1, 2, 3]
