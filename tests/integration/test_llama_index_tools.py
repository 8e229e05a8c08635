"""``htm_tools`` for LlamaIndex: a real ``FunctionAgent`` remembers, then recalls.

The agent and its tool calling are LlamaIndex's own; the model is LlamaIndex's
``MockFunctionCallingLLM`` with a scripted response generator (no provider runs offline),
which records the messages of each call. htm runs on every backend with the hashing
embedder.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM

from htm_core import HTM
from htm_integrations.langchain import htm_tools as langchain_tools
from htm_integrations.llama_index import htm_tools

TEA = "Ada's favourite tea is oolong"


def scripted(calls: list[list[ChatMessage]]) -> Callable[..., ChatMessage]:
    """Remember TEA, then recall it, then answer with what recall returned."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        calls.append(list(messages))
        results = [m for m in messages if m.role == MessageRole.TOOL]
        steps = [("remember", {"content": TEA}), ("recall", {"query": "favourite tea"})]
        if len(results) < len(steps):
            name, args = steps[len(results)]
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[
                ToolCallBlock(tool_call_id=f"call-{len(results)}", tool_name=name,
                              tool_kwargs=args)])
        return ChatMessage(role=MessageRole.ASSISTANT,
                           content=f"From memory: {results[-1].content}")

    return respond


async def test_function_agent_remembers_then_recalls(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="librarian")
    calls: list[list[ChatMessage]] = []
    llm = MockFunctionCallingLLM(response_generator=scripted(calls))
    agent = FunctionAgent(llm=llm, tools=htm_tools(htm, user_id="ada"))
    answer = str(await agent.run(user_msg="Remember my favourite tea is oolong, then check."))
    assert len(calls) == 3
    assert TEA in answer and answer.startswith("From memory: - [chat:user:ada:note:")
    notes = htm.list(tags=["chat:user:ada"]).memories
    assert [(m.content, m.robot, m.importance) for m in notes] == [(TEA, "librarian", 5.0)]
    # the note is the user's, whichever framework asks: LangChain's tools find it too
    assert TEA in langchain_tools(htm, user_id="ada")[1].invoke({"query": "tea"})
    assert "Nothing in memory" in htm_tools(htm, user_id="bob")[1].call(query="tea").content


def test_forget_takes_two_steps(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    remember, _recall, forget = htm_tools(htm, session_id="s1")
    key = re.search(r"\[(.+?)\]", remember.call(content="The wifi password is on the fridge")
                    .content).group(1)
    assert "About to forget" in forget.call(key=key).content
    assert htm.get(key) is not None
    assert "Forgotten" in forget.call(key=key, confirm=True).content
    assert htm.get(key) is None
    assert htm.get(key, include_forgotten=True) is not None  # recoverable
    assert [t.metadata.name for t in htm_tools(htm, forget=False)] == ["remember", "recall"]


def test_the_same_note_twice_is_one_memory(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    remember = htm_tools(htm, user_id="ada")[0]
    first = remember.call(content="Ada's bus is the 42").content
    assert remember.call(content="  Ada's bus is the 42\n").content == first
    assert htm_tools(htm, user_id="ada", session_id="other")[0].call(
        content="Ada's bus is the 42").content == first  # one user, any session
    other = htm_tools(htm, user_id="bob")[0].call(content="Ada's bus is the 42").content
    assert other != first
    assert len(htm.list(tags=["chat"]).memories) == 2
