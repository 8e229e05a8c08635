"""Hybrid retrieval: a vector arm and a full-text arm, fused by Reciprocal Rank Fusion.

``strategy`` is one of:

- ``"vector"``: cosine similarity of the query embedding (score = cosine)
- ``"fulltext"``: the store's full-text ranking (bm25 on SQLite, ``ts_rank`` on
  PostgreSQL; score = that relevance)
- ``"hybrid"`` (default): the top ``candidates × limit`` of each arm fused by RRF,
  score = Σ 1 / (k + rank) with k = 60 and ranks starting at 1

Timeframe, robot and tag filters are handed to each arm, which applies them in the
database, so a filter never starves the result. The fusion function is replaceable
through :class:`RetrievalConfig`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .errors import UnknownStrategyError
from .store.base import LongTermStore, SearchFilters

__all__ = [
    "STRATEGIES",
    "RankedId",
    "RetrievalConfig",
    "check_recall_strategy",
    "reciprocal_rank_fusion",
    "search",
]

STRATEGIES = ("hybrid", "vector", "fulltext")


@dataclass(frozen=True)
class RankedId:
    """One result of a search: memory id, score (higher is better), rank in each arm."""

    id: int
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)


FusionFn = Callable[[Mapping[str, Sequence[int]], int], list[RankedId]]


def reciprocal_rank_fusion(arms: Mapping[str, Sequence[int]], k: int = 60) -> list[RankedId]:
    """Fuse ranked id lists: score = Σ over arms of 1 / (k + rank), rank from 1.

    Ties are broken by the best single rank, then by id, so the order is deterministic.

    >>> [r.id for r in reciprocal_rank_fusion({"a": [1, 2, 3], "b": [3, 1]})]
    [1, 3, 2]
    """
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for arm, ids in arms.items():
        for rank, mid in enumerate(ids, start=1):
            scores[mid] = scores.get(mid, 0.0) + 1.0 / (k + rank)
            ranks.setdefault(mid, {})[arm] = rank
    ordered = sorted(scores, key=lambda m: (-scores[m], min(ranks[m].values()), m))
    return [RankedId(m, scores[m], ranks[m]) for m in ordered]


@dataclass(frozen=True, kw_only=True)
class RetrievalConfig:
    """How hybrid recall fuses its arms.

    Attributes:
        rrf_k: the RRF constant (60, as in the original paper).
        candidates: each arm contributes its top ``candidates × limit``.
        fusion: ``fusion(arms, k) -> list[RankedId]``; replace to try another fusion.
    """

    rrf_k: int = 60
    candidates: int = 2
    fusion: FusionFn = reciprocal_rank_fusion


def check_recall_strategy(strategy: str) -> str:
    """Return ``strategy`` if it is a recall strategy, else raise ``UnknownStrategyError``."""
    if strategy not in STRATEGIES:
        raise UnknownStrategyError(
            f"unknown recall strategy {strategy!r}; use one of {', '.join(STRATEGIES)}"
        )
    return strategy


def search(
    store: LongTermStore,
    *,
    query: str,
    query_vector: Callable[[], Sequence[float]],
    strategy: str,
    limit: int,
    filters: SearchFilters,
    config: RetrievalConfig | None = None,
) -> list[RankedId]:
    """Run ``strategy`` against ``store`` and return up to ``limit`` ranked ids.

    ``query_vector`` is called only when the vector arm runs (so a full-text recall
    never pays for an embedding).
    """
    check_recall_strategy(strategy)
    config = config or RetrievalConfig()
    if strategy == "vector":
        return [RankedId(mid, score, {"vector": i})
                for i, (mid, score) in enumerate(
                    store.vector_search(query_vector(), limit=limit, filters=filters), start=1)]
    if strategy == "fulltext":
        return [RankedId(mid, score, {"fulltext": i})
                for i, (mid, score) in enumerate(
                    store.fulltext_search(query, limit=limit, filters=filters), start=1)]
    depth = limit * config.candidates
    arms = {
        "vector": [mid for mid, _ in store.vector_search(query_vector(), limit=depth,
                                                         filters=filters)],
        "fulltext": [mid for mid, _ in store.fulltext_search(query, limit=depth,
                                                             filters=filters)],
    }
    return config.fusion(arms, config.rrf_k)[:limit]
