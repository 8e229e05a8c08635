"""One score scale for every recall strategy: relevance from 0 to 1, higher is better.

Each strategy ranks by its own measure (cosine, bm25 or ``ts_rank``, fused RRF ranks), and
those numbers do not compare. :func:`finish` gives every hit a relevance on one scale, the one
:attr:`htm_core.models.Hit.score` carries: its evidence, ``1 - (1 - c)(1 - 0.8 v)`` from its
cosine ``c`` and the share ``v`` of the query's words it holds (:data:`COVERAGE_WEIGHT`),
strictly decreasing down the strategy's ranking (:data:`TIE_STEP`). :data:`DEFAULT_MIN_SCORE`
is the cut-off the CLI, the MCP server and the agent tools apply. See docs/recall-quality.md
("Scores and min_score").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from .errors import ValidationError
from .querytime import query_timeframe
from .recall import RankedId, RetrievalConfig
from .recall.coverage import share, sharer, stem, stems_of
from .text import parse_query

__all__ = ["COVERAGE_WEIGHT", "DEFAULT_MIN_SCORE", "TIE_STEP", "check_min_score", "evidence_of",
           "finish", "relevance_floor"]

#: How much holding every word of the query counts in a hit's evidence, alone (0.8): full
#: coverage with no similarity scores 0.8, so only identical text reaches 1.
COVERAGE_WEIGHT = 0.8
#: A hit ranked above a better match scores this share of the way from that match's score
#: towards the nearer end of the scale (0 or 1) above it: the list reads best first and
#: two neighboring hits never show the same score.
TIE_STEP = 0.01
#: The ``min_score`` the CLI, the MCP server and the agent tools apply by default
#: (docs/recall-quality.md, "Scores and min_score", has the measurements behind it).
DEFAULT_MIN_SCORE = 0.2


class _Known(Protocol):
    """What :func:`finish` reads of a ranked memory (a Memory or a Brief)."""

    @property
    def content(self) -> str: ...
    @property
    def robot(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...


def check_min_score(min_score: Any) -> float | None:
    """``recall``'s ``min_score``: None, or a number from 0 to 1."""
    if min_score is None:
        return None
    if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) \
            or not math.isfinite(min_score) or not 0.0 <= min_score <= 1.0:
        raise ValidationError(
            f"min_score must be a number from 0 to 1 (a hit's relevance; try 0.3), "
            f"got {min_score!r}")
    return float(min_score)


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def _above(below: float) -> float:
    """The score of a hit ranked above one scoring ``below`` with no more evidence of its
    own: :data:`TIE_STEP` of the way from ``below`` to the nearer end of the scale."""
    return below + TIE_STEP * min(below, 1.0 - below)


def relevance_floor(ranked: Sequence[RankedId],
                    relevance: Mapping[int, float] | None = None) -> list[RankedId]:
    """Make relevance strictly decrease down the list: each hit scores its own
    (``relevance``: each id's, default ``r.relevance``) or, when that is not above the
    score of the hit after it, a hair above that score (module doc)."""
    out: list[RankedId] = []
    below: float | None = None
    for r in reversed(ranked):
        own = r.relevance if relevance is None else relevance[r.id]
        best = own if below is None or own > below else _above(below)
        out.append(RankedId(r.id, r.score, r.ranks, r.similarity, best))
        below = best
    return out[::-1]


def _combined(cosine: float, cover: float) -> float:
    """Evidence from a cosine similarity and a coverage (module doc)."""
    return _clamp(1.0 - (1.0 - _clamp(cosine)) * (1.0 - COVERAGE_WEIGHT * _clamp(cover)))


def _query_terms(query: str) -> tuple[list[str], list[str]]:
    """The query's word stems and its CJK runs, as coverage counts them."""
    parsed = parse_query(query)
    return [stem(w) for w in parsed.coverage_words()], list(parsed.runs)


def _evidence(query: str, ranked: Sequence[RankedId], known: Mapping[int, _Known],
              strategy: str) -> dict[int, float]:
    stems, runs = _query_terms(query)
    held = {r.id: stems_of(known[r.id].content) for r in ranked if r.id in known}
    if len(held) >= 5 and len(stems) >= 2:
        # A word found in nearly every hit (a speaker's name in a chat log) tells them
        # apart no more than it tells them from the rest of the store: it does not count.
        common = {s for s in stems if sum(s in h for h in held.values()) >= 0.8 * len(held)}
        if len(common) < len(stems):
            stems = [s for s in stems if s not in common]
    out = {}
    cover_of = sharer(stems, runs)
    for r in ranked:
        memory = known.get(r.id)
        cover = 0.0 if memory is None else cover_of(memory.content)
        cosine = 0.0 if strategy == "fulltext" or r.similarity is None else r.similarity
        out[r.id] = _combined(cosine, cover)
    return out


def evidence_of(query: str, content: str, cosine: float | None) -> float:
    """One memory's evidence on the 0..1 scale, alone (no list to discount common words in):
    ``cosine`` (None: not compared by vector) combined with the share of the query's words
    ``content`` contains. Used for hits ranked outside a recall's list (history)."""
    stems, runs = _query_terms(query)
    return _combined(cosine or 0.0, share(stems, runs, content))


Reranker = Callable[[str, Sequence[RankedId], Mapping[int, _Known]], list[RankedId]]


def finish(query: str, ranked: Sequence[RankedId], known: Mapping[int, _Known], *,
           strategy: str, config: RetrievalConfig, limit: int,
           min_score: float | None = None, rerank: Reranker | None = None,
           now: datetime | None = None) -> list[RankedId]:
    """Give each of ``ranked`` its relevance (module doc), rerank when asked, drop the hits
    below ``min_score`` and keep ``limit``. ``known`` maps ids to the memories read
    (ids missing from it are dropped: forgotten since the search); ``now`` is the time the
    query's time phrase was read against (hybrid: that phrase is not one of its words)."""
    ranked = [r for r in ranked if r.id in known]
    text = query
    if strategy == "hybrid" and config.time_boost and now is not None:
        when = query_timeframe(query, now)
        if when is not None:
            text = query.replace(when.phrase, " ")
    evidence = _evidence(text, ranked, known, strategy)
    scored = relevance_floor(ranked, evidence)
    if rerank is not None:
        scored = rerank(query, scored, known)
    if min_score is not None:
        scored = [r for r in scored if r.relevance >= min_score]
    return scored[:limit]
