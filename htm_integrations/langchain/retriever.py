"""``HTMRetriever``: htm's hybrid recall as a LangChain ``BaseRetriever``.

::

    from htm_core import HTM
    from htm_integrations.langchain import HTMRetriever

    htm = HTM(robot="assistant")
    retriever = HTMRetriever(htm=htm, k=4, timeframe="last week")
    docs = retriever.invoke("editor preferences")      # or: await retriever.ainvoke(...)

Each call is one :meth:`htm_core.HTM.recall` (so recalled memories enter working memory,
as any recall does). Every argument of the retriever can be overridden per call:
``retriever.invoke("query", k=1, tags=["user"])``.
"""

from __future__ import annotations

from typing import Any

from htm_core.errors import ValidationError, missing_extra
from htm_core.models import Hit, Memory

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, field_validator
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langchain-core", "langchain") from None

__all__ = ["HTMRetriever", "memory_metadata"]

_RECALL_OPTIONS = ("k", "strategy", "timeframe", "tags", "robot")


def memory_metadata(memory: Memory, score: float | None = None) -> dict[str, Any]:
    """The metadata every htm adapter attaches to a memory it hands to a framework.

    Keys: ``id``, ``key``, ``score`` (None when the memory was not found by recall),
    ``importance``, ``created_at`` (ISO 8601, UTC), ``robot`` and ``tags`` (a list).
    """
    return {
        "id": memory.id,
        "key": memory.key,
        "score": score,
        "importance": memory.importance,
        "created_at": memory.created_at.isoformat(),
        "robot": memory.robot,
        "tags": list(memory.tags),
    }


def hit_to_document(hit: Hit) -> Document:
    """A recall hit as a ``Document`` (``id`` is the memory's key)."""
    return Document(page_content=hit.memory.content, id=hit.memory.key,
                    metadata=memory_metadata(hit.memory, hit.score))


class HTMRetriever(BaseRetriever):
    """Retrieve memories from an :class:`htm_core.HTM` by hybrid (vector + full-text) recall.

    Args:
        htm: the memory to search.
        k: how many documents at most (htm's ``limit``), default 4.
        strategy: ``"hybrid"`` (default), ``"vector"`` or ``"fulltext"``.
        timeframe: only memories from this period (``"last week"``, ``"May 2023"``, an ISO
            range, a ``timedelta``...); default any time.
        tags: only memories carrying one of these tags or a tag below one (a single
            string is one tag). LangChain's ``BaseRetriever`` also passes ``tags`` to
            callbacks, so they label the retriever's runs in tracing too.
        robot: only memories written by this robot; default every robot on the store.

    Documents carry the memory's text as ``page_content``, its key as ``id``, and metadata
    ``id``, ``key``, ``score``, ``importance``, ``created_at`` (ISO 8601), ``robot``,
    ``tags``. Any of ``k``, ``strategy``, ``timeframe``, ``tags``, ``robot`` can be given
    per call as a keyword of ``invoke``; any other keyword raises
    :class:`~htm_core.errors.ValidationError`.

    Example:
        >>> from htm_core import HTM
        >>> htm = HTM(database_url=":memory:", embedder="hashing")
        >>> _ = htm.add("User prefers Vim keybindings", key="pref-vim")
        >>> HTMRetriever(htm=htm, k=1).invoke("vim")[0].metadata["key"]
        'pref-vim'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    htm: Any
    k: int = 4
    strategy: str = "hybrid"
    timeframe: Any = None
    tags: list[str] | None = None
    robot: str | None = None

    @field_validator("tags", mode="before")
    @classmethod
    def _one_tag(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def _recall_kwargs(self, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(overrides) - set(_RECALL_OPTIONS))
        if unknown:
            raise ValidationError(
                f"HTMRetriever does not understand {unknown}; per-call options are "
                f"{list(_RECALL_OPTIONS)}")
        options = {name: overrides.get(name, getattr(self, name)) for name in _RECALL_OPTIONS}
        options["limit"] = options.pop("k")
        return options

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        hits = self.htm.recall(query, **self._recall_kwargs(kwargs))
        return [hit_to_document(hit) for hit in hits]

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        hits = await self.htm.arecall(query, **self._recall_kwargs(kwargs))
        return [hit_to_document(hit) for hit in hits]
