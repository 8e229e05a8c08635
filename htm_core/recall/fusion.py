"""Fusion of the arms' ranked lists: Reciprocal Rank Fusion, and the weighted RRF where a
full-text hit counts by its coverage of the query's words (the default fusion of hybrid
recall, :func:`coverage_scores`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from ..text import parse_query
from .briefs import Briefs
from .coverage import sharer, stem
from .ranked import RankedId

if TYPE_CHECKING:
    from .config import RetrievalConfig

__all__ = ["FusionFn", "coverage_rrf", "coverage_scores", "full_text_shares", "may_reach_top",
           "reciprocal_rank_fusion"]

FusionFn = Callable[[Mapping[str, Sequence[int]], int], list[RankedId]]


def reciprocal_rank_fusion(arms: Mapping[str, Sequence[int]], k: int = 60,
                           weights: Mapping[str, float] | None = None) -> list[RankedId]:
    """Fuse ranked id lists: score = Σ over arms of weight / (k + rank), rank from 1.

    ``weights`` maps an arm name to its weight (default 1.0 for every arm). Ties are
    broken by the best single rank, then by id, so the order is deterministic.

    >>> [r.id for r in reciprocal_rank_fusion({"a": [1, 2, 3], "b": [3, 1]})]
    [1, 3, 2]
    """
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for arm, ids in arms.items():
        weight = 1.0 if weights is None else weights.get(arm, 1.0)
        for rank, mid in enumerate(ids, start=1):
            scores[mid] = scores.get(mid, 0.0) + weight / (k + rank)
            ranks.setdefault(mid, {})[arm] = rank
    ordered = sorted(scores, key=lambda m: (-scores[m], min(ranks[m].values()), m))
    return [RankedId(m, scores[m], ranks[m]) for m in ordered]


def may_reach_top(arms: Mapping[str, Sequence[int]], config: RetrievalConfig,
                   pool: int) -> list[int]:
    """The ids that can be among the top ``pool`` of :func:`coverage_rrf`, whatever the
    coverage of the full-text hits turns out to be (a share is between 0 and 1).

    The ``pool`` best scores, counting no full-text term, are each a floor of a fused
    score, so the ``pool``-th of them is a floor of the ``pool``-th fused score: an id
    whose score counting every full-text term in full stays below it cannot get in.
    """
    if not config.neighbors:
        return []
    low: dict[int, float] = {}
    high: dict[int, float] = {}
    for arm, got in arms.items():
        weight = config.weights.get(arm, 1.0)
        text_arm = arm.startswith("fulltext")
        for rank, mid in enumerate(got, start=1):
            term = weight / (config.rrf_k + rank)
            high[mid] = high.get(mid, 0.0) + term
            low[mid] = low.get(mid, 0.0) + (0.0 if text_arm else term)
    floors = sorted(low.values(), reverse=True)
    bar = floors[pool - 1] if len(floors) >= pool else 0.0
    return [mid for mid, best in high.items() if best >= bar]


def coverage_rrf(arms: Mapping[str, Sequence[int]], text: str, config: RetrievalConfig,
                  briefs: Briefs) -> list[RankedId]:
    """Weighted RRF where a full-text hit counts in proportion to the query words it has."""
    ordered, scores, ranks = coverage_scores(arms, text, config, briefs)
    return [RankedId(m, scores[m], ranks[m]) for m in ordered]


def full_text_shares(ids: Collection[int], text: str, briefs: Briefs) -> dict[int, float]:
    """Each of the full-text hits ``ids``'s share of the query ``text``'s words (0 for one
    no longer readable), worked out once per hit."""
    parsed = parse_query(text)
    of = sharer([stem(w) for w in parsed.coverage_words()], parsed.runs)
    known = briefs.fetch(ids)
    return {mid: of(known[mid].content) if mid in known else 0.0 for mid in ids}


def coverage_scores(arms: Mapping[str, Sequence[int]], text: str, config: RetrievalConfig,
                     briefs: Briefs
                     ) -> tuple[list[int], dict[int, float], dict[int, dict[str, int]]]:
    """:func:`coverage_rrf` as the ids (best first), their scores and their ranks."""
    shares = full_text_shares(
        {mid for arm, got in arms.items() if arm.startswith("fulltext") for mid in got},
        text, briefs)
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for arm, got in arms.items():
        weight = config.weights.get(arm, 1.0)
        if arm.startswith("fulltext"):
            held = [shares[mid] for mid in got]
            if config.adaptive and held:
                # An arm whose best hit holds a fraction of the query's words is that weak.
                weight *= max(held)
        else:
            held = [1.0] * len(got)
        for rank, (mid, share) in enumerate(zip(got, held, strict=True), start=1):
            scores[mid] = scores.get(mid, 0.0) + weight * share / (config.rrf_k + rank)
            ranks.setdefault(mid, {})[arm] = rank
    ordered = sorted(scores, key=lambda m: (-scores[m], min(ranks[m].values()), m))
    return ordered, scores, ranks
