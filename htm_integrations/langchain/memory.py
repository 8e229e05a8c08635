"""``HTMMemory``: htm as the classic LangChain ``BaseMemory``, for chains such as
``ConversationChain`` and ``LLMChain`` (``langchain-classic``).

``ConversationChain(llm=llm, memory=HTMMemory(htm=htm, session_id="chat-1"))``: before each
call the prompt variable ``history`` receives one :meth:`htm_core.HTM.create_context` (what
htm recalls for the new input, then its working memory), within ``max_tokens``; after it the
human and the AI turn are stored as two memories through
:class:`~htm_integrations.langchain.HTMChatMessageHistory`. Both are scoped to the session
(or the user with ``user_id``) unless ``shared=True``. See docs/langchain.md ("Classic
chains: ``HTMMemory``").
"""

from __future__ import annotations

from typing import Any

from htm_core import run_async
from htm_core.errors import ValidationError, missing_extra
from htm_core.models import Memory
from htm_core.recall import check_recall_strategy
from htm_core.validation import (
    check_importance,
    check_key,
    check_limit,
    check_max_tokens,
    check_tags,
)
from htm_core.working.context import check_strategy

from .._options import refuse_unknown
from .._scope import ChatScope
from .history import HTMChatMessageHistory

try:
    from langchain_classic.base_memory import BaseMemory
    from langchain_classic.memory.utils import get_prompt_input_key
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        messages_from_dict,
    )
    from pydantic import ConfigDict, PrivateAttr
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langchain-classic", "langchain") from None

__all__ = ["HTMMemory"]


