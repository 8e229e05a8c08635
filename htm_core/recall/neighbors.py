"""Neighbor credit: a memory stored next to a better-scoring one shares its relevance.

In a conversation the reply "Biscuit!" means nothing without the turn before it ("we
adopted a puppy"). Hybrid recall (:mod:`htm_core.recall.pipeline`) therefore lets each scored
memory lend to the memories up to ``neighbors`` ids away (same robot, created within
``gap`` seconds) that score less: ``weight ** distance`` × what lifts the lender above the
weakest candidate, never enough to pass the lender, and proportionally less to a memory
longer than ``words`` words (a long message stands on its own). A memory no arm found
enters the results only on such a loan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

from ..store.base import Brief
from .briefs import Briefs
from .ranked import RankedId

if TYPE_CHECKING:
    from .config import RetrievalConfig

__all__ = ["lend_to_neighbors", "neighbor_scores", "with_neighbors"]


def lend_to_neighbors(order: list[int], score: Mapping[int, float],
                       fetch: Callable[[Collection[int]], Mapping[int, Brief]], *, pool: int,
                       limit: int | None, neighbors: int, weight: float, gap: float,
                       words: int | None) -> tuple[list[int], dict[int, float]]:
    """The best ``limit`` ids (default: all) after the first ``pool`` of ``order`` (fused
    ids, best first, scored by ``score``) lent to their neighbors, and every id's new score.

    ``fetch`` reads the briefs of ids (forgotten ones and those failing the recall's
    filters are left out, so they neither lend nor borrow).
    """
    wanted = {mid + d for mid in order[:pool] for d in range(-neighbors, neighbors + 1)}
    known = fetch(wanted)
    memories = {i: known[i] for i in wanted if i in known}
    apart = timedelta(seconds=gap)
    # A memory neither arm returned scores at most what the last candidate scored.
    floor = min(score.values(), default=0.0)
    # Each scored memory lends to the memories around it that score less (only those can
    # gain): a memory's bonus is the best share a better neighbor lends it.
    bonus: dict[int, float] = {}
    short: dict[int, float] = {}  # worked out for the memories that have a better neighbor only
    offsets = [(d, weight ** abs(d)) for d in range(-neighbors, neighbors + 1) if d]
    for oid, other in memories.items():
        lender = score.get(oid)
        if lender is None:
            continue
        for d, share_of_distance in offsets:
            mid = oid - d  # ``other`` is the memory ``d`` away from ``mid``
            memory = memories.get(mid)
            if memory is None:
                continue
            own = score.get(mid, floor)
            if lender <= own or other.robot != memory.robot or \
                    abs(other.created_at - memory.created_at) > apart:
                continue
            share = short.get(mid)
            if share is None:
                share = short[mid] = 1.0 if words is None else \
                    min(1.0, words / max(1, len(memory.content.split())))
            # Lend a share of what lifts the neighbor above the weakest candidate,
            # never enough to pass the neighbor itself.
            lent = share_of_distance * (lender - floor) * share
            bonus[mid] = max(bonus.get(mid, 0.0), min(lent, (lender - own) * (1 - 1e-6)))
    out: dict[int, float] = {}
    for mid in memories:
        gain = bonus.get(mid, 0.0)
        if mid in score or gain > 0.0:  # a memory no arm found enters only on a real bonus
            out[mid] = score.get(mid, floor) + gain
    ordered = sorted(out, key=lambda m: (-out[m], m))
    # The candidates beyond the pool keep their score: only those reaching the best
    # ``limit`` so far can be among the best ``limit``.
    bar = out[ordered[limit - 1]] if limit is not None and len(ordered) >= limit else -math.inf
    more = [mid for mid in order[pool:] if score[mid] >= bar and mid not in out]
    if more:
        out.update((mid, score[mid]) for mid in more)
        ordered = sorted(out, key=lambda m: (-out[m], m))
    return ordered[:limit], out


def neighbor_scores(fused: list[RankedId], config: RetrievalConfig, pool: int,
                     briefs: Briefs, limit: int | None = None) -> list[RankedId]:
    """Add to each memory ``weight ** distance × (s - floor)`` from its best better
    neighbor scoring ``s`` (``floor``: the weakest candidate's score), capped below ``s``;
    the best ``limit`` (default: all)."""
    return with_neighbors([r.id for r in fused], {r.id: r.score for r in fused},
                           {r.id: r.ranks for r in fused}, config, pool, briefs, limit)


def with_neighbors(order: list[int], score: dict[int, float],
                    ranks: Mapping[int, Mapping[str, int]], config: RetrievalConfig, pool: int,
                    briefs: Briefs, limit: int | None,
                    similarity: Mapping[int, float] | None = None) -> list[RankedId]:
    """:func:`neighbor_scores` of the fused ids ``order`` (best first) with their scores
    and ranks (and ``similarity``, each id's, when given)."""
    ordered, out = lend_to_neighbors(order, score, briefs.fetch, pool=pool, limit=limit,
                                      neighbors=config.neighbors, weight=config.neighbor_weight,
                                      gap=config.neighbor_gap, words=config.neighbor_words)
    cosine = similarity or {}
    return [RankedId(m, out[m], ranks.get(m, {"neighbor": 1}), cosine.get(m)) for m in ordered]
