"""The facade's introspection: figures, robots, tags and the operations log.

:class:`Introspection` is a part of :class:`~htm_core.htm.HTM` (like
:class:`~htm_core._listing.Listing`): read-only views of the store and of this
instance's working memory, written apart so the facade itself only wires.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from .models import Operation, Robot, Stats
from .validation import check_limit

if TYPE_CHECKING:
    from .htm import HTM


class Introspection:
    """``stats``, ``robots``, ``tags`` and ``operations`` of :class:`~htm_core.htm.HTM`."""

    def stats(self) -> Stats:
        """Working-memory and long-term figures for this robot and the whole store."""
        htm = cast("HTM", self)
        with htm._lock:
            htm._resident.refresh()
        counts = htm._store.counts(htm.robot)
        info = htm._store.embedding_info()
        return Stats(
            robot=htm.robot, backend=htm._store.backend, database=htm._store.url,
            working_memory_count=len(htm._wm), working_memory_tokens=htm._wm.tokens,
            working_memory_max_tokens=htm._wm.max_tokens, eviction_policy=htm._wm.policy,
            long_term_total=counts.total, long_term_robot=counts.robot,
            forgotten=counts.forgotten, robots=counts.robots,
            embedder=htm._embedding.name, embedding_dim=info[1] if info else None,
            embedder_choice=htm._embedding.choice, token_counter=htm._counter.name,
            pending_embeddings=counts.missing_embeddings,
            failed_embeddings=counts.failed_embeddings,
            embedding_calls=htm._embedding.calls, embedding_cache_hits=htm._embedding.cache_hits,
            evictions=htm._wm.evictions, schema_version=htm._store.schema_version(),
            extra={"metrics": htm.metrics.snapshot(), **htm._embedding.worker_figures(),
                   "enrichment": htm._enrichment.stats(),
                   **htm._embedding.failure_figures(counts.failed_embeddings)},
        )


    def robots(self) -> list[Robot]:
        """Every robot on the store."""
        htm = cast("HTM", self)
        return htm._store.robots()


    def tags(self) -> dict[str, int]:
        """Every tag with its count of visible memories."""
        htm = cast("HTM", self)
        return htm._store.tags()


    def operations(self, *, limit: int = 100, op: str | None = None,
                   robot: str | None = None) -> list[Operation]:
        """The operations log, newest first (add, touch, evict, forget, restore, purge...),
        with what this instance's recent reads evicted written first."""
        htm = cast("HTM", self)
        with htm._lock:
            htm._resident.flush()
        return htm._store.operations(limit=check_limit(limit), robot=robot, op=op)