class HTMMemory(BaseMemory):
    """A classic LangChain memory backed by an :class:`htm_core.HTM`.

    Args:
        htm: the memory to read and write; turns are written by its robot.
        memory_key: the prompt variable filled with the history (default ``"history"``).
        input_key: which input is the human turn; default: the only input that is not a
            memory variable (as LangChain's own memories decide).
        output_key: which output is the AI turn; default: the only output, else
            ``"output"``.
        return_messages: give ``BaseMessage`` objects instead of one string (chat
            models). Turns come back as ``HumanMessage``/``AIMessage``; other memories
            (added directly to htm) as ``SystemMessage``.
        max_tokens: the token budget of the history, counted by htm's token counter
            (less htm's context safety margin); default None: htm's working-memory budget.
        recall_limit: how many memories to recall for each new input (default 5).
        recall_strategy: ``"hybrid"`` (default), ``"vector"``, ``"fulltext"`` or ``"tiered"``.
        recall_tags: narrow the history to memories with one of these tags (or below
            one). They must lie within the scope (for instance one session,
            ``["chat:user:<user>:session:<id>"]``, of a user-scoped memory) unless
            ``shared=True``; default the scope's own tag.
        recall_robot: recall only memories written by this robot; default every robot
            (robots on one store share a conversation that both serve).
        context_strategy: how working memory fills the rest of the budget:
            ``"recent"`` (default: the latest turns), ``"balanced"`` or ``"important"``.
        importance: importance of the stored turns (0 to 10, default 1.0).
        session_id: the conversation the turns belong to (default ``"default"``); a
            multi-user application gives each conversation its own.
        user_id: the user the conversation belongs to; with it the history covers every
            session of this user (and only this user). Default none: the session alone.
        shared_tags: memories with one of these tags (or below one) are part of every
            conversation's history too: knowledge the application shares on purpose
            (``htm.add(..., tags=["kb"])`` with ``shared_tags=["kb"]``). Default none.
        shared: ``True`` lifts the scope: recall and context come from the whole store
            (every user and session; ``recall_tags`` still narrow recall). Default False.
        human_prefix / ai_prefix: role labels in the remembered text.

    The history is what recall finds for the new input (best first), then the
    working-memory context, each memory once, as long as the joined text fits the budget;
    it is shown in the order the memories were made. Recall and context are scoped as
    described above, so what the same ``HTM`` holds for other conversations stays out.

    Example:
        >>> from htm_core import HTM
        >>> htm = HTM(database_url=":memory:", embedder="hashing")
        >>> memory = HTMMemory(htm=htm)
        >>> memory.save_context({"input": "My name is Ada"}, {"output": "Hello Ada"})
        >>> memory.load_memory_variables({"input": "what is my name?"})["history"]
        'Human: My name is Ada\\nAI: Hello Ada'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    htm: Any
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False
    max_tokens: int | None = None
    recall_limit: int = 5
    recall_strategy: str = "hybrid"
    recall_tags: list[str] | None = None
    recall_robot: str | None = None
    context_strategy: str = "recent"
    importance: float = 1.0
    session_id: str = "default"
    user_id: str | None = None
    shared: bool = False
    shared_tags: list[str] | None = None
    human_prefix: str = "Human"
    ai_prefix: str = "AI"
    _history: HTMChatMessageHistory | None = PrivateAttr(default=None)
    _scope: ChatScope = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        """Build the memory; settings are checked by htm's rules and raise htm's errors
        (an unknown keyword too)."""
        refuse_unknown("HTMMemory", data, type(self).model_fields)
        super().__init__(**data)
        if self.max_tokens is not None:
            check_max_tokens(self.max_tokens)
        check_limit(self.recall_limit)
        check_importance(self.importance)
        check_recall_strategy(self.recall_strategy)
        check_tags(self.recall_tags)
        self._scope = ChatScope.of(session_id=self.session_id, user_id=self.user_id,
                                   shared=self.shared, shared_tags=self.shared_tags)
        self._scope.filter_tags(self.recall_tags)
        if self.recall_robot is not None:
            check_key(self.recall_robot)
        check_strategy(self.context_strategy)

    @property
    def memory_variables(self) -> list[str]:
        """The one prompt variable this memory fills: ``memory_key``."""
        return [self.memory_key]

    @property
    def chat_history(self) -> HTMChatMessageHistory:
        """The message history the turns are saved through."""
        if self._history is None:
            self._history = HTMChatMessageHistory(
                htm=self.htm, session_id=self.session_id, importance=self.importance,
                human_prefix=self.human_prefix, ai_prefix=self.ai_prefix, user_id=self.user_id)
        return self._history

    def _input_text(self, inputs: dict[str, Any]) -> str:
        key = self.input_key or get_prompt_input_key(inputs, self.memory_variables)
        if key not in inputs:
            raise ValidationError(f"HTMMemory input_key {key!r} is not among the inputs "
                                  f"{sorted(inputs)}; set input_key to one of them")
        value = inputs[key]
        return value.text if isinstance(value, BaseMessage) else str(value)

    def selected_memories(self, query: str) -> list[Memory]:
        """The memories the history is made of for ``query``, in the order they were made
        (within the scope: recall and the working-memory part alike)."""
        tags = self._scope.filter_tags(self.recall_tags)
        context = self.htm.create_context(
            strategy=self.context_strategy, max_tokens=self.max_tokens,
            query=query if query.strip() else None, recall_limit=self.recall_limit,
            recall_strategy=self.recall_strategy, tags=tags, robot=self.recall_robot,
            scope_working=not self.shared)
        chosen = [m for m in context.memories if isinstance(m, Memory)]
        return sorted(chosen, key=lambda m: (m.created_at, m.id))

    def _as_messages(self, memories: list[Memory]) -> list[BaseMessage]:
        out: list[BaseMessage] = []
        for memory in memories:
            serialised = memory.metadata.get("message")
            if isinstance(serialised, dict):
                out.extend(messages_from_dict([serialised]))
            else:
                out.append(SystemMessage(content=memory.content))
        return out

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """``{memory_key: history}`` for the new input: recalled + working memory, in budget."""
        memories = self.selected_memories(self._input_text(inputs))
        if self.return_messages:
            return {self.memory_key: self._as_messages(memories)}
        return {self.memory_key: "\n".join(m.content for m in memories)}

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async :meth:`load_memory_variables`."""
        return await run_async(self.htm, self.load_memory_variables, inputs)

    def _output_value(self, outputs: dict[str, Any]) -> Any:
        if self.output_key is not None:
            key = self.output_key
        elif len(outputs) == 1:
            key = next(iter(outputs))
        elif "output" in outputs:
            key = "output"
        else:
            raise ValidationError(f"HTMMemory got several outputs {sorted(outputs)} and "
                                  "cannot tell which is the AI turn; set output_key")
        if key not in outputs:
            raise ValidationError(f"HTMMemory output_key {key!r} is not among the outputs "
                                  f"{sorted(outputs)}; set output_key to one of them")
        return outputs[key]

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Store the human turn and the AI turn as two memories (one transaction)."""
        human = self._input_text(inputs)
        output = self._output_value(outputs)
        ai = output if isinstance(output, AIMessage) else AIMessage(
            content=output.text if isinstance(output, BaseMessage) else str(output))
        self.chat_history.add_messages([HumanMessage(content=human), ai])

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async :meth:`save_context`."""
        await run_async(self.htm, self.save_context, inputs, outputs)

    def clear(self) -> None:
        """Empty htm's working memory for this robot; long-term memory is untouched.

        htm never forgets on its own: every stored turn stays in the long-term store and
        can come back through recall. To hide the conversation itself use
        ``memory.chat_history.clear()`` (recoverable) and ``htm.purge`` (for good).
        """
        self.htm.clear_working_memory()

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await run_async(self.htm, self.clear)
