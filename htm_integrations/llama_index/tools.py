r"""``htm_tools``: remember, recall and forget as LlamaIndex ``FunctionTool``\ s for agents.

``FunctionAgent(llm=llm, tools=htm_tools(htm, user_id="ada"))``: the same three tools as
the LangChain ones (:mod:`htm_integrations._memory_tools`). The scope is fixed when the tools
are made (``user_id`` and/or ``session_id``; ``"default"`` when neither is given), with the
same tags and keys as every other htm surface, so notes an agent remembers for a user are
recalled by that user's LangChain agents and chat memories too. See docs/llamaindex.md
("Agent tools: ``htm_tools``").
"""

# No ``from __future__ import annotations`` here: LlamaIndex builds each tool's schema from
# the functions' evaluated annotations.
from collections.abc import Iterable
from typing import Annotated, Any

from htm_core import run_async
from htm_core.errors import missing_extra
from htm_core.scoring import DEFAULT_MIN_SCORE

from .._memory_tools import DESCRIPTIONS, KIND_HELP, KINDS_HELP, NOTE_IMPORTANCE, MemoryTools
from .._scope import ChatScope

try:
    from llama_index.core.tools import FunctionTool
    from pydantic import Field
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("llama-index-core", "llamaindex") from None

__all__ = ["htm_tools"]


def _question_being_answered(htm: Any, scope: ChatScope) -> frozenset[str]:
    """The key of the scope's newest chat message stored by :class:`HTMMemory
    <htm_integrations.llama_index.HTMMemory>` when it is the user's: while an agent works
    on a question, the question is stored and its answer not yet."""
    page = htm.list(tags=[scope.tag], order="created_at", descending=True, limit=_LOOK_BACK)
    newest = next((m for m in page.memories if m.metadata.get("source") == "llama_index"
                   and m.metadata.get("role") in ("user", "assistant")), None)
    return frozenset({newest.key}) if newest and newest.metadata["role"] == "user" else frozenset()


#: How many of the scope's newest memories are read to find its newest chat message (notes
#: the agent remembered meanwhile come after it).
_LOOK_BACK = 20


class _AgentTools:
    """The tools' bodies over one ``HTM`` inside one scope, through
    :class:`~htm_integrations._memory_tools.MemoryTools`."""

    def __init__(self, htm: Any, scope: ChatScope, work: MemoryTools) -> None:
        self.htm = htm
        self.scope = scope
        self.work = work

    def remember(self, content: Annotated[str, Field(description="the fact, one sentence")],
                 importance: Annotated[float | None, Field(description="0 to 10")] = None,
                 kind: Annotated[str | None, Field(description=KIND_HELP)] = None) -> str:
        return self.work.remember(self.scope, content, importance, kind)

    async def aremember(self, content: str, importance: float | None = None,
                        kind: str | None = None) -> str:
        return await run_async(self.htm, self.remember, content, importance, kind)

    def recall(self, query: Annotated[str, Field(description="what to look for")],
               limit: Annotated[int | None, Field(description="how many at most")] = None,
               kinds: Annotated[list[str] | None, Field(description=KINDS_HELP)] = None
               ) -> str:
        return self.work.recall(self.scope, query, limit,
                                keys=_question_being_answered(self.htm, self.scope), kinds=kinds)

    async def arecall(self, query: str, limit: int | None = None,
                      kinds: list[str] | None = None) -> str:
        return await run_async(self.htm, self.recall, query, limit, kinds)

    def forget(self, key: Annotated[str, Field(description="the [key] recall showed")],
               confirm: Annotated[bool, Field(description="true to forget")] = False) -> str:
        return self.work.forget(self.scope, key, confirm)

    async def aforget(self, key: str, confirm: bool = False) -> str:
        return await run_async(self.htm, self.forget, key, confirm)

    def tool(self, name: str) -> FunctionTool:
        """The LlamaIndex tool ``name`` (``remember``, ``recall`` or ``forget``)."""
        return FunctionTool.from_defaults(fn=getattr(self, name), async_fn=getattr(self, "a" + name),
                                          name=name, description=DESCRIPTIONS[name])


def htm_tools(htm: Any, *, user_id: str | None = None, session_id: str | None = None,
              shared: bool = False, shared_tags: Iterable[str] | str | None = None,
              recall_limit: int = 5, importance: float = NOTE_IMPORTANCE,
              recall_robot: str | None = None, forget: bool = True,
              min_score: float | None = DEFAULT_MIN_SCORE) -> list[FunctionTool]:
    """LlamaIndex tools ``remember``, ``recall`` and ``forget`` over ``htm``.

    Args:
        htm: the :class:`htm_core.HTM` the tools use (notes are written by its robot).
        user_id / session_id: whose memory (see :mod:`htm_integrations._scope`).
        shared: ``True`` recalls from the whole store (every user).
        shared_tags: memories with one of these tags are recalled for every user too.
        recall_limit: the most memories ``recall`` returns (default 5).
        importance: a note's importance when the model gives none (default 5).
        recall_robot: recall only memories of this robot (default every robot).
        forget: include the ``forget`` tool (default True).
        min_score: ``recall`` leaves out hits scoring below this (0 to 1, default
            :data:`~htm_core.scoring.DEFAULT_MIN_SCORE`; None or 0 keeps every hit).

    Example:
        >>> from htm_core import HTM
        >>> htm = HTM(database_url=":memory:", embedder="hashing")
        >>> remember, recall, forget = htm_tools(htm, user_id="ada")
        >>> "Remembered" in remember.call(content="Ada prefers Vim").content
        True
    """
    scope = ChatScope.of(session_id=session_id if session_id or user_id else "default",
                         user_id=user_id, shared=shared, shared_tags=shared_tags)
    tools = _AgentTools(htm, scope, MemoryTools(htm, recall_limit=recall_limit,
                                                importance=importance, recall_robot=recall_robot,
                                                min_score=min_score))
    return [tools.tool(name) for name in ("remember", "recall", "forget")[:3 if forget else 2]]
