"""``htm_tools``: remember, recall and forget as LangChain tools, so an agent manages its memory.

``create_agent(model, tools=htm_tools(htm), middleware=[HTMMiddleware(htm)])``. The three
tools are those of :mod:`htm_integrations._memory_tools`. Inside an agent run they work in
the run's scope, found as :class:`~htm_integrations.langchain.HTMMiddleware` finds it (the
run's ``user_id``, its ``thread_id``); called directly, in the fixed ``user_id`` /
``session_id``. ``forget=False`` leaves ``forget`` out. See docs/langchain.md ("Agent
tools: ``htm_tools``").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any

from htm_core import run_async
from htm_core.errors import HTMError, missing_extra
from htm_core.scoring import DEFAULT_MIN_SCORE

from .._memory_tools import DESCRIPTIONS, KIND_HELP, KINDS_HELP, NOTE_IMPORTANCE, MemoryTools
from ._agent_scope import AgentScope

try:
    from langchain.tools import ToolRuntime
    from langchain_core.tools import BaseTool, StructuredTool, ToolException
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langchain", "langchain") from None

__all__ = ["htm_tools"]

#: The injected run (hidden from the model). ``Any`` for the context, or pydantic warns
#: "Expected `none`" for every run that has a context (langchain-ai/langgraph#8417).
_Runtime = ToolRuntime[Any, Any]


def _present(runtime: Any) -> frozenset[str]:
    """The ids of the run's messages (its state's), which the model has in front of it."""
    state = getattr(runtime, "state", None)
    messages = state.get("messages") if isinstance(state, Mapping) else \
        getattr(state, "messages", None)
    return frozenset(m.id for m in messages or () if isinstance(getattr(m, "id", None), str))


class _AgentTools:
    """The tools' bodies over one ``HTM``: each resolves the run's scope, works through
    :class:`~htm_integrations._memory_tools.MemoryTools` and turns an ``HTMError`` into a
    ``ToolException`` (the model sees the message)."""

    def __init__(self, scope: AgentScope, work: MemoryTools) -> None:
        self.scope = scope
        self.work = work

    def _call(self, action: Callable[..., str], runtime: Any, *args: Any) -> str:
        try:
            return action(self.scope.of_runtime(runtime), *args)
        except HTMError as exc:
            raise ToolException(str(exc)) from exc

    def remember(self, content: Annotated[str, "the fact, one self-contained sentence"],
                 importance: Annotated[float | None, "0 to 10; default 5"] = None,
                 kind: Annotated[str | None, KIND_HELP] = None,
                 runtime: _Runtime = None) -> str:  # type: ignore[assignment]
        """Remember a fact."""
        return self._call(self.work.remember, runtime, content, importance, kind)

    async def aremember(self, content: str, importance: float | None = None,
                        kind: str | None = None,
                        runtime: _Runtime = None) -> str:  # type: ignore[assignment]
        return await run_async(self.work.htm, self.remember, content, importance, kind, runtime)

    def recall(self, query: Annotated[str, "what to look for"],
               limit: Annotated[int | None, "how many memories at most"] = None,
               kinds: Annotated[list[str] | None, KINDS_HELP] = None,
               runtime: _Runtime = None) -> str:  # type: ignore[assignment]
        """Recall memories."""
        return self._call(self.work.recall, runtime, query, limit, _present(runtime), (),
                          kinds)

    async def arecall(self, query: str, limit: int | None = None,
                      kinds: list[str] | None = None,
                      runtime: _Runtime = None) -> str:  # type: ignore[assignment]
        return await run_async(self.work.htm, self.recall, query, limit, kinds, runtime)

    def forget(self, key: Annotated[str, "the [key] recall showed"],
               confirm: Annotated[bool, "true to forget; false only shows it"] = False,
               runtime: _Runtime = None) -> str:  # type: ignore[assignment]
        """Forget a memory."""
        return self._call(self.work.forget, runtime, key, confirm)

    async def aforget(self, key: str, confirm: bool = False,
                      runtime: _Runtime = None) -> str:  # type: ignore[assignment]
        return await run_async(self.work.htm, self.forget, key, confirm, runtime)

    def tool(self, name: str) -> BaseTool:
        """The LangChain tool ``name`` (``remember``, ``recall`` or ``forget``)."""
        return StructuredTool.from_function(
            getattr(self, name), coroutine=getattr(self, "a" + name), name=name,
            description=DESCRIPTIONS[name], handle_tool_error=True)


def htm_tools(htm: Any, *, user_id: str | None = None, session_id: str | None = None,
              user_key: str = "user_id", shared: bool = False,
              shared_tags: Iterable[str] | str | None = None, recall_limit: int = 5,
              importance: float = NOTE_IMPORTANCE, recall_robot: str | None = None,
              forget: bool = True,
              min_score: float | None = DEFAULT_MIN_SCORE) -> list[BaseTool]:
    """LangChain tools ``remember``, ``recall`` and ``forget`` over ``htm``.

    Args:
        htm: the :class:`htm_core.HTM` the tools use (notes are written by its robot).
        user_id / session_id / user_key / shared / shared_tags: the scope, as for
            :class:`~htm_integrations.langchain.HTMMiddleware` (give both the same).
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
        >>> remember.invoke({"content": "Ada prefers Vim"}).startswith("Remembered")
        True
        >>> "Ada prefers Vim" in recall.invoke({"query": "Vim"})
        True
    """
    tools = _AgentTools(
        AgentScope.of(user_id=user_id, session_id=session_id, user_key=user_key,
                      shared=shared, shared_tags=shared_tags),
        MemoryTools(htm, recall_limit=recall_limit, importance=importance,
                    recall_robot=recall_robot, min_score=min_score))
    return [tools.tool(name) for name in ("remember", "recall", "forget")[:3 if forget else 2]]
