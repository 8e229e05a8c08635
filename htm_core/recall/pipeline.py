"""Hybrid retrieval: a vector arm and a full-text arm, fused by Reciprocal Rank Fusion.

``strategy`` is one of:

- ``"vector"``: cosine similarity of the query embedding (score = cosine)
- ``"fulltext"``: the store's full-text ranking (bm25 on SQLite, ``ts_rank`` on
  PostgreSQL; score = that relevance), by the rules of :mod:`htm_core.store._text`; a
  query with no searchable terms finds nothing (in hybrid recall it returns only what
  is at least ``no_terms_floor`` similar to it)
- ``"hybrid"`` (default): the top ``candidates × limit`` of each arm fused by weighted
  RRF, score = Σ weight / (k + rank) with k = 60 and ranks starting at 1, where a
  full-text hit's term is scaled by its **coverage**, the share of the query's words it
  contains (a hit on one incidental word of six counts a sixth), and each full-text arm
  weighs the coverage of its **best** hit (``adaptive``): an arm that found nothing better
  than one incidental word of three says little, whatever its ranks, and weighs a third,
  while the vector arm's ranks keep their weight; then:

  - **centring**: before the vector arm runs, the query loses its component along the
    store's mean direction (:meth:`~htm_core.store.base.LongTermStore.vector_centroid`),
    what every memory has in common: in a chat log, the speaker's name and the shape of
    small talk. Short generic turns ("Kenji: Haha, classic.") no longer outrank the turn
    that answers a question about Kenji. The ranking is the same as scoring each memory
    by ``cos(q, d) - (q·μ)(d·μ)``: the more generic the query, the more a memory is marked
    down for looking like the average memory; the **typicality penalty** then takes
    ``typical_penalty × μ`` off the centred query as well, so each memory's similarity drops
    by that share of its similarity to the average memory, whatever the query. Windows
    (of long memories) are searched with the same query (``window_centring``: centred on
    their own mean direction instead);
  - **near-duplicates** (the same word stems) among the first fused candidates keep one
    place, held by the newest of them; the other copies follow every other candidate;
  - **time expressions** in the query ("last May", "in June 2023", "last month",
    "two weeks ago", "last summer") are resolved against the clock; both arms run
    again inside that window and join the fusion as two more arms, so memories from
    that time rise without the others being filtered out (the phrase itself is left
    out of the full-text query, where "May" would only add noise); a third time arm,
    ``atypical@time``, ranks the window's memories by how unlike the average memory they
    are (a vector search for the opposite of the store's mean direction), so in "What did
    Ana do last May?" the events of May come before its small talk;
  - **neighbour context**: a memory next to a better-scoring one (adjacent ids, same
    robot, created within ``neighbor_gap`` seconds) gains ``neighbor_weight ** distance``
    × that neighbour's score, so the reply "Biscuit!" is found through "we adopted a
    puppy" just before it; neighbours outside the candidates are fetched, so a hit can
    bring in the turn that answers it. Only better neighbours lend score, so the best of
    a run of similar memories is not lifted by the others, and a memory longer than
    ``neighbor_words`` words borrows proportionally less (a long message stands alone);

Timeframe, robot and tag filters are handed to each arm, which applies them in the database,
so a filter never starves the result (neighbours are checked against the same filters). The
fusion function is replaceable through :class:`RetrievalConfig`; ``RetrievalConfig.plain()``
is plain RRF of the two arms. The measurements behind the defaults: ``docs/recall-quality.md``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

import numpy as np

from ._coverage import _sharer, _stem, _stems_of, coverage
from ._duplicates import demote_duplicates
from ._neighbours import lend_to_neighbours
from ._windows import DEFAULT_WINDOW_WORDS
from .clock import local_now
from .errors import UnknownStrategyError, ValidationError
from .querytime import QueryTime, query_timeframe, without_idle_time_arms
from .store._text import parse_query
from .store.base import ArmQuery, Brief, Search, SearchFilters

__all__ = [
    "STRATEGIES",
    "QueryTime",
    "RankedId",
    "RetrievalConfig",
    "centred_query",
    "check_recall_strategy",
    "coverage",
    "hybrid_arms",
    "query_timeframe",
    "reciprocal_rank_fusion",
    "search",
]

STRATEGIES = ("hybrid", "vector", "fulltext")


_NO_RANKS: Mapping[str, int] = MappingProxyType({})  # RankedId: none given, a new {} each


@dataclass(frozen=True)
class RankedId:
    """One result of a search: memory id, score (higher is better), rank in each arm.

    ``score`` orders the results of one search (for hybrid, the fused RRF score);
    ``similarity`` is the memory's cosine similarity to the (centred, for hybrid) query when
    a vector arm found it; ``relevance`` is the score on htm's one 0..1 scale, set by
    :func:`htm_core.scoring.finish` (what :attr:`htm_core.models.Hit.score` carries).
    """

    id: int
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)
    similarity: float | None = None
    relevance: float = 0.0

    def __init__(self, id: int, score: float, ranks: Mapping[str, int] = _NO_RANKS,
                 similarity: float | None = None, relevance: float = 0.0) -> None:
        # Not the generated one (object.__setattr__ per field): twice as fast, a few dozen a recall.
        self.__dict__.update(id=id, score=score, ranks={} if ranks is _NO_RANKS else ranks,
                             similarity=similarity, relevance=relevance)


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


@dataclass(frozen=True, kw_only=True)
class RetrievalConfig:
    """How hybrid recall fuses its arms (the defaults are the best measured setting).

    Attributes:
        rrf_k: the RRF constant (60, as in the original paper).
        candidates: each arm contributes its top ``candidates × limit`` (at least 50).
        fusion: ``fusion(arms, k) -> list[RankedId]``; replace to try another fusion
            (``weights`` apply to the built-in RRF only).
        weights: per-arm RRF weights: ``vector``, ``fulltext``, and the time-window arms
            ``vector@time``, ``fulltext@time`` and ``atypical@time`` (0 switches it off).
        time_boost: resolve time expressions in the query and add the time-window arms.
        neighbors: how many adjacent memories on each side lend a hit their score (0: off).
        neighbor_weight: the share of a better neighbour's score a memory gains (raised to
            the power of the distance).
        neighbor_gap: seconds; memories further apart in time are not neighbours.
        neighbor_words: a memory longer than this many words borrows proportionally less
            (``neighbor_words / words``): a short reply needs the turn before it to mean
            anything, a long message stands on its own. ``None``: every memory borrows alike.
        coverage: a full-text hit counts in proportion to the share of the query's words
            it contains, so a hit on one incidental word weighs little.
        adaptive: scale each full-text arm (``fulltext``, ``fulltext@time``) by the
            coverage of its best hit, so an arm that only matched an incidental word of the
            query weighs little (on by default since issue 24's fusion round: it helped both
            development sets; ``False``: the configured weights as they are).
        centering: remove the store's mean direction from the query before the vector arm
            (and the time-window vector arm) runs; ``strategy="vector"`` is never centred,
            its scores stay plain cosine similarities.
        window_centring: with centring, windows get the query centred on their own mean
            direction (boilerplate is typical of windows) instead of the memories' (off
            by default: measured on real conversations it cost recall; see
            docs/recall-quality.md).
        no_terms_floor: a query with no searchable words (stop words, emoji or
            punctuation only) returns only the memories whose cosine similarity to it is at
            least this (the vector arm alone, not centred), so it never fills working
            memory with arbitrary memories.
        typical_penalty: with centring, the centred query also loses this share of the
            store's mean direction, so each memory's similarity drops by ``typical_penalty
            × its similarity to the average memory``: small talk and boilerplate that look
            like everything else give way to memories that say something (0: off).
        duplicates: memories among the first fused candidates whose word stems are at
            least this similar (Jaccard; 1.0, the default: the same stems) are one group:
            its newest member takes the group's best place, the others follow every other
            candidate (``None``: off; see :mod:`htm_core._duplicates`).
        window_words: long memories embedded in windows (``htm_core._windows``): a memory
            with at least this many spaces also gets one vector per window of whole
            sentences up to this many words, and the vector arms score each memory by the
            better of its whole vector and its best window. ``None``: no windows are made
            (by the ``HTM`` holding this config) nor searched.

    >>> RetrievalConfig.plain().neighbors
    0
    """

    rrf_k: int = 60
    candidates: int = 5
    fusion: FusionFn = reciprocal_rank_fusion
    weights: Mapping[str, float] = field(default_factory=lambda: {
        "vector": 1.0, "fulltext": 1.0, "vector@time": 6.0, "fulltext@time": 6.0,
        "atypical@time": 6.0})
    time_boost: bool = True
    neighbors: int = 1
    neighbor_weight: float = 0.3
    neighbor_gap: float = 3600.0
    neighbor_words: int | None = 60
    adaptive: bool = True
    coverage: bool = True
    centering: bool = True
    window_centring: bool = False
    no_terms_floor: float = 0.5
    duplicates: float | None = 1.0
    typical_penalty: float = 0.2
    window_words: int | None = DEFAULT_WINDOW_WORDS

    def __post_init__(self) -> None:
        if self.rrf_k < 1 or self.candidates < 1:
            raise ValidationError("RetrievalConfig: rrf_k and candidates must be at least 1")
        if self.neighbors < 0 or not 0.0 <= self.neighbor_weight <= 1.0 or self.neighbor_gap < 0:
            raise ValidationError(
                "RetrievalConfig: neighbors must be >= 0, neighbor_weight in [0, 1] and "
                "neighbor_gap >= 0 seconds")
        if self.window_words is not None and (
                isinstance(self.window_words, bool) or not isinstance(self.window_words, int)
                or self.window_words < 2):
            raise ValidationError("RetrievalConfig: window_words must be None or an integer "
                                  "of at least 2 (words per window)")
        if self.neighbor_words is not None and self.neighbor_words < 1:
            raise ValidationError("RetrievalConfig: neighbor_words must be None or at least 1")
        if any(not math.isfinite(w) or w < 0 for w in self.weights.values()):
            raise ValidationError("RetrievalConfig: weights must be finite and >= 0")
        if not 0.0 <= self.typical_penalty <= 1.0 or (
                self.duplicates is not None and not 0.0 < self.duplicates <= 1.0):
            raise ValidationError("RetrievalConfig: typical_penalty must be in [0, 1] and "
                                  "duplicates None or a similarity in (0, 1]")
        if not -1.0 <= self.no_terms_floor <= 1.0:
            raise ValidationError("RetrievalConfig: no_terms_floor must be a cosine "
                                  "similarity, in [-1, 1]")

    @classmethod
    def plain(cls) -> RetrievalConfig:
        """Plain RRF of the two arms (top 2 × limit each, equal weights), no time boost, no
        neighbours, no centring: htm's hybrid before issue 10."""
        return cls(candidates=2, time_boost=False, neighbors=0, coverage=False, centering=False,
                   weights={"vector": 1.0, "fulltext": 1.0}, duplicates=None, typical_penalty=0.0,
                   adaptive=False)

    def with_options(self, **changes: Any) -> RetrievalConfig:
        """A copy with some fields changed (validated like a new config)."""
        return replace(self, **changes)


