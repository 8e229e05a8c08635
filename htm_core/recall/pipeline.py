"""Recall, read top to bottom: :func:`search` runs the arms, fuses them, then the post-ranking
steps, each a named step below in the order it runs (the modules beside this one do each
step's work).

``strategy`` is ``"vector"`` (cosine similarity of the query embedding), ``"fulltext"``
(bm25 on SQLite, ``ts_rank`` on PostgreSQL, by the rules of :mod:`htm_core.text`) or
``"hybrid"`` (default): weighted RRF of the arms, with centering, time arms, near-duplicates
and neighbor context. Filters run inside each arm, in the database. How hybrid ranks:
docs/concepts.md ("How hybrid recall ranks"); the measurements: docs/recall-quality.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from ..store.base import ArmQuery, Search, SearchFilters
from ..text import parse_query
from .arms import hybrid_arms, similarities, without_idle_time_arms
from .briefs import Briefs
from .config import RetrievalConfig, check_recall_strategy
from .coverage import stems_of
from .duplicates import demote_duplicates
from .fusion import coverage_scores, may_reach_top, reciprocal_rank_fusion
from .neighbors import neighbor_scores, with_neighbors
from .ranked import RankedId

__all__ = ["run_arms", "search"]

#: Each arm's ranked (id, score) hits, by arm name.
Found = dict[str, list[tuple[int, float]]]


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
        return vector_arm_alone(store, query_vector, limit, filters, config)
    if strategy == "fulltext":
        return fulltext_arm_alone(store, query, limit, filters)
    if not parse_query(query):
        return no_terms(store, query_vector, limit, filters, config)
    asked, found = run_arms(store, query, query_vector, limit=limit, filters=filters,
                            config=config, now=now)
    arms = {name: [mid for mid, _ in hits] for name, hits in found.items()}
    similarity = similarities(found.get("vector", ()), found.get("vector@time", ()))
    briefs = Briefs(store, filters)
    pool = max(limit * 2, 20)
    if config.fusion is reciprocal_rank_fusion and config.coverage:
        return fuse_by_coverage(arms, asked["fulltext"].text or query, config, briefs,
                                pool=pool, limit=limit, similarity=similarity)
    return fuse_by_function(arms, config, briefs, pool=pool, limit=limit,
                            similarity=similarity)


# -- one arm alone ---------------------------------------------------------------------


def vector_arm_alone(store: Search, query_vector: Callable[[], Sequence[float]], limit: int,
                     filters: SearchFilters, config: RetrievalConfig) -> list[RankedId]:
    """``strategy="vector"``: plain cosine similarity, never centered."""
    return [RankedId(mid, score, {"vector": i}, similarity=score)
            for i, (mid, score) in enumerate(
                vector_hits(store, query_vector(), limit, filters, config), start=1)]


def fulltext_arm_alone(store: Search, query: str, limit: int,
                       filters: SearchFilters) -> list[RankedId]:
    """``strategy="fulltext"``: the store's full-text ranking."""
    return [RankedId(mid, score, {"fulltext": i})
            for i, (mid, score) in enumerate(
                one_arm(store, ArmQuery(text=query, limit=limit, filters=filters)),
                start=1)]


def no_terms(store: Search, query_vector: Callable[[], Sequence[float]], limit: int,
             filters: SearchFilters, config: RetrievalConfig) -> list[RankedId]:
    """A hybrid query with no searchable words: the vector arm alone (not centered), only
    the memories at least ``config.no_terms_floor`` similar to it."""
    return [RankedId(mid, score, {"vector": i}, similarity=score) for i, (mid, score) in enumerate(
        vector_hits(store, query_vector(), limit, filters, config), start=1)
        if score >= config.no_terms_floor]


def one_arm(store: Search, arm: ArmQuery) -> list[tuple[int, float]]:
    """What the store finds for one arm alone."""
    [hits] = store.search_arms([arm])
    return hits


def vector_hits(store: Search, vector: Sequence[float], limit: int, filters: SearchFilters,
                config: RetrievalConfig) -> list[tuple[int, float]]:
    """The plain vector arm (windows counted when the config makes them)."""
    return one_arm(store, ArmQuery(vector=vector, limit=limit, filters=filters,
                                   windows=config.window_words is not None))


# -- the arms --------------------------------------------------------------------------


def run_arms(store: Search, query: str, query_vector: Callable[[], Sequence[float]], *,
             limit: int, filters: SearchFilters, config: RetrievalConfig,
             now: datetime | None = None) -> tuple[dict[str, ArmQuery], Found]:
    """Ask the store for every arm of a hybrid recall in one call (:func:`.arms.hybrid_arms`:
    the (centered) query vector, the query's text less its time phrase, and the same inside
    the window the query names), and drop the time arms that tell the candidates nothing
    apart; return what was asked and what each arm found, by arm name."""
    asked, _when = hybrid_arms(store, query, query_vector, limit=limit, filters=filters,
                               config=config, now=now)
    found = without_idle_time_arms(
        dict(zip(asked, store.search_arms(list(asked.values())), strict=True)))
    return asked, found


# -- fusion, then the post-ranking steps -----------------------------------------------


def fuse_by_coverage(arms: Mapping[str, Sequence[int]], text: str, config: RetrievalConfig,
                     briefs: Briefs, *, pool: int, limit: int,
                     similarity: Mapping[int, float]) -> list[RankedId]:
    """The default hybrid ranking: read the briefs every step needs, fuse by weighted RRF
    with each full-text hit counted by its coverage of ``text`` (:mod:`.fusion`), demote
    near-duplicates (:mod:`.duplicates`), lend to neighbors (:mod:`.neighbors`), keep
    the best ``limit``."""
    read_briefs(arms, config, briefs, pool)
    order, scores, ranks = coverage_scores(arms, text, config, briefs)
    if config.duplicates is not None:
        order, scores = demote_duplicates(order, scores, briefs.fetch(order[:pool]),
                                          stems_of, pool=pool, threshold=config.duplicates)
    # Only the best ``limit`` become RankedIds: the results, made once with their
    # similarity.
    if config.neighbors:
        return with_neighbors(order, scores, ranks, config, pool, briefs, limit, similarity)
    return [RankedId(m, scores[m], ranks[m], similarity.get(m)) for m in order[:limit]]


def read_briefs(arms: Mapping[str, Sequence[int]], config: RetrievalConfig, briefs: Briefs,
                pool: int) -> None:
    """One read for the steps after it: the full-text hits (coverage) and the neighbors of
    every memory that can still reach the fused top ``pool``, whatever its coverage."""
    briefs.fetch([mid for arm, got in arms.items() if arm.startswith("fulltext")
                  for mid in got] +
                 [mid + d for mid in may_reach_top(arms, config, pool)
                  for d in range(-config.neighbors, config.neighbors + 1)])


def fuse_by_function(arms: Mapping[str, Sequence[int]], config: RetrievalConfig,
                     briefs: Briefs, *, pool: int, limit: int,
                     similarity: Mapping[int, float]) -> list[RankedId]:
    """Hybrid ranking without coverage: the built-in RRF with the configured weights, or
    the configured fusion function; then the neighbors; the best ``limit``."""
    if config.fusion is reciprocal_rank_fusion:
        fused = reciprocal_rank_fusion(arms, config.rrf_k, config.weights)
    else:
        fused = config.fusion(arms, config.rrf_k)
    if config.neighbors:
        fused = neighbor_scores(fused, config, pool, briefs, limit)
    return [RankedId(r.id, r.score, r.ranks, similarity.get(r.id), r.relevance)
            for r in fused[:limit]]
