"""A scripted LangChain chat model that calls tools and records what it is sent.

langchain_core's ``GenericFakeChatModel`` cannot ``bind_tools``, and ``create_agent`` binds
the agent's tools to its model; this small ``BaseChatModel`` subclass stands in for a real
provider (which cannot run offline in tests). Each reply is an ``AIMessage`` or a function
of the messages received that returns one; every call's messages (system message
included) are kept in ``calls``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

Reply = AIMessage | Callable[[list[BaseMessage]], AIMessage]


class RecordingChatModel(BaseChatModel):
    """Answers with ``replies`` in order (then ``default``), recording each call."""

    replies: list[Any] = Field(default_factory=list)
    default: str = "ok"
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingChatModel:
        self.bound_tools = [getattr(t, "name", None) or t.get("name") for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.calls.append(list(messages))
        reply = self.replies.pop(0) if self.replies else AIMessage(self.default)
        if callable(reply):
            reply = reply(list(messages))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def system_texts(self) -> list[str]:
        """The system message text of each call ("" when there was none)."""
        return [next((m.text for m in call if isinstance(m, SystemMessage)), "")
                for call in self.calls]


def tool_call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    """An assistant message that calls one tool."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])
