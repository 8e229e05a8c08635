"""``HTMMemory``: an :class:`htm_core.HTM` as a LlamaIndex chat memory.

It is a ``llama_index.core.memory.BaseMemory``, so it goes wherever LlamaIndex takes
``memory=``: ``SimpleChatEngine``, ``CondensePlusContextChatEngine``, ``ContextChatEngine``
and the workflow agents (``FunctionAgent``, ``ReActAgent``: ``agent.run(..., memory=...)``).

- ``put`` keeps the message in the recent conversation (in this process) and stores every
  user and assistant message with text in htm's long-term memory (durable at once), with
  ``metadata={"role", "session_id", "source": "llama_index"}`` and the conversation's
  scope tag: ``chat:session:<session_id>``, or with ``user_id``
  ``chat:user:<user_id>:session:<session_id>``.
- ``get(input=...)`` returns a system message listing the long-term memories htm recalls
  for ``input`` (default: the latest user message), then the most recent messages of the
  conversation, all within ``token_limit`` tokens counted by the ``HTM``'s token counter.
  Old turns that no longer fit come back through recall when they are relevant.
- Recall is scoped to the conversation by default: this session's memories, or every
  session of ``user_id`` when it is given. Another user's turns are never recalled unless
  the memory is built with ``shared=True`` (recall from the whole store).
- ``reset()`` clears the recent conversation and htm's working memory; long-term memory
  keeps everything (htm never forgets unless told to with ``forget(key, confirm=True)``).

::

    from htm_core import HTM
    from htm_integrations.llama_index import HTMMemory
    from llama_index.core.chat_engine import SimpleChatEngine

    with HTM(robot="assistant") as htm:
        memory = HTMMemory.from_defaults(htm=htm, user_id="alice", session_id="chat-1",
                                         token_limit=3000)
        engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
        engine.chat("I prefer Vim keybindings")
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import BaseMemory

from htm_core import HTM, Memory
from htm_core.errors import InvalidBudgetError, ValidationError
from htm_core.validation import check_importance, check_max_tokens

from .._scope import ChatScope

__all__ = ["DEFAULT_MEMORY_HEADER", "HTMMemory"]

#: The first line of the system message that carries recalled memories.
DEFAULT_MEMORY_HEADER = "Relevant memories (recalled from long-term memory):"
DEFAULT_TOKEN_LIMIT = 3000
#: Share of an LLM's context window used as the default ``token_limit`` (as LlamaIndex does).
DEFAULT_TOKEN_LIMIT_RATIO = 0.75


def message_text(message: ChatMessage) -> str:
    """The text of a message (its text blocks joined), ``""`` when it has none."""
    content = message.content
    return content if isinstance(content, str) else ""


def memory_line(memory: Memory) -> str:
    """One recalled memory as one line of the memory message: ``- [role] content``.

    Line breaks inside the content become spaces, so one line is always one memory.
    """
    role = memory.metadata.get("role") if isinstance(memory.metadata, dict) else None
    prefix = f"[{role}] " if isinstance(role, str) and role else ""
    return f"- {prefix}{' '.join(memory.content.split())}"


class HTMMemory(BaseMemory):
    """A LlamaIndex chat memory over an :class:`htm_core.HTM`: recent turns + recall.

    Build it with :meth:`from_defaults`. Fields:

    Attributes:
        htm: the ``HTM`` instance (shared freely with other adapters and robots' code).
        session_id: this conversation: in each stored message's metadata and scope tag.
        user_id: the user the conversation belongs to (default none); with it, recall
            covers every session of this user and no other user's.
        shared_tags: memories with one of these tags (or below one) are recalled in every
            conversation too: knowledge shared on purpose (default none).
        shared: ``True`` recalls from the whole store (every user and session) instead
            of the conversation's scope. Default False.
        token_limit: what :meth:`get` returns stays within this many tokens (counted by
            ``htm.token_counter``, less the engine's ``initial_token_count``).
        recall_limit: how many long-term memories to recall per :meth:`get` at most.
        recall_strategy: ``"hybrid"`` (default), ``"vector"`` or ``"fulltext"``.
        recall_token_ratio: the recent conversation may use at most ``1 - ratio`` of the
            budget, so at least ``ratio`` is left for recalled memories.
        store_roles: roles whose messages are stored long-term (default user, assistant).
        importance: htm importance given to stored messages.
        tags: htm tags given to stored messages (besides the scope tag).
        memory_header: first line of the memory message.
        memory_role: role of the memory message (default ``system``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    htm: Any = Field(exclude=True, description="The htm_core.HTM instance.")
    session_id: str = Field(default="default")
    user_id: str | None = Field(default=None)
    shared: bool = Field(default=False)
    shared_tags: tuple[str, ...] = Field(default=())
    token_limit: int = Field(default=DEFAULT_TOKEN_LIMIT, gt=0)
    recall_limit: int = Field(default=5, ge=0, le=10_000)
    recall_strategy: str = Field(default="hybrid")
    recall_token_ratio: float = Field(default=0.3, ge=0.0, le=1.0)
    store_roles: tuple[str, ...] = Field(default=("user", "assistant"))
    importance: float = Field(default=1.0, ge=0.0, le=10.0)
    tags: tuple[str, ...] = Field(default=())
    memory_header: str = Field(default=DEFAULT_MEMORY_HEADER)
    memory_role: MessageRole = Field(default=MessageRole.SYSTEM)

    _messages: list[ChatMessage] = PrivateAttr(default_factory=list)
    _keys: list[str | None] = PrivateAttr(default_factory=list)
    _lock: Any = PrivateAttr(default_factory=threading.RLock)
    _scope: ChatScope = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        htm = data.get("htm")
        if not isinstance(htm, HTM):
            raise ValidationError(
                f"HTMMemory needs htm=<htm_core.HTM instance>, got {type(htm).__name__}; "
                "build it with HTMMemory.from_defaults(htm=HTM(...))")
        if "token_limit" in data:
            check_max_tokens(data["token_limit"], name="token_limit")
        recall_limit = data.get("recall_limit", 0)
        if isinstance(recall_limit, bool) or not isinstance(recall_limit, int) \
                or not 0 <= recall_limit <= 10_000:
            raise InvalidBudgetError(
                f"recall_limit must be an integer from 0 to 10,000, got {recall_limit!r}")
        if "importance" in data:
            check_importance(data["importance"])
        scope = ChatScope.of(session_id=data.get("session_id", "default"),
                             user_id=data.get("user_id"), shared=data.get("shared", False),
                             shared_tags=data.get("shared_tags"))
        super().__init__(**data)
        self._scope = scope

    @classmethod
    def class_name(cls) -> str:
        return "HTMMemory"

    @classmethod
    def from_defaults(
        cls,
        htm: HTM | None = None,
        chat_history: Sequence[ChatMessage] | None = None,
        llm: LLM | None = None,
        token_limit: int | None = None,
        session_id: str = "default",
        **kwargs: Any,
    ) -> HTMMemory:
        """Create the memory.

        Args:
            htm: the ``HTM`` to use; default ``HTM()`` configured from ``HTM_*`` variables.
            chat_history: messages to start the conversation with (stored like ``put``).
            llm: when given and ``token_limit`` is not, the limit is 75% of its context
                window.
            token_limit: token budget of :meth:`get` (default 3000).
            session_id: this conversation's name (stored metadata and scope tag).
            **kwargs: any other field (``recall_limit``, ``recall_strategy``...).
        """
        if token_limit is None:
            token_limit = (int(llm.metadata.context_window * DEFAULT_TOKEN_LIMIT_RATIO)
                           if llm is not None else DEFAULT_TOKEN_LIMIT)
        memory = cls(htm=htm if htm is not None else HTM(), token_limit=token_limit,
                     session_id=session_id, **kwargs)
        if chat_history:
            memory.set(list(chat_history))
        return memory

    # -- tokens ---------------------------------------------------------------------------

    @property
    def tokenizer_fn(self) -> Callable[[str], list[int]]:
        """A tokenizer whose ``len`` is ``htm.token_counter``'s count.

        Chat engines use ``len(memory.tokenizer_fn(text))`` to tell the memory how many
        tokens their own prefix messages take (``initial_token_count``).
        """
        count = self.htm.token_counter.count
        return lambda text: [0] * count(text)

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of the messages' text, by ``htm.token_counter``."""
        count = self.htm.token_counter.count
        return sum(count(message_text(m)) for m in messages)

    # -- reading --------------------------------------------------------------------------

    def get(self, input: str | None = None, initial_token_count: int = 0,
            **kwargs: Any) -> list[ChatMessage]:
        """The memory message (recalled memories) and the recent conversation.

        Args:
            input: what to recall memories for; default the latest user message.
            initial_token_count: tokens the caller's own messages already use; they are
                taken off ``token_limit``.

        Returns:
            ``[memory message] + recent messages``, oldest first, within the budget. The
            newest message is always returned, alone if it is larger than the budget (the
            LLM then reports the overflow, as with LlamaIndex's own memories).
        """
        if isinstance(initial_token_count, bool) or not isinstance(initial_token_count, int) \
                or initial_token_count < 0:
            raise InvalidBudgetError(
                f"initial_token_count must be a non-negative int, got {initial_token_count!r}")
        budget = self.token_limit - initial_token_count
        if budget <= 0:
            raise InvalidBudgetError(
                f"initial_token_count ({initial_token_count}) leaves nothing of token_limit "
                f"({self.token_limit}); raise token_limit or shorten the prefix messages")
        with self._lock:
            messages = list(self._messages)
            keys = list(self._keys)
        window, window_keys = self._recent(messages, keys, int(budget * (1 - self.recall_token_ratio)))
        if not window and messages:
            return messages[-1:]
        used = self.count_tokens(window)
        query = input if isinstance(input, str) and input.strip() else self._last_user_text(messages)
        memory_message = self._memory_message(query, budget - used, exclude=set(window_keys))
        return ([memory_message] if memory_message is not None else []) + window

    def get_all(self) -> list[ChatMessage]:
        """The whole conversation held in this process (since the last reset/set)."""
        with self._lock:
            return list(self._messages)

    def _recent(self, messages: list[ChatMessage], keys: list[str | None], budget: int
                ) -> tuple[list[ChatMessage], list[str]]:
        count = self.htm.token_counter.count
        total, start = 0, len(messages)
        for i in range(len(messages) - 1, -1, -1):
            tokens = count(message_text(messages[i]))
            if total + tokens > budget:
                break
            total += tokens
            start = i
        # A window must not open with an assistant or tool message cut from its user turn.
        while start < len(messages) - 1 and messages[start].role in (MessageRole.ASSISTANT,
                                                                      MessageRole.TOOL):
            start += 1
        return messages[start:], [k for k in keys[start:] if k is not None]

    @staticmethod
    def _last_user_text(messages: list[ChatMessage]) -> str:
        for message in reversed(messages):
            if message.role == MessageRole.USER and message_text(message).strip():
                return message_text(message)
        return ""

    def _memory_message(self, query: str, budget: int, *, exclude: set[str]
                        ) -> ChatMessage | None:
        if not query.strip() or self.recall_limit == 0 or budget <= 0:
            return None
        hits = self.htm.recall(query, limit=self.recall_limit, strategy=self.recall_strategy,
                               tags=self._scope.filter_tags())
        count = self.htm.token_counter.count
        lines: list[str] = []
        for hit in hits:
            if hit.memory.key in exclude:
                continue
            candidate = "\n".join([self.memory_header, *lines, memory_line(hit.memory)])
            if count(candidate) > budget:
                continue
            lines.append(memory_line(hit.memory))
        if not lines:
            return None
        return ChatMessage(role=self.memory_role, content="\n".join([self.memory_header, *lines]))

    # -- writing --------------------------------------------------------------------------

    def put(self, message: ChatMessage) -> None:
        """Add a message to the conversation; store it long-term if its role is stored."""
        key = self._store(message)
        with self._lock:
            self._messages.append(message)
            self._keys.append(key)

    def _item(self, message: ChatMessage) -> dict[str, Any] | None:
        """The ``htm.add`` arguments storing ``message``, or None if its role is not stored."""
        role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
        text = message_text(message)
        if role not in self.store_roles or not text.strip():
            return None
        metadata = {"role": role, "session_id": self.session_id, "source": "llama_index"}
        if self.user_id is not None:
            metadata["user_id"] = self.user_id
        return {"content": text, "key": f"llama_index:{uuid.uuid4().hex}",
                "importance": self.importance, "tags": [self._scope.tag, *self.tags],
                "metadata": metadata}

    def _store(self, message: ChatMessage) -> str | None:
        item = self._item(message)
        if item is None:
            return None
        return str(self.htm.add_many([item])[0].key)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the conversation with ``messages``.

        Messages equal (role and text) to the one at the same position in the current
        conversation are kept as they are; the others are stored long-term like
        :meth:`put`, all in one transaction (a rejected message stores none of them).
        Nothing is removed from long-term memory.
        """
        with self._lock:
            old = list(zip(self._messages, self._keys, strict=True))
        keys: list[str | None] = []
        items: list[tuple[int, dict[str, Any]]] = []
        for i, message in enumerate(messages):
            if i < len(old) and old[i][0].role == message.role \
                    and message_text(old[i][0]) == message_text(message):
                keys.append(old[i][1])
                continue
            keys.append(None)
            item = self._item(message)
            if item is not None:
                items.append((i, item))
        if items:
            stored = self.htm.add_many([item for _, item in items])
            for (i, _), memory in zip(items, stored, strict=True):
                keys[i] = str(memory.key)
        with self._lock:
            self._messages = list(messages)
            self._keys = keys

    def reset(self) -> None:
        """Clear the recent conversation and htm's working memory: never-forget.

        Long-term memory keeps every stored message (recall still finds them); only
        ``htm.forget(key, confirm=True)`` hides a memory. Note that the working memory
        cleared is the ``HTM`` instance's, shared by every adapter using that instance.
        """
        with self._lock:
            self._messages = []
            self._keys = []
        self.htm.clear_working_memory()

    # -- async twins ----------------------------------------------------------------------

    async def aget(self, input: str | None = None, initial_token_count: int = 0,
                   **kwargs: Any) -> list[ChatMessage]:
        """Async :meth:`get`."""
        return await asyncio.to_thread(self.get, input, initial_token_count, **kwargs)

    async def aget_all(self) -> list[ChatMessage]:
        """Async :meth:`get_all`."""
        return self.get_all()

    async def aput(self, message: ChatMessage) -> None:
        """Async :meth:`put`."""
        await asyncio.to_thread(self.put, message)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Async :meth:`put_messages`."""
        await asyncio.to_thread(self.put_messages, messages)

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Async :meth:`set`."""
        await asyncio.to_thread(self.set, messages)

    async def areset(self) -> None:
        """Async :meth:`reset`."""
        await asyncio.to_thread(self.reset)
