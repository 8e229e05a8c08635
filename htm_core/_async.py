"""The async twins of ``HTM``'s public methods.

Every public method of :class:`~htm_core.HTM` that does I/O has a twin named ``a<name>``
with exactly its signature (parameters, defaults, annotations, return type), which runs the
sync method in a worker thread (:func:`asyncio.to_thread`) so the event loop never blocks
on the database, the embedder or a lock. ``tests/unit/test_async_twins.py`` compares the
signatures, so a new public method, or a changed one, fails the suite until its twin
matches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from .models import Context, Hit, Memory, Operation, Page, Robot, Stats

if TYPE_CHECKING:
    from .htm import HTM

__all__ = ["AsyncTwins"]


def _sync(twin: AsyncTwins) -> HTM:
    return cast("HTM", twin)


class AsyncTwins:
    """``HTM``'s async methods: each runs its sync namesake in a worker thread."""

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        await asyncio.to_thread(_sync(self).close)

    async def amigrate(self) -> int:
        """Async :meth:`migrate`."""
        return await asyncio.to_thread(_sync(self).migrate)

    async def aretry_failed_embeddings(self) -> int:
        """Async :meth:`retry_failed_embeddings`."""
        return await asyncio.to_thread(_sync(self).retry_failed_embeddings)

    async def aflush(self, timeout: float | None = None) -> None:
        """Async :meth:`flush`."""
        await asyncio.to_thread(_sync(self).flush, timeout)

    async def areembed(self, *, batch_size: int = 256, progress: bool = True,
                       force: bool = False) -> int:
        """Async :meth:`reembed`."""
        return await asyncio.to_thread(_sync(self).reembed, batch_size=batch_size,
                                       progress=progress, force=force)

    async def aadd(self, content: str, *, importance: float | None = None,
                   key: str | None = None, tags: Iterable[str] = (),
                   metadata: Mapping[str, Any] | None = None,
                   created_at: datetime | None = None) -> Memory:
        """Async :meth:`add`."""
        return await asyncio.to_thread(_sync(self).add, content, importance=importance, key=key,
                                       tags=tags, metadata=metadata, created_at=created_at)

    async def aadd_many(self, items: Iterable[str | Mapping[str, Any]], *,
                        working_memory: bool = True) -> list[Memory]:
        """Async :meth:`add_many` (``items`` is read into a list first, on the caller's
        thread)."""
        return await asyncio.to_thread(_sync(self).add_many, list(items),
                                       working_memory=working_memory)

    async def aclear_working_memory(self) -> int:
        """Async :meth:`clear_working_memory`."""
        return await asyncio.to_thread(_sync(self).clear_working_memory)

    async def aflush_enrichment(self, timeout: float | None = None) -> bool:
        """Async :meth:`flush_enrichment`."""
        return await asyncio.to_thread(_sync(self).flush_enrichment, timeout)

    async def aadd_document(self, text: str, *, source: str, chunk_tokens: int = 400,
                            overlap: int = 40, tags: Iterable[str] = (),
                            importance: float | None = None) -> list[Memory]:
        """Async :meth:`add_document`."""
        return await asyncio.to_thread(_sync(self).add_document, text, source=source,
                                       chunk_tokens=chunk_tokens, overlap=overlap, tags=tags,
                                       importance=importance)

    async def arecall(self, query: str, *, timeframe: Any = None, limit: int = 10,
                      strategy: str = "hybrid", tags: Iterable[str] | str | None = None,
                      robot: str | None = None, neighbors: int | None = None,
                      include_history: bool = False, min_score: float | None = None,
                      rerank: Any = None) -> list[Hit]:
        """Async :meth:`recall`."""
        return await asyncio.to_thread(_sync(self).recall, query, timeframe=timeframe,
                                       limit=limit, strategy=strategy, tags=tags, robot=robot,
                                       neighbors=neighbors, include_history=include_history,
                                       min_score=min_score, rerank=rerank)

    async def aretrieve(self, key: str) -> Memory | None:
        """Async :meth:`retrieve`."""
        return await asyncio.to_thread(_sync(self).retrieve, key)

    async def aget(self, key: str, include_forgotten: bool = False, *,
                   version: int | None = None) -> Memory | None:
        """Async :meth:`get`."""
        return await asyncio.to_thread(_sync(self).get, key, include_forgotten, version=version)

    async def aupdate(self, key: str, content: str, *, importance: float | None = None,
                      tags: Iterable[str] | str | None = None,
                      metadata: Mapping[str, Any] | None = None,
                      expected_version: int | None = None) -> Memory:
        """Async :meth:`update`."""
        return await asyncio.to_thread(_sync(self).update, key, content, importance=importance,
                                       tags=tags, metadata=metadata,
                                       expected_version=expected_version)

    async def aversions(self, key: str) -> list[Memory]:
        """Async :meth:`versions`."""
        return await asyncio.to_thread(_sync(self).versions, key)

    async def alist(self, *, robot: str | None = None, tags: Iterable[str] | str | None = None,
                    timeframe: Any = None, key_prefix: str | None = None,
                    include_forgotten: bool = False, order: str = "created_at",
                    descending: bool = False, limit: int = 100,
                    cursor: str | None = None) -> Page:
        """Async :meth:`list`."""
        return await asyncio.to_thread(
            _sync(self).list, robot=robot, tags=tags, timeframe=timeframe,
            key_prefix=key_prefix, include_forgotten=include_forgotten, order=order,
            descending=descending, limit=limit, cursor=cursor)

    async def acreate_context(self, strategy: str = "balanced", max_tokens: int | None = None,
                              *, include_summaries: int = 0, query: str | None = None,
                              recall_limit: int = 10, recall_strategy: str = "hybrid",
                              tags: Iterable[str] | str | None = None,
                              robot: str | None = None, scope_working: bool = False) -> Context:
        """Async :meth:`create_context`."""
        return await asyncio.to_thread(
            _sync(self).create_context, strategy, max_tokens,
            include_summaries=include_summaries, query=query, recall_limit=recall_limit,
            recall_strategy=recall_strategy, tags=tags, robot=robot,
            scope_working=scope_working)

    async def aforget(self, key: str, *, confirm: bool = False) -> Memory:
        """Async :meth:`forget`."""
        return await asyncio.to_thread(_sync(self).forget, key, confirm=confirm)

    async def arestore(self, key: str) -> Memory:
        """Async :meth:`restore`."""
        return await asyncio.to_thread(_sync(self).restore, key)

    async def apurge(self, *, confirm: bool = False, key: str | None = None) -> int:
        """Async :meth:`purge`."""
        return await asyncio.to_thread(_sync(self).purge, confirm=confirm, key=key)

    async def astats(self) -> Stats:
        """Async :meth:`stats`."""
        return await asyncio.to_thread(_sync(self).stats)

    async def arobots(self) -> list[Robot]:
        """Async :meth:`robots`."""
        return await asyncio.to_thread(_sync(self).robots)

    async def atags(self) -> dict[str, int]:
        """Async :meth:`tags`."""
        return await asyncio.to_thread(_sync(self).tags)

    async def aoperations(self, *, limit: int = 100, op: str | None = None,
                          robot: str | None = None) -> list[Operation]:
        """Async :meth:`operations`."""
        return await asyncio.to_thread(_sync(self).operations, limit=limit, op=op, robot=robot)
