"""LangChain and LangGraph adapters for :class:`htm_core.HTM`.

:class:`HTMMiddleware` and :func:`htm_tools` for ``langchain.agents.create_agent`` agents,
:class:`HTMRetriever` (``BaseRetriever``) for LCEL chains, :class:`HTMChatMessageHistory`
(``BaseChatMessageHistory``) for durable conversations, :class:`HTMStore` (LangGraph
``BaseStore``, extra ``langgraph``) for graphs, and :class:`HTMMemory` (classic
``BaseMemory``) for classic chains. Each class is imported on first use, so a missing
framework only matters for the class that needs it (a
:class:`~htm_core.errors.MissingDependencyError` naming the extra). See docs/langchain.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .history import HTMChatMessageHistory
    from .memory import HTMMemory
    from .middleware import HTMMiddleware
    from .retriever import HTMRetriever
    from .store import HTMStore
    from .tools import htm_tools

__all__ = ["HTMChatMessageHistory", "HTMMemory", "HTMMiddleware", "HTMRetriever", "HTMStore",
           "htm_tools"]

_MODULES = {
    "HTMChatMessageHistory": ".history",
    "HTMMemory": ".memory",
    "HTMMiddleware": ".middleware",
    "HTMRetriever": ".retriever",
    "HTMStore": ".store",
    "htm_tools": ".tools",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
