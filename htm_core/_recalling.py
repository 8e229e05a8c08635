"""``HTM.recall``, ``retrieve`` and ``create_context``: what one robot reads, and what it
puts in front of the model. :class:`Recaller` ranks (:mod:`htm_core.recall`), finishes the
scores (:mod:`htm_core.scoring`) and lets the hits enter working memory through the
resident set; :class:`ContextMaker` fits summaries, recalled memories and working memory
into a token budget. See docs/concepts.md ("How hybrid recall ranks", "Contexts").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from . import _intake
from ._embedding import EmbeddingService
from ._native import SharedLock
from ._provenance import check_kinds
from ._tiered_context import check_context_strategy, hot_memories, older_digests, tiered_fit
from ._versions import check_include_history, with_history
from .clock import Clock, local_now
from .enrich.attach import FacadeEnrichment
from .models import Context, Hit, Memory
from .recall import RankedId, RetrievalConfig, search
from .recall.rerank import check_rerank, rerank_depth
from .recall.tiered import TieredResult, once, tiered_search
from .scoring import check_min_score, finish
from .store import LongTermStore, SearchFilters
from .tags import tag_filter
from .tokens import TokenCounter
from .validation import check_key, check_max_tokens, check_tags
from .working import WorkingMemory
from .working.context import SEPARATOR, fit
from .working.resident import ResidentSet

__all__ = ["DIGEST_ROOM", "ContextMaker", "DigestPresence", "Recaller", "without_digests"]


#: How many more candidates a search reads when the store holds digests, which recall
#: leaves out unless ``kinds`` names them (measured: as hits they crowd out the turns).
DIGEST_ROOM = 10


class DigestPresence:
    """Whether a store holds any digest: once seen, for good; until then asked again at
    most every ``every`` seconds (one indexed read), so a store without digests recalls as
    it always did."""

    def __init__(self, store: LongTermStore, every: float = 2.0) -> None:
        self._store = store
        self._every = every
        self._seen = False
        self._asked = -float("inf")

    def present(self) -> bool:
        if self._seen or time.monotonic() - self._asked < self._every:
            return self._seen
        self._asked = time.monotonic()
        self._seen = bool(self._store.list_memories(SearchFilters(kinds=("digest",)), limit=1))
        return self._seen

    def saw_one(self) -> bool:
        """A search met a digest: there are some. True when that is news."""
        news, self._seen = not self._seen, True
        return news


def without_digests(by_id: dict[int, Memory]) -> dict[int, Memory]:
    """``by_id`` less its digests (recall's candidates when ``kinds`` is not given)."""
    return {i: m for i, m in by_id.items() if m.kind != "digest"}


class Recaller:
    """Recall and exact lookup for one robot; hits enter its working memory."""

    def __init__(self, store: LongTermStore, *, embedding: EmbeddingService,
                 resident: ResidentSet, lock: SharedLock, clock: Clock,
                 retrieval: RetrievalConfig) -> None:
        self._store = store
        self._embedding = embedding
        self._resident = resident
        self._lock = lock
        self._clock = clock
        self._retrieval = retrieval
        self._digests = DigestPresence(store)

    def recall(self, query: str, *, timeframe: Any, limit: int, strategy: str, tags: Any,
               robot: str | None, neighbors: int | None, include_history: bool,
               min_score: float | None, rerank: Any, kinds: Any = None, sources: Any = None,
               min_confidence: Any = None) -> list[Hit]:
        """The hits of ``query``; see :meth:`HTM.recall <htm_core.HTM.recall>`."""
        filters, strategy, limit = _intake.recall_args(
            query, timeframe, limit, strategy, tags, robot, clock=self._clock, kinds=kinds,
            sources=sources, min_confidence=min_confidence)
        history = check_include_history(include_history)
        strategy = self._embedding.recall_strategy(strategy)
        config = self._retrieval if neighbors is None else self._retrieval.with_options(
            neighbors=_intake.check_neighbors(neighbors))
        floor, reranker = check_min_score(min_score), check_rerank(rerank)
        hits = self._hits(query, strategy, limit, filters, config, floor, reranker)
        if history:
            hits = with_history(self._store, hits, query=query, strategy=strategy, limit=limit,
                                query_vector=lambda: self._embedding.query(query),
                                filters=filters, min_score=floor)
        return hits

    def _hits(self, query: str, strategy: str, limit: int, filters: SearchFilters,
              config: RetrievalConfig, floor: float | None, reranker: Any) -> list[Hit]:
        """Search, rank and finish the current memories for ``query``; they enter working
        memory, and one forgotten since it was read is left out."""
        now = self._clock()  # the query's "now" and the hits' access time: one reading
        paths: dict[int, tuple[str, ...]] = {}
        room, tiered = 0, strategy == "tiered"
        if tiered:
            found = self.tiered(query, limit=rerank_depth(limit) if reranker else limit,
                                filters=filters, config=config, now=now)
            ranked, paths, strategy = found.ranked, found.paths, "hybrid"
        else:
            room = self.digest_room(filters)
            ranked = search(self._store, query=query,
                            query_vector=lambda: self._embedding.query(query), strategy=strategy,
                            limit=(rerank_depth(limit) if reranker else limit) + room,
                            filters=filters, config=config, now=now)
        by_id = {m.id: m for m in self._store.get_many([r.id for r in ranked])}
        if not filters.kinds:  # digests only when asked for
            turns = without_digests(by_id)
            if len(turns) < len(by_id) and not (room or tiered) and self._digests.saw_one():
                return self._hits(query, strategy, limit, filters, config, floor, reranker)
            by_id = turns
        ranked = finish(query, ranked, by_id, strategy=strategy, config=config, limit=limit,
                        min_score=floor, rerank=reranker, now=now)
        with self._lock:
            shown = self._resident.recalled([by_id[r.id] for r in ranked], now)
        # A hit forgotten since it was read is not returned (nor entered: the store refused it).
        return [Hit(memory=shown[r.id], score=r.relevance, ranks=dict(r.ranks),
                    path=paths.get(r.id, ())) for r in ranked if r.id in shown]

    def digest_room(self, filters: SearchFilters) -> int:
        """How many more candidates a search of ``filters`` reads to make up for the
        digests recall leaves out: none when ``kinds`` is given or the store has none."""
        return DIGEST_ROOM if not filters.kinds and self._digests.present() else 0

    def tiered(self, query: str, *, limit: int, filters: SearchFilters,
               config: RetrievalConfig, now: datetime) -> TieredResult:
        """``strategy="tiered"``: down the digests (:mod:`htm_core.recall.tiered`), with
        hybrid recall over what no day digest holds yet."""
        vector = once(lambda: self._embedding.query(query))

        def hybrid(recent: SearchFilters) -> list[RankedId]:
            return search(self._store, query=query, query_vector=vector, strategy="hybrid",
                          limit=limit, filters=recent, config=config, now=now)

        return tiered_search(self._store, query=query, query_vector=vector, limit=limit,
                             filters=filters, config=config, now=now, hybrid=hybrid)

    def retrieve(self, key: str) -> Memory | None:
        """The memory under ``key``, or None; counts as an access."""
        memory = self._store.get(check_key(key))
        with self._lock:
            return self._resident.retrieved(memory, self._clock())


class ContextMaker:
    """``create_context`` for one robot: summaries, recalled memories and working memory,
    in that order, within a token budget."""

    def __init__(self, store: LongTermStore, *, wm: WorkingMemory, resident: ResidentSet,
                 lock: SharedLock, counter: TokenCounter, enrichment: FacadeEnrichment,
                 recall: Callable[..., list[Hit]], clock: Clock = local_now) -> None:
        self._store = store
        self._clock = clock
        self._wm = wm
        self._resident = resident
        self._lock = lock
        self._counter = counter
        self._enrichment = enrichment
        self._recall = recall

    def create_context(self, strategy: str, max_tokens: int | None, *, include_summaries: int,
                       query: str | None, recall_limit: int, recall_strategy: str,
                       tags: Iterable[str] | str | None, robot: str | None,
                       scope_working: bool,
                       recall_kinds: str | Iterable[str] | None = None) -> Context:
        """The context; see :meth:`HTM.create_context <htm_core.HTM.create_context>`."""
        check_context_strategy(strategy)
        recall_kinds = check_kinds(recall_kinds) or None
        limit = self._wm.max_tokens if max_tokens is None else check_max_tokens(max_tokens)
        budget = self._wm.budget_for(limit)
        scope = _intake.context_scope(tags, scope_working)
        in_scope = tag_filter(scope)
        summaries = self._summaries(include_summaries, (lambda m: in_scope(m.tags))
                                    if scope else None)
        recalled: list[Memory] = []
        if query is not None:
            recalled = [hit.memory for hit in self._recall(
                query, limit=recall_limit, strategy=recall_strategy, tags=tags, robot=robot,
                kinds=recall_kinds)]
        with self._lock:  # scoped: every resident one in order; fit applies the budget
            resident = self._resident.ordered("balanced" if strategy == "tiered" else strategy,
                                              limit, (lambda m: in_scope(m.tags))
                                              if scope else None)
        if strategy == "tiered":
            memories, text, tokens = self._tiered([*summaries, *recalled], resident, tags,
                                                  budget)
        else:
            memories, text, tokens = fit([*summaries, *recalled, *resident], budget,
                                         count=self._counter.count,
                                         separator_tokens=self._counter.count(SEPARATOR))
        return Context(text=text, memories=tuple(memories), tokens=tokens, strategy=strategy,
                       max_tokens=limit, budget=budget)

    def _tiered(self, lead: list[Memory], resident: list[Memory],
                tags: Iterable[str] | str | None, budget: int) -> tuple[list[Memory], str, int]:
        """Hot memories, then the digests of older periods (:mod:`htm_core._tiered_context`)."""
        now, scope = self._clock(), check_tags(tags)
        hot = hot_memories(self._store, now, scope, resident)
        return tiered_fit(lead, hot, older_digests(self._store, now, scope), budget,
                          self._counter.count, now)

    def _summaries(self, count: int, keep: Callable[[Memory], bool] | None) -> list[Memory]:
        """The ``count`` newest summaries of evicted memories, newest first (those ``keep``
        takes)."""
        _intake.check_include_summaries(count)
        if not count:
            return []
        newest = list(self._enrichment.summaries)[-count:][::-1]
        return [m for m in (self._store.get(k) for k in newest)
                if m is not None and (keep is None or keep(m))]