def check_recall_strategy(strategy: str) -> str:
    """Return ``strategy`` if it is a recall strategy, else raise ``UnknownStrategyError``."""
    if strategy not in STRATEGIES:
        raise UnknownStrategyError(
            f"unknown recall strategy {strategy!r}; use one of {', '.join(STRATEGIES)}"
        )
    return strategy


# -- time expressions in queries (parsed in querytime.py) -------------------------------


def _intersect(filters: SearchFilters, window: QueryTime) -> SearchFilters | None:
    start = window.start if filters.start is None else max(filters.start, window.start)
    end = window.end if filters.end is None else min(filters.end, window.end)
    if start >= end:
        return None
    return replace(filters, start=start, end=end)


# -- neighbour context -----------------------------------------------------------------


class _Briefs:
    """The briefs one recall reads, each id asked for at most once (the first ask batches
    what every step will need, so a recall usually reads them in one query)."""

    def __init__(self, store: Search, filters: SearchFilters) -> None:
        self._store, self._filters = store, filters
        self._asked: set[int] = set()
        self.found: dict[int, Brief] = {}

    def fetch(self, ids: Collection[int]) -> dict[int, Brief]:
        if self._asked.issuperset(ids):  # the usual case after the first ask
            return self.found
        todo = sorted({i for i in ids if i > 0} - self._asked)
        if todo:
            self._asked.update(todo)
            # Forgotten memories and those failing the recall's filters are not returned.
            self.found.update(self._store.briefs(todo, self._filters))
        return self.found


