"""Whose memory an agent run works in, read from the run: the user and the thread.

Shared by :class:`~htm_integrations.langchain.HTMMiddleware` and
:func:`~htm_integrations.langchain.htm_tools`, so the turns the middleware stores and the
notes the tools write land in the same scope. The user is the run context's ``user_key``
(else ``config["configurable"]``, else the adapter's fixed ``user_id``); the session is the
adapter's fixed ``session_id``, else the run's ``thread_id``; with neither the scope is the
session ``"default"``. See docs/langchain.md ("Agents: ``HTMMiddleware``").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from htm_core.errors import ValidationError

from .._scope import ChatScope

__all__ = ["AgentScope"]


def _lookup(source: Any, name: str) -> Any:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _config() -> Mapping[str, Any]:
    try:
        from langgraph.config import get_config
        return get_config()
    except (ImportError, RuntimeError):  # outside a run (a tool called directly)
        return {}


@dataclass(frozen=True, kw_only=True)
class AgentScope:
    """How to find the scope of a run: fixed ids, the context key, sharing."""

    user_id: str | None = None
    session_id: str | None = None
    user_key: str = "user_id"
    shared: bool = False
    shared_tags: tuple[str, ...] = ()

    @classmethod
    def of(cls, *, user_id: str | None, session_id: str | None, user_key: str,
           shared: bool, shared_tags: Iterable[str] | str | None) -> AgentScope:
        """Checked settings (the fixed ids must make a valid scope on their own)."""
        if not isinstance(user_key, str) or not user_key:
            raise ValidationError(f"user_key must be a non-empty string, got {user_key!r}")
        checked = ChatScope.of(session_id=session_id if session_id or user_id else "default",
                               user_id=user_id, shared=shared, shared_tags=shared_tags)
        return cls(user_id=user_id, session_id=session_id, user_key=user_key, shared=shared,
                   shared_tags=checked.shared_tags)

    def resolve(self, context: Any = None, thread_id: str | None = None,
                config: Mapping[str, Any] | None = None) -> ChatScope:
        """The scope of a run with this ``context``, ``thread_id`` and ``config``."""
        configurable = (config if config is not None else _config()).get("configurable") or {}
        user = _lookup(context, self.user_key) or configurable.get(self.user_key) or self.user_id
        session = self.session_id or thread_id or configurable.get("thread_id")
        if user is None and session is None:
            session = "default"
        return ChatScope.of(session_id=None if session is None else str(session),
                            user_id=None if user is None else str(user), shared=self.shared,
                            shared_tags=self.shared_tags)

    def of_runtime(self, runtime: Any) -> ChatScope:
        """The scope of a LangGraph ``Runtime``/``ToolRuntime`` (None: the fixed ids)."""
        if runtime is None:
            return self.resolve(config={})
        info = getattr(runtime, "execution_info", None)
        config = getattr(runtime, "config", None)
        return self.resolve(getattr(runtime, "context", None),
                            getattr(info, "thread_id", None), config)
