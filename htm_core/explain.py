"""Why recall returns what it returns: a read-only look inside one recall.

:func:`explain_recall` runs the same search as :meth:`HTM.recall <htm_core.HTM.recall>` (same
argument checks, same :func:`~htm_core.recall.search`, same configuration) and also reads each
arm's own ranked list, but changes nothing: no memory enters working memory, no access is
counted, nothing is logged. Its :class:`RecallExplanation` holds each arm's list, the fused
list with each hit's rank per arm, fused score and relevance, the timeframe read and what
entering working memory would evict. ``htm ui``'s recall debugger shows it: docs/ui.md
("Recall debugger").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from . import _intake
from ._recalling import without_digests
from .clock import to_timestamp
from .errors import MemoryTooLargeError
from .models import Memory
from .querytime import QueryTime, query_timeframe
from .recall import search
from .recall.pipeline import one_arm, run_arms, vector_hits
from .recall.tiered import TieredResult
from .scoring import finish
from .store.base import ArmQuery, SearchFilters
from .text import parse_query
from .working import WorkingMemory

if TYPE_CHECKING:
    from .htm import HTM

__all__ = ["ArmHit", "FusedHit", "RecallExplanation", "explain_recall"]


@dataclass(frozen=True)
class ArmHit:
    """One hit of one arm: its rank there (from 1), the arm's own score, the memory."""

    rank: int
    score: float
    memory: Memory


@dataclass(frozen=True)
class FusedHit:
    """One hit of the fused list: its rank (from 1), fused score, and rank in each arm.

    ``score`` is the fusion's own (RRF) score that ordered the list; ``relevance`` is the
    0..1 score :meth:`~htm_core.HTM.recall` reports as ``Hit.score`` (:mod:`htm_core.scoring`).
    """

    rank: int
    score: float
    memory: Memory
    ranks: dict[str, int] = field(default_factory=dict)
    relevance: float = 0.0
    #: ``strategy="tiered"``: the month, week and day digest keys that led to the hit.
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecallExplanation:
    """What :func:`explain_recall` found; see docs/ui.md ("Recall debugger")."""

    query: str
    strategy: str
    limit: int
    filters: SearchFilters
    query_time: QueryTime | None
    arms: dict[str, list[ArmHit]]
    fused: list[FusedHit]
    would_evict: list[str]
    too_large: list[str]
    working_tokens: tuple[int, int]
    #: ``strategy="tiered"``: the digests scored per level, the days opened, the
    #: memories scored beneath them and where the unconsolidated part began.
    tiers: TieredResult | None = None


def explain_recall(htm: HTM, query: str, *, timeframe: Any = None, limit: int = 10,
                   strategy: str = "hybrid", tags: Iterable[str] | str | None = None,
                   robot: str | None = None, arm_depth: int | None = None,
                   kinds: Iterable[str] | str | None = None,
                   sources: Iterable[str] | str | None = None,
                   min_confidence: float | None = None) -> RecallExplanation:
    """Explain ``htm.recall(query, ...)`` without doing it (nothing is written).

    Takes :meth:`~htm_core.HTM.recall`'s arguments (and raises its errors for bad ones).
    ``arm_depth`` caps how many hits of each arm are returned (default: every candidate
    the arm gave the fusion).

    >>> from htm_core import HTM
    >>> with HTM(database_url=":memory:", embedder="hashing") as htm:
    ...     _ = htm.add("User prefers Vim keybindings", key="pref-vim")
    ...     why = explain_recall(htm, "vim keybindings")
    ...     [h.memory.key for h in why.fused], sorted(why.fused[0].ranks)
    (['pref-vim'], ['fulltext', 'vector'])
    """
    filters, strategy, limit = _intake.recall_args(
        query, timeframe, limit, strategy, tags, robot, clock=htm._clock, kinds=kinds,
        sources=sources, min_confidence=min_confidence)
    strategy = htm._embedding.recall_strategy(strategy)
    config = htm._retrieval
    now = htm._clock()
    vector = _once(lambda: htm._embedding.query(query))
    store = htm.store
    tiers = None
    if strategy == "tiered":
        tiers = htm._recaller.tiered(query, limit=limit, filters=filters, config=config, now=now)
        ranked, strategy = tiers.ranked, "hybrid"
    else:
        ranked = search(store, query=query, query_vector=vector, strategy=strategy,
                        limit=limit + htm._recaller.digest_room(filters), filters=filters,
                        config=config, now=now)
    when = query_timeframe(query, now) if strategy == "hybrid" and config.time_boost else None
    arms = {} if tiers else _arm_lists(htm, query, vector, strategy, limit, filters, now)
    if arm_depth is not None:
        arms = {name: got[:arm_depth] for name, got in arms.items()}
    ids = {r.id for r in ranked} | {mid for got in arms.values() for mid, _ in got}
    by_id = {m.id: m for m in store.get_many(sorted(ids))}
    known = by_id if filters.kinds else without_digests(by_id)  # as recall ranks
    scored = finish(query, ranked, known, strategy=strategy, config=config, limit=limit,
                    now=now)
    paths = tiers.paths if tiers else {}
    fused = [FusedHit(n, r.score, by_id[r.id], dict(r.ranks), relevance=r.relevance,
                      path=paths.get(r.id, ())) for n, r in enumerate(scored, start=1)]
    evict, too_large, tokens = _would_evict(htm, [h.memory for h in fused], now)
    return RecallExplanation(
        query=query, strategy="tiered" if tiers else strategy, limit=limit, filters=filters, query_time=when,
        arms={name: [ArmHit(n, score, by_id[mid]) for n, (mid, score) in
                     enumerate(((m, s) for m, s in got if m in by_id), start=1)]
              for name, got in arms.items()},
        fused=fused, would_evict=evict, too_large=too_large, working_tokens=tokens,
        tiers=tiers)