def _neighbour_scores(fused: list[RankedId], config: RetrievalConfig, pool: int,
                      briefs: _Briefs, limit: int | None = None) -> list[RankedId]:
    """Add to each memory ``weight ** distance × (s - floor)`` from its best better
    neighbour scoring ``s`` (``floor``: the weakest candidate's score), capped below ``s``;
    the best ``limit`` (default: all)."""
    return _neighbours([r.id for r in fused], {r.id: r.score for r in fused},
                       {r.id: r.ranks for r in fused}, config, pool, briefs, limit)


def _neighbours(order: list[int], score: dict[int, float], ranks: Mapping[int, Mapping[str, int]],
                config: RetrievalConfig, pool: int, briefs: _Briefs,
                limit: int | None, similarity: Mapping[int, float] | None = None
                ) -> list[RankedId]:
    """:func:`_neighbour_scores` of the fused ids ``order`` (best first) with their scores
    and ranks (and ``similarity``, each id's, when given)."""
    ordered, out = lend_to_neighbours(order, score, briefs.fetch, pool=pool, limit=limit,
                                      neighbors=config.neighbors, weight=config.neighbor_weight,
                                      gap=config.neighbor_gap, words=config.neighbor_words)
    cosine = similarity or {}
    return [RankedId(m, out[m], ranks.get(m, {"neighbor": 1}), cosine.get(m)) for m in ordered]


