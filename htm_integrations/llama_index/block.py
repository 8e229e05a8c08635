"""``HTMMemoryBlock``: htm long-term recall as a block of LlamaIndex's ``Memory``.

``Memory.from_defaults(session_id="chat-1", memory_blocks=[HTMMemoryBlock(htm=htm,
user_id="alice")])``: when ``Memory``'s short-term queue outgrows its token limit, the
flushed messages are stored in htm's long-term memory, and on every ``Memory.get`` the block
recalls the memories most relevant to the latest user message into the system message. Both
are scoped to the ``Memory``'s session (every session of the user with ``user_id``) unless
``shared=True``. See docs/llamaindex.md ("Memory blocks: ``HTMMemoryBlock``").
"""

from __future__ import annotations

import uuid
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.memory.memory import BaseMemoryBlock

from htm_core import HTM
from htm_core.errors import ValidationError

from .._options import refuse_unknown
from .._scope import ChatScope
from ._messages import memory_line, message_text, recall_kinds

__all__ = ["HTMMemoryBlock"]


class HTMMemoryBlock(BaseMemoryBlock[str]):
    """A ``BaseMemoryBlock`` that stores flushed messages in htm and recalls from it.

    Attributes:
        htm: the ``HTM`` instance.
        name: the block's name (the tag it gets in the ``<memory>`` section).
        recall_limit: memories recalled per ``get`` at most.
        recall_strategy: ``"hybrid"`` (default), ``"vector"``, ``"fulltext"`` or ``"tiered"``.
        query_messages: how many trailing messages make the recall query (default 1: the
            latest message, normally the user's input).
        max_tokens: the block's own budget (by ``htm.token_counter``); None for no limit
            beyond ``Memory``'s own truncation (set ``priority`` > 0 to allow it).
        store_roles: roles of flushed messages that are stored long-term.
        importance: htm importance of stored messages.
        user_id: the user whose conversations these are (default none: the ``Memory``'s
            session alone is the scope).
        shared_tags: memories with one of these tags (or below one) are recalled in every
            conversation too: knowledge shared on purpose (default none).
        shared: ``True`` recalls from the whole store (every user and session).
        kinds: recall only memories of these kinds (``["fact", "preference"]``, see
            docs/consolidation.md, "Kinds"), inside the search and the scope; default
            every kind but ``digest``.

    Any other keyword raises :class:`~htm_core.errors.ValidationError`.
    """

    htm: Any = Field(exclude=True, description="The htm_core.HTM instance.")
    name: str = Field(default="long_term_memory", description="The name of the memory block.")
    recall_limit: int = Field(default=5, ge=1, le=10_000)
    recall_strategy: str = Field(default="hybrid")
    query_messages: int = Field(default=1, ge=1)
    max_tokens: int | None = Field(default=None, gt=0)
    store_roles: tuple[str, ...] = Field(default=("user", "assistant"))
    importance: float = Field(default=1.0, ge=0.0, le=10.0)
    user_id: str | None = Field(default=None)
    shared: bool = Field(default=False)
    shared_tags: tuple[str, ...] = Field(default=())
    kinds: tuple[str, ...] | None = Field(default=None)

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        refuse_unknown("HTMMemoryBlock", data, type(self).model_fields)
        htm = data.get("htm")
        if not isinstance(htm, HTM):
            raise ValidationError(
                f"HTMMemoryBlock needs htm=<htm_core.HTM instance>, got {type(htm).__name__}")
        ChatScope.of(session_id="default", user_id=data.get("user_id"),
                     shared=data.get("shared", False), shared_tags=data.get("shared_tags"))
        if data.get("kinds") is not None:
            data["kinds"] = recall_kinds(data["kinds"], "HTMMemoryBlock")
        super().__init__(**data)

    def scope(self, session_id: str | None) -> ChatScope:
        """The scope of the ``Memory`` session ``session_id`` (``"default"`` when None)."""
        return ChatScope.of(session_id=session_id if session_id is not None else "default",
                            user_id=self.user_id, shared=self.shared,
                            shared_tags=self.shared_tags)

    async def _aget(self, messages: list[ChatMessage] | None = None,
                    session_id: str | None = None, **block_kwargs: Any) -> str:
        """Recall memories for the latest message(s); ``""`` when there is nothing."""
        if not messages:
            return ""
        query = " ".join(message_text(m) for m in messages[-self.query_messages:]).strip()
        if not query:
            return ""
        hits = await self.htm.arecall(query, limit=self.recall_limit,
                                      strategy=self.recall_strategy,
                                      tags=self.scope(session_id).filter_tags(),
                                      kinds=self.kinds)
        present = {message_text(m) for m in messages}
        count = self.htm.token_counter.count
        lines: list[str] = []
        for hit in hits:
            if hit.memory.content in present:
                continue
            line = memory_line(hit.memory)
            if self.max_tokens is not None and count("\n".join([*lines, line])) > self.max_tokens:
                continue
            lines.append(line)
        return "\n".join(lines)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Store the flushed messages that have text, in one transaction."""
        items = []
        for message in messages:
            session = message.additional_kwargs.pop("session_id", None)
            role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
            text = message_text(message)
            if role not in self.store_roles or not text.strip():
                continue
            metadata: dict[str, Any] = {"role": role, "source": "llama_index"}
            if session is not None:
                metadata["session_id"] = str(session)
            if self.user_id is not None:
                metadata["user_id"] = self.user_id
            tag = self.scope(None if session is None else str(session)).tag
            items.append({"content": text, "key": f"{tag}:llama_index:{uuid.uuid4().hex}",
                          "importance": self.importance, "tags": [tag], "metadata": metadata})
        if items:
            await self.htm.aadd_many(items)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the least relevant memories (the last lines) until enough tokens are freed."""
        count = self.htm.token_counter.count
        lines = content.split("\n") if content else []
        target = count(content) - tokens_to_truncate if content else 0
        while lines and count("\n".join(lines)) > target:
            lines.pop()
        return "\n".join(lines) if lines else None
