"""``HTMRetriever``: htm's hybrid recall as a LangChain ``BaseRetriever``.

``HTMRetriever(htm=htm, user_id="ada", k=4).invoke("editor preferences")`` (or ``ainvoke``)
is one :meth:`htm_core.HTM.recall`, so recalled memories enter working memory. A retriever
says whose memories it searches, explicitly (``user_id`` / ``session_id``, ``tags`` or
``shared=True``) or refuses to be built; every argument can be overridden per call, and
per-call ``tags`` may narrow the scope, never widen it. See docs/langchain.md ("Retriever:
``HTMRetriever``").
"""

from __future__ import annotations

from typing import Any

from htm_core.errors import ValidationError, missing_extra
from htm_core.models import Hit
from htm_core.serialize import memory_metadata

from .._options import refuse_unknown
from .._scope import ChatScope, narrow

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, PrivateAttr, field_validator
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langchain-core", "langchain") from None

__all__ = ["HTMRetriever", "memory_metadata"]

_RECALL_OPTIONS = ("k", "strategy", "timeframe", "tags", "robot", "kinds", "sources",
                   "min_confidence")


def hit_to_document(hit: Hit) -> Document:
    """A recall hit as a ``Document`` (``id`` is the memory's key)."""
    return Document(page_content=hit.memory.content, id=hit.memory.key,
                    metadata=memory_metadata(hit.memory, hit.score))


class HTMRetriever(BaseRetriever):
    """Retrieve memories from an :class:`htm_core.HTM` by hybrid (vector + full-text) recall.

    Args:
        htm: the memory to search.
        k: how many documents at most (htm's ``limit``), default 4.
        strategy: ``"hybrid"`` (default), ``"vector"``, ``"fulltext"`` or ``"tiered"``.
        timeframe: only memories from this period (``"last 7 days"`` rolling, ``"last week"``
            the previous calendar week, ``"May 2023"``, an ISO range, a ``timedelta``...);
            default any time.
        tags: only memories carrying one of these tags or a tag below one (a single
            string is one tag); with ``user_id``/``session_id`` they narrow that scope.
            LangChain's ``BaseRetriever`` also passes ``tags`` to callbacks, so they
            label the retriever's runs in tracing too.
        robot: only memories written by this robot; default every robot on the store.
        kinds: only memories of this kind or these kinds (``"fact"``,
            ``["fact", "preference"]``); default every kind.
        sources: only memories from this source or these sources, exactly (``"user"`` is
            neither ``"User"`` nor ``"user:chat"``); default any source.
        min_confidence: only memories with a confidence of at least this, 0 to 1 (one
            without a confidence never passes); default any.
        user_id: search this user's memories (tag ``chat:user:<user_id>``, every session;
            narrow to one with ``tags=["chat:user:<user_id>:session:<id>"]``).
        session_id: without ``user_id``: search this conversation's memories
            (``chat:session:<id>``).
        shared_tags: with ``user_id``/``session_id``: memories with these tags are
            searched too (knowledge shared with every user).
        shared: ``True`` searches the whole store, every user's memories.

    One of ``user_id``, ``session_id``, ``tags`` or ``shared=True`` is required (a
    :class:`~htm_core.errors.ValidationError` says so otherwise).

    Documents carry the memory's text as ``page_content``, its key as ``id``, and metadata
    ``id``, ``key``, ``score``, ``importance``, ``created_at`` (ISO 8601), ``robot``,
    ``tags``, ``kind``. Any of ``k``, ``strategy``, ``timeframe``, ``tags``, ``robot``,
    ``kinds``, ``sources``, ``min_confidence`` can be given per call as a keyword of
    ``invoke``; any other keyword, when building the retriever or per call, raises
    :class:`~htm_core.errors.ValidationError`, as does a bad value when searching.

    Example:
        >>> from htm_core import HTM
        >>> htm = HTM(database_url=":memory:", embedder="hashing")
        >>> _ = htm.add("User prefers Vim keybindings", key="pref-vim", tags=["kb"])
        >>> HTMRetriever(htm=htm, k=1, tags=["kb"]).invoke("vim")[0].metadata["key"]
        'pref-vim'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    htm: Any
    k: int = 4
    strategy: str = "hybrid"
    timeframe: Any = None
    tags: list[str] | None = None
    robot: str | None = None
    kinds: list[str] | None = None
    sources: list[str] | None = None
    min_confidence: Any = None
    user_id: str | None = None
    session_id: str | None = None
    shared_tags: list[str] | None = None
    shared: bool = False
    _visible: tuple[str, ...] | None = PrivateAttr(default=None)

    @field_validator("tags", "shared_tags", "kinds", "sources", mode="before")
    @classmethod
    def _one_tag(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def __init__(self, **data: Any) -> None:
        """Build the retriever; its scope is checked by htm's rules, and a keyword it does
        not know (``limit=`` for ``k=``) is refused."""
        refuse_unknown("HTMRetriever", data, type(self).model_fields)
        super().__init__(**data)
        if self.user_id is not None or self.session_id is not None:
            scope = ChatScope.of(user_id=self.user_id, session_id=self.session_id,
                                 shared=self.shared, shared_tags=self.shared_tags)
            self._visible = scope.filter_tags()
            narrow(self._visible, self.tags)
        elif self.shared:
            self._visible = None
        elif self.tags:
            self._visible = narrow(None, self.tags)
        else:
            raise ValidationError(
                "HTMRetriever needs to know whose memories it searches: user_id=... or "
                "session_id=... (one user's or one conversation's), tags=[...] (memories with "
                "these tags, e.g. the application's knowledge), or shared=True (the whole "
                "store, every user's conversations included)")

    def _recall_kwargs(self, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(overrides) - set(_RECALL_OPTIONS))
        if unknown:
            raise ValidationError(
                f"HTMRetriever does not understand {unknown}; per-call options are "
                f"{list(_RECALL_OPTIONS)}")
        options = {name: overrides.get(name, getattr(self, name)) for name in _RECALL_OPTIONS}
        options["limit"] = options.pop("k")
        options["tags"] = narrow(self._visible, options["tags"])
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
