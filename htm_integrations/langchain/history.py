"""``HTMChatMessageHistory``: a LangChain chat history kept in htm's long-term store.

``RunnableWithMessageHistory(chain, lambda sid: HTMChatMessageHistory(htm=htm,
session_id=sid), ...)``. Each message is one memory (key ``chat:<session>:<seq>``, content
``"<Role>: <text>"``, tags ``chat:session:<session>`` and ``chat:role:<type>``, the whole
message in its metadata), so the conversation is durable, in order, and searchable by recall.
With ``user_id`` the session belongs to that user. ``clear()`` forgets, recoverably. Keys,
tags, ids and concurrency: docs/langchain.md ("Message history: ``HTMChatMessageHistory``").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from htm_core import run_async
from htm_core.errors import ValidationError, missing_extra
from htm_core.models import Memory
from htm_core.validation import check_importance

from .._scope import ChatScope, id_slug

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langchain-core", "langchain") from None

__all__ = ["HTMChatMessageHistory", "message_content", "session_slug"]

_ROLE_LABELS = {"human": "Human", "ai": "AI", "system": "System", "tool": "Tool",
                "function": "Function", "chat": "Chat"}
#: Messages read per query.
_PAGE = 1_000


def session_slug(session_id: str) -> str:
    """The form of ``session_id`` used in keys and tags (itself, or ``h-`` + a hash)."""
    return id_slug(session_id)


def message_content(message: BaseMessage, *, human_prefix: str = "Human",
                    ai_prefix: str = "AI") -> str:
    """The text a message is remembered as: ``"<Role>: <text>"``.

    A message with no text (an AI message holding only tool calls) is remembered as
    ``"<Role>: (no text)"``; the message itself is kept whole in the metadata.
    """
    labels = {**_ROLE_LABELS, "human": human_prefix, "ai": ai_prefix}
    label = labels.get(message.type, message.type)
    text = message.text.strip()
    return f"{label}: {text if text else '(no text)'}"


class HTMChatMessageHistory(BaseChatMessageHistory):
    """The messages of one conversation (``session_id``), stored as htm memories.

    Args:
        htm: the :class:`htm_core.HTM` to store into; messages are written by its robot.
        session_id: which conversation; any non-empty string.
        importance: the importance given to each message (0 to 10, default 1.0).
        human_prefix: the role label of human messages in the remembered text.
        ai_prefix: the role label of AI messages in the remembered text.
        user_id: the user the session belongs to (default none: the session id alone
            names the conversation).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from htm_core import HTM
        >>> htm = HTM(database_url=":memory:", embedder="hashing")
        >>> history = HTMChatMessageHistory(htm=htm, session_id="s1")
        >>> history.add_messages([HumanMessage("hi"), AIMessage("hello")])
        >>> [m.content for m in history.messages]
        ['hi', 'hello']
    """

    def __init__(self, *, htm: Any, session_id: str, importance: float = 1.0,
                 human_prefix: str = "Human", ai_prefix: str = "AI",
                 user_id: str | None = None) -> None:
        self.htm = htm
        self.human_prefix = human_prefix
        self.ai_prefix = ai_prefix
        self.session_id = session_id
        self.user_id = user_id
        self.scope = ChatScope.of(session_id=session_id, user_id=user_id)
        self.slug = session_slug(session_id)
        self.importance = check_importance(importance)
        self.session_tag = self.scope.tag
        self._key_prefix = (f"chat:{self.slug}" if self.scope.user is None
                            else f"chat:user:{self.scope.user}:{self.slug}")

    def __repr__(self) -> str:
        user = f", user_id={self.user_id!r}" if self.user_id is not None else ""
        return (f"HTMChatMessageHistory(session_id={self.session_id!r}{user}, "
                f"robot={self.htm.robot!r})")

    def key_for(self, seq: int) -> str:
        """The memory key of message number ``seq`` (0-based) of this session."""
        return f"{self._key_prefix}:{seq:08d}"

    def _stored(self, *, include_forgotten: bool = False, newest_first: bool = False,
                limit: int = _PAGE) -> Iterator[Memory]:
        """The session's memories in message order (key order), a page per query: keys
        below the session's prefix and carrying its tag, so another session whose keys
        share the prefix never joins."""
        cursor: str | None = None
        while True:
            page = self.htm.list(key_prefix=f"{self._key_prefix}:", tags=[self.session_tag],
                                 include_forgotten=include_forgotten, order="key",
                                 descending=newest_first, limit=limit, cursor=cursor)
            yield from page.memories
            cursor = page.next_cursor
            if cursor is None:
                return

    def _next_seq(self) -> int:
        """The next free sequence number: one after the session's last key (forgotten
        messages included, so numbering continues after ``clear()``)."""
        last = next(self._stored(include_forgotten=True, newest_first=True, limit=1), None)
        return 0 if last is None else int(last.key.rsplit(":", 1)[1]) + 1

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages in the order they were added (forgotten ones left out)."""
        return messages_from_dict([m.metadata["message"] for m in self._stored()])

    async def aget_messages(self) -> list[BaseMessage]:
        """Async :attr:`messages`."""
        return await run_async(self.htm, lambda: self.messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages, all in one transaction (all stored or none)."""
        messages = list(messages)
        if not messages:
            return
        for message in messages:
            if not isinstance(message, BaseMessage):
                raise ValidationError(
                    f"add_messages takes LangChain BaseMessage objects, got "
                    f"{type(message).__name__}; wrap text in HumanMessage/AIMessage")
        seq = self._next_seq()
        items = []
        for offset, message in enumerate(messages):
            n = seq + offset
            items.append({
                "content": message_content(message, human_prefix=self.human_prefix,
                                           ai_prefix=self.ai_prefix),
                "key": self.key_for(n),
                "importance": self.importance,
                "tags": [self.session_tag, f"chat:role:{message.type}"],
                "metadata": {"session_id": self.session_id, "seq": n, "role": message.type,
                             "message": message_to_dict(message),
                             **({"user_id": self.user_id} if self.user_id is not None else {})},
            })
        self.htm.add_many(items)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async :meth:`add_messages`."""
        await run_async(self.htm, self.add_messages, list(messages))

    def clear(self) -> None:
        """Forget every message of the session, recoverably (never-forget).

        Each message is hidden with ``htm.forget(key, confirm=True)``: it leaves this
        history and recall, and ``htm.restore(key)`` brings it back (keys are
        :meth:`key_for` ``(seq)``) until ``htm.purge(confirm=True)`` deletes it for good.
        """
        for memory in list(self._stored()):
            self.htm.forget(memory.key, confirm=True)

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await run_async(self.htm, self.clear)