def _once(make: Callable[[], list[float]]) -> Callable[[], list[float]]:
    got: list[list[float]] = []

    def vector() -> list[float]:
        if not got:
            got.append(make())
        return got[0]

    return vector


def _arm_lists(htm: HTM, query: str, vector: Callable[[], list[float]], strategy: str,
               limit: int, filters: SearchFilters,
               now: datetime) -> dict[str, list[tuple[int, float]]]:
    """Each arm's ranked (id, score) list, asked as :func:`search` asks them
    (:func:`~htm_core.recall.pipeline.run_arms`)."""
    store, config = htm.store, htm._retrieval
    if strategy == "vector":
        return {"vector": vector_hits(store, vector(), limit, filters, config)}
    if strategy == "fulltext":
        return {"fulltext": one_arm(store, ArmQuery(text=query, limit=limit, filters=filters))}
    if not parse_query(query):
        return {"vector": [(m, s) for m, s in vector_hits(store, vector(), limit, filters, config)
                           if s >= config.no_terms_floor]}
    return run_arms(store, query, vector, limit=limit, filters=filters, config=config,
                    now=now)[1]


def _would_evict(htm: HTM, hits: Sequence[Memory], now: datetime
                 ) -> tuple[list[str], list[str], tuple[int, int]]:
    """Enter ``hits`` (least relevant first, as recall does) into a copy of the robot's
    working memory; return the keys that would leave (resident ones and hits pushed out by
    later hits), the hits too large to enter, and the copy's (tokens, budget) afterwards."""
    with htm._lock:
        htm._resident.refresh()
        wm = htm.working_memory
        items = sorted(wm.items(), key=lambda i: i.seq)
        copy = WorkingMemory(wm.max_tokens, wm._policy, clock=htm._clock,
                             safety_margin=wm.safety_margin)
    for item in items:
        copy.add(item.key, item.content, tokens=item.token_count, importance=item.importance,
                 created_at=item.created_at, last_accessed=item.last_accessed,
                 access_count=item.access_count, seq=item.seq, access_seq=item.access_seq)
    evicted: list[str] = []
    too_large: list[str] = []
    at = to_timestamp(now)
    for m in reversed(hits):
        try:
            gone = copy.add(m.key, m.content, tokens=m.token_count, importance=m.importance,
                            created_at=to_timestamp(m.created_at), last_accessed=at,
                            access_count=m.access_count + 1)
        except MemoryTooLargeError:
            too_large.append(m.key)
            continue
        evicted.extend(g.key for g in gone)
    return evicted, too_large, (copy.tokens, copy.max_tokens)
