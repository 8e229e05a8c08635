"""``HTMMemory``: an :class:`htm_core.HTM` as a LlamaIndex chat memory.

A ``BaseMemory`` built with ``HTMMemory.from_defaults(htm=htm, user_id="alice",
session_id="chat-1")`` like LlamaIndex's own ``Memory``, for workflow agents
(``await agent.run(msg, memory=memory)``) and chat engines. It keeps nothing of its own:
``put`` stores each user and assistant message as an htm memory in the conversation's scope,
``get`` is one :meth:`htm_core.HTM.create_context` within ``token_limit`` (this
conversation's turns as messages, the rest as one system message), and a new ``HTMMemory``
over the same store continues the conversation. See docs/llamaindex.md ("Agents and chat
engines: ``HTMMemory``").
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import BaseMemory

from htm_core import HTM, Memory, run_async
from htm_core.errors import InvalidBudgetError, ValidationError
from htm_core.validation import check_importance, check_max_tokens

from .._options import refuse_unknown
from .._scope import ChatScope
from ._messages import DEFAULT_MEMORY_HEADER, memory_line, message_text, recall_kinds

__all__ = ["DEFAULT_MEMORY_HEADER", "HTMMemory"]

#: Share of an LLM's context window ``from_defaults(llm=...)`` allows (as LlamaIndex does).
DEFAULT_TOKEN_LIMIT_RATIO = 0.75
_ROLES = ("user", "assistant", "system")
_PAGE = 1_000


class HTMMemory(BaseMemory):
    """A LlamaIndex chat memory whose conversation and context are htm's.

    Attributes:
        htm: the ``HTM`` instance (shared freely with other adapters).
        session_id / user_id: the conversation, and the user it belongs to (default none);
            with a user the context covers every session of that user, no other user's.
        shared_tags: memories with one of these tags (or below one) join every
            conversation's context: knowledge shared on purpose. ``shared=True`` takes
            the context from the whole store.
        token_limit: :meth:`get` stays within this many tokens (``htm.token_counter``),
            less the engine's ``initial_token_count``; default htm's working-memory budget.
        recall_limit / recall_strategy: recall per :meth:`get` (0: working memory only).
        kinds: the memories other than this conversation's turns that join the context
            are of these kinds only (``["fact", "preference"]``, see docs/consolidation.md,
            "Kinds"): recall looks for them alone, inside the search and the scope.
            Default every kind (recall: every kind but ``digest``).
        store_roles: roles whose messages are stored (of user, assistant, system).
        importance / tags: given to stored messages (besides the scope tag).
        memory_header / memory_role: first line and role of the memory message.

    Any other keyword raises :class:`~htm_core.errors.ValidationError`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    htm: Any = Field(exclude=True, description="The htm_core.HTM instance.")
    session_id: str = Field(default="default")
    user_id: str | None = Field(default=None)
    shared: bool = Field(default=False)
    shared_tags: tuple[str, ...] = Field(default=())
    token_limit: int | None = Field(default=None, gt=0)
    recall_limit: int = Field(default=5, ge=0, le=10_000)
    recall_strategy: str = Field(default="hybrid")
    kinds: tuple[str, ...] | None = Field(default=None)
    store_roles: tuple[str, ...] = Field(default=("user", "assistant"))
    importance: float = Field(default=1.0, ge=0.0, le=10.0)
    tags: tuple[str, ...] = Field(default=())
    memory_header: str = Field(default=DEFAULT_MEMORY_HEADER)
    memory_role: MessageRole = Field(default=MessageRole.SYSTEM)

    _scope: ChatScope = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        refuse_unknown("HTMMemory", data, type(self).model_fields)
        htm = data.get("htm")
        if not isinstance(htm, HTM):
            raise ValidationError(
                f"HTMMemory needs htm=<htm_core.HTM instance>, got {type(htm).__name__}; "
                "build it with HTMMemory.from_defaults(htm=HTM(...))")
        if data.get("token_limit") is not None:
            check_max_tokens(data["token_limit"], name="token_limit")
        recall_limit = data.get("recall_limit", 0)
        if isinstance(recall_limit, bool) or not isinstance(recall_limit, int) \
                or not 0 <= recall_limit <= 10_000:
            raise InvalidBudgetError(
                f"recall_limit must be an integer from 0 to 10,000, got {recall_limit!r}")
        if "importance" in data:
            check_importance(data["importance"])
        roles = set(data.get("store_roles", ())) - set(_ROLES)
        if roles:
            raise ValidationError(f"store_roles takes roles among {list(_ROLES)}, got "
                                  f"{sorted(roles)} (tool messages stay with the agent's run)")
        scope = ChatScope.of(session_id=data.get("session_id", "default"),
                             user_id=data.get("user_id"), shared=data.get("shared", False),
                             shared_tags=data.get("shared_tags"))
        if data.get("kinds") is not None:
            data["kinds"] = recall_kinds(data["kinds"], "HTMMemory")
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
        """Create the memory: ``htm`` (default ``HTM()`` from ``HTM_*`` variables), the
        conversation's ``session_id``, and any field as a keyword. ``chat_history`` is
        stored as by :meth:`set`. With ``llm`` and no ``token_limit``, the limit is the
        smaller of htm's working-memory budget and 75% of the LLM's context window.
        """
        htm = htm if htm is not None else HTM()
        if token_limit is None and llm is not None:
            window = int(llm.metadata.context_window * DEFAULT_TOKEN_LIMIT_RATIO)
            token_limit = min(window, htm.working_memory.max_tokens)
        memory = cls(htm=htm, token_limit=token_limit, session_id=session_id, **kwargs)
        if chat_history:
            memory.set(list(chat_history))
        return memory

    @property
    def tokenizer_fn(self) -> Callable[[str], list[int]]:
        """A tokenizer whose ``len`` is ``htm.token_counter``'s count (chat engines use it
        to tell the memory what their own prefix messages take: ``initial_token_count``)."""
        count = self.htm.token_counter.count
        return lambda text: [0] * count(text)

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of the messages' text, by ``htm.token_counter``."""
        count = self.htm.token_counter.count
        return sum(count(message_text(m)) for m in messages)

    def get(self, input: str | ChatMessage | None = None, initial_token_count: int = 0,
            **kwargs: Any) -> list[ChatMessage]:
        """The context as messages: ``[memory message] + this conversation's turns``.

        ``input`` is what to recall for (default the latest user message);
        ``initial_token_count`` (tokens of the caller's own messages) is taken off the
        budget. When the newest turn is larger than the whole budget it comes alone, for
        the LLM to report the overflow, as with LlamaIndex's own memories.
        """
        if isinstance(initial_token_count, bool) or not isinstance(initial_token_count, int) \
                or initial_token_count < 0:
            raise InvalidBudgetError(
                f"initial_token_count must be a non-negative int, got {initial_token_count!r}")
        limit = self.token_limit or self.htm.working_memory.max_tokens
        budget = limit - initial_token_count
        if budget <= 0:
            raise InvalidBudgetError(
                f"initial_token_count ({initial_token_count}) leaves nothing of token_limit "
                f"({limit}); raise token_limit or shorten the prefix messages")
        if isinstance(input, ChatMessage):
            input = message_text(input)
        if not (isinstance(input, str) and input.strip()):
            input = next((m.content for m in self._latest() if m.metadata.get("role") == "user"),
                         None)
        tags = self._scope.filter_tags()
        context = self.htm.create_context(
            "recent", max_tokens=budget, query=input if self.recall_limit else None,
            recall_limit=max(self.recall_limit, 1), recall_strategy=self.recall_strategy,
            tags=tags, scope_working=tags is not None, recall_kinds=self.kinds)
        turns = sorted((m for m in context.memories if self._is_turn(m)),
                       key=lambda m: (m.created_at, m.id))
        if not turns:  # the newest turn alone when it is larger than the whole budget
            turns = [m for m in self._latest()[:1] if m.token_count > context.budget]
        while len(turns) > 1 and turns[0].metadata["role"] == "assistant":
            turns.pop(0)  # a window must not open with an answer cut from its question
        window = [ChatMessage(role=m.metadata["role"], content=m.content) for m in turns]
        lines = [memory_line(m) for m in context.memories if not self._is_turn(m)
                 and (self.kinds is None or m.kind in self.kinds)]
        count = self.htm.token_counter.count
        used = self.count_tokens(window)
        while lines and used + count("\n".join([self.memory_header, *lines])) > budget:
            lines.pop()  # the least relevant first (recall order, then working memory's)
        if not lines:
            return window
        text = "\n".join([self.memory_header, *lines])
        return [ChatMessage(role=self.memory_role, content=text), *window]

    def _latest(self) -> list[Memory]:
        """The conversation's newest turns (at most 20), newest first."""
        page = self.htm.list(tags=[self._scope.tag], order="created_at", descending=True,
                             limit=20)
        return [m for m in page.memories if self._is_turn(m)]

    def _is_turn(self, memory: Memory) -> bool:
        """Whether ``memory`` is a message of this conversation (scope tag and a role)."""
        return self._scope.tag in memory.tags and memory.metadata.get("role") in _ROLES

    def get_all(self) -> list[ChatMessage]:
        """The whole stored conversation, oldest first (read from the store, so a new
        process sees it; forgotten messages are left out)."""
        turns: list[Memory] = []
        cursor: str | None = None
        while True:
            page = self.htm.list(tags=[self._scope.tag], order="created_at", limit=_PAGE,
                                 cursor=cursor)
            turns.extend(m for m in page.memories if self._is_turn(m))
            cursor = page.next_cursor
            if cursor is None:
                return [ChatMessage(role=m.metadata["role"], content=m.content) for m in turns]

    def _item(self, message: ChatMessage) -> dict[str, Any] | None:
        """The ``htm.add`` arguments storing ``message``, or None if it is not stored."""
        role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
        text = message_text(message)
        if role not in self.store_roles or not text.strip():
            return None
        metadata = {"role": role, "session_id": self.session_id, "source": "llama_index"}
        if self.user_id is not None:
            metadata["user_id"] = self.user_id
        return {"content": text, "key": f"{self._scope.tag}:llama_index:{uuid.uuid4().hex}",
                "importance": self.importance, "tags": [self._scope.tag, *self.tags],
                "metadata": metadata}

    def put(self, message: ChatMessage) -> None:
        """Store ``message`` if its role is stored and it has text."""
        self.put_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Store the messages that are stored (see :meth:`put`), in one transaction."""
        items = [item for item in map(self._item, messages) if item is not None]
        if items:
            self.htm.add_many(items)

    def set(self, messages: list[ChatMessage]) -> None:
        """Make the conversation ``messages``: the ones not already stored at the same
        position (same role and text) are stored, in one transaction; nothing stored is
        removed (htm never forgets unless told to)."""
        stored = self.get_all()
        roles = [m.role for m in stored]
        texts = [message_text(m) for m in stored]
        pending = [m for m in messages if self._item(m) is not None]
        start = 0
        while start < min(len(pending), len(stored)) and pending[start].role == roles[start] \
                and message_text(pending[start]) == texts[start]:
            start += 1
        self.put_messages(pending[start:])

    def reset(self) -> None:
        """Empty htm's working memory (the ``HTM`` instance's, shared by every adapter on
        it); long-term memory keeps every message, and recall still finds them."""
        self.htm.clear_working_memory()

    async def aget(self, input: str | ChatMessage | None = None, initial_token_count: int = 0,
                   **kwargs: Any) -> list[ChatMessage]:
        """Async :meth:`get`."""
        return await run_async(self.htm, self.get, input, initial_token_count)

    async def aget_all(self) -> list[ChatMessage]:
        """Async :meth:`get_all`."""
        return await run_async(self.htm, self.get_all)

    async def aput(self, message: ChatMessage) -> None:
        """Async :meth:`put`."""
        await run_async(self.htm, self.put, message)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Async :meth:`put_messages`."""
        await run_async(self.htm, self.put_messages, messages)

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Async :meth:`set`."""
        await run_async(self.htm, self.set, messages)

    async def areset(self) -> None:
        """Async :meth:`reset`."""
        await run_async(self.htm, self.reset)
