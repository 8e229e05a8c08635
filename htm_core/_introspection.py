"""The facade's introspection: figures, robots, tags and the operations log.

:class:`Introspection` is the service ``HTM`` holds for them: read-only views of the store
and of one robot's working memory, built from the parts it is given (store, resident set,
lock, embedding service, token counter, metrics, enrichment).
"""

from __future__ import annotations

from collections.abc import Sequence

from ._embedding import EmbeddingService
from ._native import SharedLock
from .enrich.attach import FacadeEnrichment
from .models import Operation, Robot, Stats
from .observability import Metrics
from .store import LongTermStore
from .tags import carries_tag
from .tokens import TokenCounter
from .validation import check_limit
from .working.eviction import WorkingItem
from .working.resident import ResidentSet

__all__ = ["Introspection"]


class Introspection:
    """``stats``, ``robots``, ``tags`` and ``operations`` for one robot."""

    def __init__(self, store: LongTermStore, robot: str, *, resident: ResidentSet,
                 lock: SharedLock, embedding: EmbeddingService, counter: TokenCounter,
                 metrics: Metrics, enrichment: FacadeEnrichment) -> None:
        self._store = store
        self._robot = robot
        self._resident = resident
        self._lock = lock
        self._embedding = embedding
        self._counter = counter
        self._metrics = metrics
        self._enrichment = enrichment

    def stats(self, tags: Sequence[str] | None = None) -> Stats:
        """Working-memory and long-term figures, working memory brought up to date first;
        with ``tags``, the counts of memories (and of resident ones) within them."""
        tags = tags or None  # no tags: the whole store
        with self._lock:
            self._resident.refresh()
            resident = self._resident_within(tags)
        store, wm, embedding = self._store, self._resident.wm, self._embedding
        counts = store.counts(self._robot, tags=tags)
        info = store.embedding_info()
        return Stats(
            robot=self._robot, backend=store.backend, database=store.url,
            working_memory_count=len(resident),
            working_memory_tokens=sum(item.token_count for item in resident),
            working_memory_max_tokens=wm.max_tokens, eviction_policy=wm.policy,
            long_term_total=counts.total, long_term_robot=counts.robot,
            forgotten=counts.forgotten, robots=counts.robots,
            embedder=embedding.name, embedding_dim=info[1] if info else None,
            embedder_choice=embedding.choice, token_counter=self._counter.name,
            pending_embeddings=counts.missing_embeddings,
            failed_embeddings=counts.failed_embeddings,
            embedding_calls=embedding.calls, embedding_cache_hits=embedding.cache_hits,
            evictions=wm.evictions, schema_version=store.schema_version(),
            extra={"metrics": self._metrics.snapshot(), **embedding.worker_figures(),
                   "enrichment": self._enrichment.stats(),
                   **embedding.failure_figures(counts.failed_embeddings)},
        )

    def _resident_within(self, tags: Sequence[str] | None) -> list[WorkingItem]:
        """The resident items whose memory carries one of ``tags`` (all without)."""
        items = self._resident.wm.items()
        if tags is None:
            return items
        shown = self._resident.memories
        return [item for item in items
                if (m := shown.get(item.key)) is not None and carries_tag(m.tags, tags)]

    def robots(self, tags: Sequence[str] | None = None) -> list[Robot]:
        """Every robot on the store (with ``tags``, those that wrote a memory within them)."""
        return self._store.robots(tags=tags or None)

    def tags(self) -> dict[str, int]:
        """Every tag with its count of visible memories."""
        return self._store.tags()

    def operations(self, *, limit: int = 100, op: str | None = None,
                   robot: str | None = None) -> list[Operation]:
        """The operations log, newest first, with this robot's pending reads written first."""
        with self._lock:
            self._resident.flush()
        return self._store.operations(limit=check_limit(limit), robot=robot, op=op)
