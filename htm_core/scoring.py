"""One score scale for every recall strategy: relevance from 0 to 1, higher is better.

Each strategy ranks by its own measure (cosine similarity, bm25 or ``ts_rank``, fused
RRF ranks), and those numbers do not compare: an RRF score of 0.03 says nothing about
whether the memory answers the question. :func:`finish` gives every hit a **relevance**
on one scale, the one :attr:`htm_core.models.Hit.score` carries:

- the memory's **evidence** is the larger of its cosine similarity to the query
  (``vector``: plain cosine; ``hybrid``: the cosine to the centred query, what the memory
  shares with the query beyond what every memory shares, less the typicality penalty of
  :class:`~htm_core.retrieval.RetrievalConfig`), clamped to [0, 1], and its
  **coverage**, the share of the query's words it contains (first five letters, case and
  diacritics ignored; ``fulltext`` uses coverage alone). A word found in at least 80% of
  five or more hits (a speaker's name in a chat log) does not count, unless it is the
  query's only word;
- in hybrid recall, a memory next to a hit (the reply after a question, see neighbour
  context) is credited ``neighbor_weight ** distance`` of that hit's evidence;
- the ranking stays the strategy's: a hit's score is the best evidence of it and every
  hit ranked after it, so scores never increase down the list, and a hit the ranking put
  above a strong match is not scored below it.

So 0 means no evidence at all (no shared word, no similarity), 1 an exact match, and
``min_score`` cuts the tail of the list after the last hit with enough evidence. With
MiniLM, 0.2 emptied four in ten (chat) to all (long assistant sessions) of the questions
about things never stored, at some cost in answerable evidence: the right floor depends on
the corpus. With a reranker
(``recall(rerank=...)``) the reranker's scores order the hits and become their scores
(squashed to 0..1 by the logistic function when they fall outside that range).
docs/recall-quality.md ("Scores and min_score") has the measurements.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from ._coverage import _share, _sharer, _stem, _stems_of
from .errors import ValidationError
from .retrieval import RankedId, RetrievalConfig
from .store._text import parse_query

__all__ = ["check_min_score", "evidence_of", "finish", "relevance_floor"]


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


def relevance_floor(ranked: Sequence[RankedId],
                    relevance: Mapping[int, float] | None = None) -> list[RankedId]:
    """Make relevance non-increasing down the list: each hit scores at least as much as
    every hit ranked after it (``relevance``: each id's own, default ``r.relevance``)."""
    out: list[RankedId] = []
    best = 0.0
    for r in reversed(ranked):
        best = max(best, r.relevance if relevance is None else relevance[r.id])
        out.append(RankedId(r.id, r.score, r.ranks, r.similarity, best))
    return out[::-1]


def _query_terms(query: str) -> tuple[list[str], list[str]]:
    """The query's word stems and its quoted runs, as coverage counts them."""
    parsed = parse_query(query)
    return ([_stem(w) for w in parsed.flat_words()] if parsed else [],
            list(parsed.runs) if parsed else [])


def _evidence(query: str, ranked: Sequence[RankedId], known: Mapping[int, _Known],
              strategy: str) -> dict[int, float]:
    stems, runs = _query_terms(query)
    held = {r.id: _stems_of(known[r.id].content) for r in ranked if r.id in known}
    if len(held) >= 5 and len(stems) >= 2:
        # A word found in nearly every hit (a speaker's name in a chat log) tells them
        # apart no more than it tells them from the rest of the store: it does not count.
        common = {s for s in stems if sum(s in h for h in held.values()) >= 0.8 * len(held)}
        if len(common) < len(stems):
            stems = [s for s in stems if s not in common]
    out = {}
    share = _sharer(stems, runs)
    for r in ranked:
        memory = known.get(r.id)
        cover = 0.0 if memory is None else share(memory.content)
        cosine = 0.0 if strategy == "fulltext" or r.similarity is None else r.similarity
        out[r.id] = _clamp(max(cosine, cover))
    return out


def evidence_of(query: str, content: str, cosine: float | None) -> float:
    """One memory's evidence on the 0..1 scale, alone (no list to discount common words in):
    the larger of ``cosine`` (None: not compared by vector) and the share of the query's
    words ``content`` contains. Used for hits ranked outside a recall's list (history)."""
    stems, runs = _query_terms(query)
    return _clamp(max(cosine or 0.0, _share(stems, runs, content)))


def _lent(evidence: dict[int, float], known: Mapping[int, _Known],
          config: RetrievalConfig) -> dict[int, float]:
    """Neighbour credit: a memory next to a hit gets weight ** distance × its evidence."""
    n, gap = config.neighbors, timedelta(seconds=config.neighbor_gap)
    out = dict(evidence)
    for mid in evidence:
        memory = known.get(mid)
        for d in range(-n, n + 1):
            other = known.get(mid + d)
            if d == 0 or memory is None or other is None or mid + d not in evidence:
                continue
            if other.robot == memory.robot and abs(other.created_at - memory.created_at) <= gap:
                out[mid] = max(out[mid], config.neighbor_weight ** abs(d) * evidence[mid + d])
    return out


Reranker = Callable[[str, Sequence[RankedId], Mapping[int, _Known]], list[RankedId]]


def finish(query: str, ranked: Sequence[RankedId], known: Mapping[int, _Known], *,
           strategy: str, config: RetrievalConfig, limit: int,
           min_score: float | None = None, rerank: Reranker | None = None) -> list[RankedId]:
    """Give each of ``ranked`` its relevance (module doc), rerank when asked, drop the hits
    below ``min_score`` and keep ``limit``. ``known`` maps ids to the memories read
    (ids missing from it are dropped: forgotten since the search)."""
    ranked = [r for r in ranked if r.id in known]
    evidence = _evidence(query, ranked, known, strategy)
    if strategy == "hybrid" and config.neighbors:
        evidence = _lent(evidence, known, config)
    scored = relevance_floor(ranked, evidence)
    if rerank is not None:
        scored = rerank(query, scored, known)
    if min_score is not None:
        scored = [r for r in scored if r.relevance >= min_score]
    return scored[:limit]