def _may_reach_top(arms: Mapping[str, Sequence[int]], config: RetrievalConfig,
                   pool: int) -> list[int]:
    """The ids that can be among the top ``pool`` of :func:`_coverage_rrf`, whatever the
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


def _coverage_rrf(arms: Mapping[str, Sequence[int]], text: str, config: RetrievalConfig,
                  briefs: _Briefs) -> list[RankedId]:
    """Weighted RRF where a full-text hit counts in proportion to the query words it has."""
    ordered, scores, ranks = _coverage_scores(arms, text, config, briefs)
    return [RankedId(m, scores[m], ranks[m]) for m in ordered]


def _coverage_scores(arms: Mapping[str, Sequence[int]], text: str, config: RetrievalConfig,
                     briefs: _Briefs
                     ) -> tuple[list[int], dict[int, float], dict[int, dict[str, int]]]:
    """:func:`_coverage_rrf` as the ids (best first), their scores and their ranks."""
    parsed = parse_query(text)
    stems = [_stem(w) for w in parsed.coverage_words()]
    ids = {mid for arm, got in arms.items() if arm.startswith("fulltext") for mid in got}
    known = briefs.fetch(ids)
    of = _sharer(stems, parsed.runs)
    shares = {mid: of(known[mid].content) if mid in known else 0.0  # each hit's, once
              for mid in ids}
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


def centred_query(vector: Sequence[float], centroid: Sequence[float] | None,
                  penalty: float = 0.0) -> list[float]:
    """``vector`` without its component along ``centroid`` (unit length), renormalised;
    with a ``penalty``, less ``penalty × centroid`` as well (renormalised), so a memory's
    similarity drops by ``penalty × (its similarity to the centroid)``: see
    :data:`RetrievalConfig.typical_penalty`."""
    out = _centred(np.asarray(vector, dtype=np.float64), centroid, penalty)
    return out.tolist() if out is not None else list(vector)


def _centred(q: np.ndarray, centroid: Sequence[float] | np.ndarray | None,
             penalty: float = 0.0) -> np.ndarray | None:
    """:func:`centred_query` of a float64 vector, as an array (None: left as it is)."""
    if centroid is None:
        return None
    # sqrt(q·q) is what np.linalg.norm works out for a flat float64 vector (the same
    # float), without its dispatch.
    norm = math.sqrt(q.dot(q))
    if norm == 0.0:
        return None
    q = q / norm
    mu = np.asarray(centroid, dtype=np.float64)
    if mu.shape != q.shape:
        return None
    q -= float(q @ mu) * mu
    rest = math.sqrt(q.dot(q))
    if rest <= 1e-6:
        return None
    q /= rest
    if penalty:  # q ⟂ μ: the norm of q - penalty·μ is sqrt(1 + penalty²)
        q = (q - penalty * mu) / math.sqrt(1.0 + penalty * penalty)
    return q


# -- search ----------------------------------------------------------------------------


def hybrid_arms(store: Search, query: str, query_vector: Callable[[], Sequence[float]], *,
                limit: int, filters: SearchFilters, config: RetrievalConfig,
                now: datetime | None = None) -> tuple[dict[str, ArmQuery], QueryTime | None]:
    """The arms a hybrid recall asks the store for, by name, and the time the query names.

    Both arms run ``config.candidates`` deep with the (centred) query vector and the query's
    text less its time phrase; a time phrase adds the same two arms inside its window (and
    the window's least typical memories when weighted). :func:`search` fuses their answers;
    :func:`htm_core.explain.explain_recall` shows them.
    """
    depth = max(limit * config.candidates, 50 if config.candidates > 2 else 0)
    # An array, never a list of floats: the stores take arrays, and a list of numpy
    # scalars costs tens of microseconds to convert.
    given = np.asarray(query_vector(), dtype=np.float64)
    centroid = store.vector_centroid() if config.centering else None
    centred = _centred(given, centroid, config.typical_penalty) if config.centering else None
    vector: Sequence[float] = given if centred is None else centred  # type: ignore[assignment]
    when = query_timeframe(query, now or local_now()) if config.time_boost else None
    text = query.replace(when.phrase, " ") if when is not None else query
    window = _intersect(filters, when) if when is not None else None
    windows = config.window_words is not None
    recentre = (functools.partial(_centred, given, penalty=config.typical_penalty)
                if centred is not None and config.window_centring else None)
    asked = {"vector": ArmQuery(vector=vector, limit=depth, filters=filters, windows=windows,
                                recentre=recentre),
             "fulltext": ArmQuery(text=text, limit=depth, filters=filters)}
    if window is not None:
        asked["vector@time"] = ArmQuery(vector=vector, limit=depth, filters=window,
                                        windows=windows, recentre=recentre)
        asked["fulltext@time"] = ArmQuery(text=text, limit=depth, filters=window)
        if centroid is not None and config.weights.get("atypical@time", 0.0) > 0:
            # The window's memories least like the average memory: events, not small talk.
            asked["atypical@time"] = ArmQuery(vector=[-x for x in centroid], limit=depth,
                                              filters=window, windows=False)
    return asked, when


def _similarities(*arms: Sequence[tuple[int, float]]) -> dict[int, float]:
    """Each memory's best cosine over the vector ``arms`` (at least -1)."""
    out = dict(arms[0])
    if len(out) == len(arms[0]) and (not out or min(out.values()) >= -1.0):
        arms = arms[1:]  # what the loop below makes of the first arm
    else:
        out = {}  # an arm listing a memory twice, or a cosine a rounding put below -1
    for hits in arms:
        for mid, score in hits:
            out[mid] = max(score, out.get(mid, -1.0))
    return out


def search(
    store: Search,
    *,
    query: str,
    query_vector: Callable[[], Sequence[float]],
    strategy: str,
    limit: int,
    filters: SearchFilters,
    config: RetrievalConfig | None = None,
    now: datetime | None = None,
) -> list[RankedId]:
    """Run ``strategy`` against ``store`` and return up to ``limit`` ranked ids.

    ``query_vector`` is called only when the vector arm runs (so a full-text recall
    never pays for an embedding). ``now`` anchors relative time expressions in the
    query (default: the current time). A query with no searchable terms (stop words,
    emoji, punctuation) finds nothing in full text; in hybrid recall it returns the
    memories at least ``config.no_terms_floor`` similar to it, or nothing.
    """
    check_recall_strategy(strategy)
    config = config or RetrievalConfig()
    if strategy == "vector":
        return [RankedId(mid, score, {"vector": i}, similarity=score)
                for i, (mid, score) in enumerate(
                    store.vector_search(query_vector(), limit=limit, filters=filters,
                                        windows=config.window_words is not None), start=1)]
    if strategy == "fulltext":
        return [RankedId(mid, score, {"fulltext": i})
                for i, (mid, score) in enumerate(
                    store.fulltext_search(query, limit=limit, filters=filters), start=1)]
    if not parse_query(query):
        return [RankedId(mid, score, {"vector": i}, similarity=score) for i, (mid, score) in enumerate(
            store.vector_search(query_vector(), limit=limit, filters=filters,
                                windows=config.window_words is not None), start=1)
            if score >= config.no_terms_floor]
    asked, _when = hybrid_arms(store, query, query_vector, limit=limit, filters=filters,
                               config=config, now=now)
    found = without_idle_time_arms(
        dict(zip(asked, store.search_arms(list(asked.values())), strict=True)))
    arms = {name: [mid for mid, _ in hits] for name, hits in found.items()}
    similarity = _similarities(found.get("vector", ()), found.get("vector@time", ()))
    briefs = _Briefs(store, filters)
    weigh_coverage = config.fusion is reciprocal_rank_fusion and config.coverage
    pool = max(limit * 2, 20)
    if weigh_coverage:
        # One read for both steps: the full-text hits (coverage) and the neighbours of
        # every memory that can still reach the fused top ``pool``, whatever its coverage.
        briefs.fetch([mid for arm, got in arms.items() if arm.startswith("fulltext")
                      for mid in got] +
                     [mid + d for mid in _may_reach_top(arms, config, pool)
                      for d in range(-config.neighbors, config.neighbors + 1)])
        text = asked["fulltext"].text or query
        order, scores, ranks = _coverage_scores(arms, text, config, briefs)
        if config.duplicates is not None:
            order, scores = demote_duplicates(order, scores, briefs.fetch(order[:pool]),
                                              _stems_of, pool=pool, threshold=config.duplicates)
        # Only the best ``limit`` become RankedIds: the results, made once with their
        # similarity.
        if config.neighbors:
            return _neighbours(order, scores, ranks, config, pool, briefs, limit, similarity)
        return [RankedId(m, scores[m], ranks[m], similarity.get(m)) for m in order[:limit]]
    if config.fusion is reciprocal_rank_fusion:
        fused = reciprocal_rank_fusion(arms, config.rrf_k, config.weights)
    else:
        fused = config.fusion(arms, config.rrf_k)
    if config.neighbors:
        fused = _neighbour_scores(fused, config, pool, briefs, limit)
    return [RankedId(r.id, r.score, r.ranks, similarity.get(r.id), r.relevance)
            for r in fused[:limit]]
