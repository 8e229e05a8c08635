"""``HTMMiddleware``: htm memory for LangChain 1.x agents (``langchain.agents.create_agent``).

``create_agent(model, tools=htm_tools(htm), middleware=[HTMMiddleware(htm)])``: before each
model call the system message gains one ``<htm_memory>`` block (what htm recalls for the
latest user message, then its working-memory context, within ``max_tokens``, leaving out the
request's own messages); after it, the run's new turns are stored, one memory per message,
keyed by the message id. Turns and block are scoped to the run's user and thread
(:mod:`htm_integrations.langchain._agent_scope`). See docs/langchain.md ("Agents:
``HTMMiddleware``").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

from htm_core import run_async
from htm_core.errors import ValidationError, missing_extra
from htm_core.models import Memory
from htm_core.recall import check_recall_strategy
from htm_core.validation import check_importance, check_key, check_limit, check_max_tokens
from htm_core.working.context import SEPARATOR, check_strategy, fit

from .._scope import ChatScope, id_slug
from ._agent_scope import AgentScope

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
    from langchain.agents.middleware.types import PrivateStateAttr
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
    )
    from typing_extensions import NotRequired
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langchain", "langchain") from None

__all__ = ["BLOCK_END", "BLOCK_START", "HTMAgentState", "HTMMiddleware"]

BLOCK_START = ("<htm_memory>\nWhat you remember from earlier conversations (htm long-term "
               "memory; it may be incomplete, use it only where relevant):")
BLOCK_END = "</htm_memory>"
_LABELS = {"human": "Human", "ai": "AI", "tool": "Tool"}


class HTMAgentState(AgentState[Any]):
    """The agent state with the id of the last message the middleware has looked at."""

    htm_seen: NotRequired[Annotated[str | None, PrivateStateAttr]]


def _text(message: BaseMessage) -> str:
    return message.text.strip()


class HTMMiddleware(AgentMiddleware[HTMAgentState, Any, Any]):
    """Agent middleware that gives a ``create_agent`` agent htm memory.

    Args:
        htm: the :class:`htm_core.HTM` to recall from and store into (its robot writes).
        max_tokens: the budget of the memory block, markers included (default 2,000).
        recall_limit: how many memories to recall for the latest user message (default 5).
        recall_strategy: ``"hybrid"`` (default), ``"vector"``, ``"fulltext"`` or ``"tiered"``.
        recall_robot: take only memories written by this robot (default every robot).
        context_strategy: how working memory fills the rest of the block:
            ``"balanced"`` (default), ``"recent"`` or ``"important"``.
        importance: importance of the stored turns (0 to 10, default 1.0).
        user_id: a fixed user, when the run's context and config name none.
        session_id: a fixed session; default the run's ``thread_id``.
        user_key: the key of the user id in the run's context or ``configurable``
            (default ``"user_id"``).
        shared: ``True`` builds the block from the whole store (every user).
        shared_tags: memories with one of these tags are visible to every user too.
        store_tool_messages: also store tool calls and tool results (default False).
        store_assistant_turns: store the assistant's answers (default True); ``False``
            stores the user's turns only, so answers that repeat tool output or recalled
            memories never come back in recall.
    """

    state_schema = HTMAgentState

    def __init__(self, htm: Any, *, max_tokens: int = 2_000, recall_limit: int = 5,
                 recall_strategy: str = "hybrid", recall_robot: str | None = None,
                 context_strategy: str = "balanced", importance: float = 1.0,
                 user_id: str | None = None, session_id: str | None = None,
                 user_key: str = "user_id", shared: bool = False,
                 shared_tags: Iterable[str] | str | None = None,
                 store_tool_messages: bool = False,
                 store_assistant_turns: bool = True) -> None:
        super().__init__()
        self.htm = htm
        self.tools = []
        self.max_tokens = check_max_tokens(max_tokens)
        self.recall_limit = check_limit(recall_limit)
        self.recall_strategy = check_recall_strategy(recall_strategy)
        self.recall_robot = None if recall_robot is None else check_key(recall_robot)
        check_strategy(context_strategy)
        self.context_strategy = context_strategy
        self.importance = check_importance(importance)
        for name, flag in (("store_tool_messages", store_tool_messages),
                           ("store_assistant_turns", store_assistant_turns)):
            if not isinstance(flag, bool):
                raise ValidationError(f"{name} must be True or False, got {flag!r}")
        self.store_tool_messages = store_tool_messages
        self.store_assistant_turns = store_assistant_turns
        self.scope = AgentScope.of(user_id=user_id, session_id=session_id, user_key=user_key,
                                   shared=shared, shared_tags=shared_tags)
        count = htm.token_counter.count
        self._frame_tokens = count(f"{BLOCK_START}\n\n{BLOCK_END}")
        # user message id -> keys of the memories its block held, until the turn is stored
        self._recalled: OrderedDict[str, list[str]] = OrderedDict()
        self._recalled_lock = threading.Lock()
        if self._frame_tokens >= self.max_tokens:
            raise ValidationError(
                f"max_tokens={max_tokens} leaves no room for memories: the block's markers "
                f"alone take {self._frame_tokens} tokens; give at least a few hundred")

    def __repr__(self) -> str:
        return f"HTMMiddleware(robot={self.htm.robot!r}, max_tokens={self.max_tokens})"

    # -- before the model: the memory block ------------------------------------------

    def memory_block(self, messages: Sequence[BaseMessage], scope: ChatScope) -> str | None:
        """The block for a request with ``messages`` in ``scope`` (None when empty)."""
        query = next((_text(m) for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        present = {m.id for m in messages if m.id}
        limit = self.max_tokens - self._frame_tokens
        ask = {"strategy": self.context_strategy, "tags": scope.filter_tags(),
               "robot": self.recall_robot, "scope_working": not scope.shared}
        context = self.htm.create_context(
            max_tokens=limit, query=query or None, recall_limit=self.recall_limit,
            recall_strategy=self.recall_strategy, **ask)

        def wanted(memory: Any) -> bool:
            return (isinstance(memory, Memory) and memory.metadata.get("message_id") not in present
                    and self.recall_robot in (None, memory.robot))

        kept = [m for m in context.memories if wanted(m)]
        dropped = sum(m.token_count for m in context.memories) - sum(m.token_count for m in kept)
        if dropped:  # refill the room the left-out memories took, from working memory
            wider = min(limit + dropped, self.htm.working_memory.max_tokens)
            kept += [m for m in self.htm.create_context(max_tokens=wider, **ask).memories
                     if wanted(m)]
        chosen, text, _ = fit(kept, context.budget, count=self.htm.token_counter.count,
                              separator_tokens=self.htm.token_counter.count(SEPARATOR))
        asked = next((m.id for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        if asked:
            self._remember_recalled(asked, [m.key for m in chosen])
        return f"{BLOCK_START}\n{text}\n{BLOCK_END}" if chosen else None

    def _remember_recalled(self, message_id: str, keys: list[str]) -> None:
        """Keep what the block for user message ``message_id`` held until it is stored (the
        newest 1,000 messages: one answered in another process is simply not recorded)."""
        with self._recalled_lock:
            self._recalled[message_id] = keys
            self._recalled.move_to_end(message_id)
            while len(self._recalled) > 1_000:
                self._recalled.popitem(last=False)

    def _take_recalled(self, message_id: str) -> list[str] | None:
        with self._recalled_lock:
            return self._recalled.pop(message_id, None)

    def _request_with_block(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        block = self.memory_block(request.messages, self.scope.of_runtime(request.runtime))
        if block is None:
            return request
        system = request.system_message
        if system is None:
            return request.override(system_message=SystemMessage(content=block))
        if isinstance(system.content, str):
            content: Any = f"{system.content}\n\n{block}" if system.content else block
        else:
            content = [*system.content, {"type": "text", "text": block}]
        return request.override(system_message=system.model_copy(update={"content": content}))

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        """Call the model with htm's memory block in the system message."""
        return handler(self._request_with_block(request))

    async def awrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        """Async :meth:`wrap_model_call`."""
        return await handler(await run_async(self.htm, self._request_with_block, request))

    # -- after the model: store the new turns ----------------------------------------

    def _start(self, messages: Sequence[BaseMessage], seen: str | None) -> int:
        """Where the messages not looked at yet begin: after ``seen``, else (a run with
        no checkpointed marker) the trailing user messages before the answer."""
        ids = [m.id for m in messages]
        if seen is not None and seen in ids:
            return ids.index(seen) + 1
        start = len(messages) - 1
        while start > 0 and not isinstance(messages[start - 1], AIMessage | ToolMessage):
            start -= 1
        return start

    def _keeps(self, message: BaseMessage) -> bool:
        if not _text(message) and not self.store_tool_messages:
            return False
        if isinstance(message, HumanMessage):
            return True
        if isinstance(message, AIMessage):
            return self.store_tool_messages if message.tool_calls else self.store_assistant_turns
        return isinstance(message, ToolMessage) and self.store_tool_messages

    def new_turns(self, state: Any, scope: ChatScope) -> list[dict[str, Any]]:
        """The memories (``add_many`` items) for the messages of ``state`` not stored yet."""
        messages = state["messages"]
        start = self._start(messages, state.get("htm_seen"))
        items = []
        for message in messages[start:]:
            if not self._keeps(message) or not message.id:
                continue
            recalled = (self._take_recalled(message.id)
                        if isinstance(message, HumanMessage) else None)
            items.append({
                "content": f"{_LABELS.get(message.type, message.type)}: "
                           f"{_text(message) or '(no text)'}",
                "key": f"{scope.tag}:msg:{id_slug(message.id, name='message id')}",
                "importance": self.importance,
                "tags": [scope.tag, f"chat:role:{message.type}"],
                "metadata": {"message_id": message.id, "role": message.type,
                             "session_id": scope.session, "user_id": scope.user,
                             "message": message_to_dict(message),
                             **({"recalled": recalled} if recalled is not None else {})},
            })
        return items

    def _store(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        if not messages:
            return None
        items = self.new_turns(state, self.scope.of_runtime(runtime))
        if items:
            self.htm.add_many(items)
        return {"htm_seen": messages[-1].id}

    def after_model(self, state: HTMAgentState, runtime: Any) -> dict[str, Any] | None:
        """Store the run's new user turns and the answer (each message once)."""
        return self._store(state, runtime)

    async def aafter_model(self, state: HTMAgentState, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`after_model`."""
        return await run_async(self.htm, self._store, state, runtime)
