"""The agent tools' ``kind`` (``remember``) and ``kinds`` (``recall``) arguments.

Real ``langchain.agents.create_agent`` and LlamaIndex ``FunctionAgent`` agents, driven by
scripted fake models (:class:`tests.fake_chat.RecordingChatModel`, LlamaIndex's
``MockFunctionCallingLLM``), call the tools; two users whose ids differ only in letter case
hold the same sentences, so a kind filter that widened a user's scope would show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypedDict

import pytest

pytest.importorskip("langchain")
pytest.importorskip("llama_index.core")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM

from htm_core import HTM
from htm_core.errors import ValidationError
from htm_integrations.langchain import htm_tools as langchain_tools
from htm_integrations.llama_index import htm_tools as llama_tools
from tests.fake_chat import RecordingChatModel, tool_call

CODE = "The locker code is 4711"
TEA = "I prefer oolong tea at the locker room"


class UserContext(TypedDict):
    """The run context of these agents (the tools read its ``user_id``)."""

    user_id: str


def seed(htm: HTM) -> None:
    """The same fact and preference for ``Ada`` and ``ada``."""
    for user in ("Ada", "ada"):
        remember = langchain_tools(htm, user_id=user)[0]
        assert "Remembered" in remember.invoke({"content": CODE, "kind": "fact"})
        assert "Remembered" in remember.invoke({"content": TEA})  # the rules: a preference


def tool_replies(model: RecordingChatModel) -> list[str]:
    return [m.text for m in model.calls[-1] if isinstance(m, ToolMessage)]


def test_langchain_agent_recalls_one_kind_in_its_users_scope(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    seed(htm)
    assert sorted(m.kind for m in htm.list(tags=["chat:user:ada"]).memories) == \
        ["fact", "preference"]
    model = RecordingChatModel(replies=[
        tool_call("recall", {"query": "locker", "kinds": ["fact"]}, "c1"),
        tool_call("recall", {"query": "locker", "kinds": ["Preference"]}, "c2"),
        tool_call("recall", {"query": "locker", "kinds": ["skill"]}, "c3"),
        tool_call("recall", {"query": "locker", "kinds": ["facts"]}, "c4"),
        AIMessage("Done.")])
    agent = create_agent(model, tools=langchain_tools(htm), context_schema=UserContext)
    agent.invoke({"messages": [{"role": "user", "content": "What about my locker?"}]},
                 context={"user_id": "ada"})
    facts, prefs, skills, bad = tool_replies(model)
    assert CODE in facts and TEA not in facts and facts.count("\n- ") == 0
    assert "chat:user:ada:note:" in facts and "chat:user:Ada:" not in facts
    assert TEA in prefs and CODE not in prefs and prefs.count("\n- ") == 0
    assert "chat:user:Ada:" not in prefs
    assert skills == "Nothing in memory matches 'locker' among the skill memories."
    assert "kinds must be a non-empty list of episodic, fact" in bad and "'facts'" in bad


def test_langchain_remember_takes_a_kind_and_refuses_a_bad_one(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    remember, recall, _ = langchain_tools(htm, user_id="Ada")
    assert "Remembered" in remember.invoke({"content": "Ada can juggle", "kind": "SKILL"})
    refused = remember.invoke({"content": "Ada can whistle", "kind": "talent"})
    assert refused.startswith("kind must be one of episodic") and "'talent'" in refused
    assert [(m.content, m.kind) for m in htm.list(tags=["chat"]).memories] == \
        [("Ada can juggle", "skill")]  # nothing half-written
    assert "Nothing in memory" in langchain_tools(htm, user_id="ada")[1].invoke(
        {"query": "juggle", "kinds": ["skill"]})
    assert "kinds must be a non-empty list" in recall.invoke({"query": "x", "kinds": []})


def scripted(steps: Sequence[tuple[str, dict[str, Any]]]) -> Callable[..., ChatMessage]:
    """Call the tools ``steps`` in order, then answer with every tool result."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        results = [m for m in messages if m.role == MessageRole.TOOL]
        if len(results) < len(steps):
            name, args = steps[len(results)]
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[
                ToolCallBlock(tool_call_id=f"call-{len(results)}", tool_name=name,
                              tool_kwargs=args)])
        return ChatMessage(role=MessageRole.ASSISTANT,
                           content="\n==\n".join(str(m.content) for m in results))

    return respond


async def test_llama_index_agent_remembers_a_kind_and_recalls_by_kind(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="librarian")
    seed(htm)
    llm = MockFunctionCallingLLM(response_generator=scripted([
        ("remember", {"content": "Ada speaks Tamil", "kind": "skill"}),
        ("recall", {"query": "locker Tamil", "kinds": ["skill", "fact"]}),
        ("recall", {"query": "locker", "kinds": ["digest"]}),
        ("remember", {"content": "Ada speaks Hindi", "kind": "hobby"})]))
    agent = FunctionAgent(llm=llm, tools=llama_tools(htm, user_id="Ada"))
    answer = str(await agent.run(user_msg="Note my languages, then check."))
    _, both, digests, refused = answer.split("\n==\n")
    assert "Ada speaks Tamil" in both and CODE in both and TEA not in both
    assert "chat:user:Ada:note:" in both and "chat:user:ada:" not in both
    assert digests == "Nothing in memory matches 'locker' among the digest memories."
    assert "kind must be one of episodic" in refused and "'hobby'" in refused
    notes = htm.list(tags=["chat:user:Ada"], kinds="skill").memories
    assert [m.content for m in notes] == ["Ada speaks Tamil"]
    assert not htm.list(tags=["chat:user:ada"], kinds="skill").memories


def test_llama_index_tools_raise_htms_error(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    remember, recall, _ = llama_tools(htm, user_id="ada")
    with pytest.raises(ValidationError, match="kinds must be a non-empty list"):
        recall.call(query="x", kinds=["fact", "nope"])
    with pytest.raises(ValidationError, match="kind must be one of"):
        remember.call(content="Ada likes tea", kind="")
    assert not htm.list(tags=["chat"]).memories


async def test_langchain_async_tools_take_kind_and_kinds(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    seed(htm)
    remember, recall, _ = langchain_tools(htm, user_id="Ada")
    assert "Remembered" in await remember.ainvoke({"content": "Ada knows Rust",
                                                   "kind": "skill"})
    got = await recall.ainvoke({"query": "locker Rust", "kinds": ["skill", "preference"]})
    assert "Ada knows Rust" in got and TEA in got and CODE not in got
    assert "chat:user:ada:" not in got and got.count("\n") == 1
    assert "kinds must be" in await recall.ainvoke({"query": "x", "kinds": ["nope"]})
