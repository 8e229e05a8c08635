"""Hybrid recall reads its light rows once: the full-text hits (for coverage) and the
neighbors of every memory that can still reach the fused top, in one ``briefs`` call."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

from htm_core import HashingEmbedder
from htm_core.recall import RetrievalConfig, search
from htm_core.recall.fusion import coverage_rrf, may_reach_top
from htm_core.store.base import Brief, NewMemory, SearchFilters
from htm_core.store.sqlite import SQLiteStore

WORDS = ["puppy", "beagle", "garden", "tomato", "violin", "lesson", "kenji", "ana", "trip", "kyoto"]
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


class _Known:
    """Briefs already at hand (the helper under test never reads a store)."""

    def __init__(self, briefs: dict[int, Brief]) -> None:
        self.found = briefs

    def fetch(self, ids: Iterable[int]) -> dict[int, Brief]:
        return self.found


def test_fused_top_is_always_inside_the_prefetched_set() -> None:
    """Whatever the full-text hits' coverage, the fused top ``pool`` is among the ids
    ``may_reach_top`` names, and the bound is tight enough to leave ids out."""
    rng = random.Random(5)
    config = RetrievalConfig()
    pool = 20
    narrower = 0
    for trial in range(300):
        universe = list(range(1, 400))
        arms = {"vector": rng.sample(universe, 50), "fulltext": rng.sample(universe, 50)}
        if trial % 3 == 0:
            arms["vector@time"] = rng.sample(universe, 30)
            arms["fulltext@time"] = rng.sample(universe, 30)
        query = " ".join(rng.sample(WORDS, 4))
        briefs = {i: Brief(i, " ".join(rng.sample(WORDS, rng.randint(0, 5))), "r", START)
                  for i in universe}
        fused = coverage_rrf(arms, query, config, _Known(briefs))  # type: ignore[arg-type]
        reach = set(may_reach_top(arms, config, pool))
        assert {r.id for r in fused[:pool]} <= reach, trial
        everything = {i for got in arms.values() for i in got}
        narrower += len(reach) < len(everything)
    assert narrower > 250


def test_no_neighbors_means_nothing_to_prefetch() -> None:
    config = RetrievalConfig(neighbors=0)
    assert may_reach_top({"vector": [1, 2], "fulltext": [3]}, config, 20) == []


def test_a_hybrid_recall_reads_briefs_once(tmp_path: Path) -> None:
    """On a real SQLite store: one ``briefs`` call per default hybrid recall."""
    embedder = HashingEmbedder()
    store = SQLiteStore(str(tmp_path / "m.db"))
    rng = random.Random(9)
    texts = [f"{' '.join(rng.sample(WORDS, 3))} note {i}" for i in range(400)]
    vectors = embedder.embed_documents(texts)
    store.add_many([NewMemory(key=f"k{i}", content=t, robot="r", importance=1.0,
                              token_count=5, created_at=START + timedelta(minutes=i),
                              embedding=v, embedder=embedder.name)
                    for i, (t, v) in enumerate(zip(texts, vectors, strict=True))])
    calls: list[int] = []
    read = store.briefs

    def counted(ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        calls.append(len(ids))
        return read(ids, filters)

    store.briefs = counted  # type: ignore[method-assign]
    try:
        for query in ["puppy beagle garden", "violin lesson with kenji", "ana trip kyoto tomato"]:
            calls.clear()
            vector = embedder.embed_query(query)
            got = search(store, query=query, query_vector=lambda: vector,  # noqa: B023
                         strategy="hybrid", limit=10, filters=SearchFilters())
            assert len(got) == 10
            assert len(calls) == 1, calls
    finally:
        store.close()
