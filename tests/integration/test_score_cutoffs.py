"""One score everywhere and a default cut-off: the CLI, the MCP server, the LangChain and
LlamaIndex tools and ``htm ui`` show the number ``HTM.recall`` returns, and leave out
hits below :data:`htm_core.scoring.DEFAULT_MIN_SCORE` unless told otherwise; an agent's
``recall`` tool and ``HTMMiddleware`` never hand back the turn being answered.

Real parts throughout: the ``htm`` command in-process, the MCP server through the SDK's
own client, ``langchain.agents.create_agent`` with LangGraph's checkpointer and the
scripted :class:`tests.fake_chat.RecordingChatModel` (no provider runs offline), the
LlamaIndex ``FunctionTool``s, the UI's Starlette app; SQLite and PostgreSQL stores, the
hashing embedder.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from htm_core import HTM
from htm_core.cli import main
from htm_core.scoring import DEFAULT_MIN_SCORE
from htm_integrations.langchain import HTMMiddleware
from htm_integrations.langchain import htm_tools as langchain_tools
from tests.fake_chat import RecordingChatModel, tool_call

NOTES = [
    ("vim", "User prefers Vim keybindings in every editor"),
    ("tea", "User drinks green tea in the morning"),
    ("deploy", "The deploy runs on Fridays after lunch"),
    ("leeds", "It rained all day in Leeds"),
    ("bike", "The bicycle has a flat rear tyre"),
]


def _fill(htm: HTM) -> None:
    htm.add_many([{"content": text, "key": key} for key, text in NOTES])


def _cli(db: str, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--db", db, "--embedder", "hashing", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_cli_shows_the_api_score_and_cuts_below_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTM_DATABASE_URL", "HTM_ROBOT", "HTM_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)
    db = str(tmp_path / "cli.db")
    with HTM(database_url=db, embedder="hashing") as htm:
        _fill(htm)
        every = htm.recall("green tea", limit=5, min_score=0)
        api = {h.memory.key: round(h.score, 4) for h in every}
    assert len(every) == 5 and min(api.values()) < DEFAULT_MIN_SCORE  # something to cut
    code, out, _ = _cli(db, "recall", "green tea", "--json", "--limit", "5")
    assert code == 0
    shown = {json.loads(line)["key"]: json.loads(line)["score"] for line in out.splitlines()}
    assert shown and all(s >= DEFAULT_MIN_SCORE for s in shown.values())
    assert {k: round(s, 4) for k, s in shown.items()} == {
        k: s for k, s in api.items() if s >= DEFAULT_MIN_SCORE}
    code, out, _ = _cli(db, "recall", "green tea", "--json", "--limit", "5", "--min-score", "0")
    assert code == 0 and len(out.splitlines()) == 5
    code, out, err = _cli(db, "recall", "submarine periscope")
    assert code == 0 and out == "" and "--min-score 0" in err
    code, out, _ = _cli(db, "recall", "green tea", "--min-score", "0.5")
    assert code == 0
    table = out.splitlines()
    assert table[0].split()[0] == "score"
    assert [line.split()[0] for line in table[1:]] == [f"{api['tea']:.4f}"]
    code, _, err = _cli(db, "recall", "green tea", "--min-score", "2")
    assert code == 1 and "min_score must be a number from 0 to 1" in err


async def test_the_mcp_recall_tool_cuts_below_the_default(sqlite_url: str) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from htm_integrations.mcp.server import build_server

    with HTM(database_url=sqlite_url, embedder="hashing") as htm:
        server = build_server(htm, user_id="ada")
        async with Client(server, cache=None) as client:
            for key, text in NOTES:
                await client.call_tool("remember", {"content": text, "key": key})
            got = (await client.call_tool("recall", {"query": "green tea"})).structured_content
            assert got is not None
            scores = [h["score"] for h in got["hits"]]
            assert [h["key"] for h in got["hits"]][:1] == ["chat:user:ada:key:tea"]
            assert scores and min(scores) >= DEFAULT_MIN_SCORE
            every = (await client.call_tool("recall", {"query": "green tea",
                                                       "min_score": 0})).structured_content
            assert every is not None and len(every["hits"]) == len(NOTES) > len(scores)
            assert any(h["score"] < DEFAULT_MIN_SCORE for h in every["hits"])
            none = (await client.call_tool("recall", {"query": "submarine periscope"}))
            assert none.structured_content == {"count": 0, "hits": []}


def _tool_text(out: dict[str, Any]) -> str:
    return "\n".join(m.text for m in out["messages"] if isinstance(m, ToolMessage))


def test_the_recall_tool_never_returns_the_question_being_answered(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    model = RecordingChatModel(replies=[
        AIMessage("Noted."),
        tool_call("recall", {"query": "What is my locker code?"}, "c1"),
        AIMessage("It is 4711."),
    ])
    agent = create_agent(model, tools=langchain_tools(htm), middleware=[HTMMiddleware(htm)],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [{"role": "user", "content": "My locker code is 4711"}]},
                 config, context={"user_id": "ada"})
    out = agent.invoke({"messages": [{"role": "user", "content": "What is my locker code?"}]},
                       {"configurable": {"thread_id": "t2"}}, context={"user_id": "ada"})
    answer = _tool_text(out)
    assert "Human: My locker code is 4711" in answer
    assert "What is my locker code?" not in answer  # stored after the first call, left out
    # the turn was stored all the same, and the next model call's block leaves it out too
    assert "Human: What is my locker code?" in [
        m.content for m in htm.list(tags=["chat:user:ada"], limit=100).memories]
    assert "What is my locker code?" not in _block(model.system_texts()[-1])


def test_the_recall_tool_in_one_thread_leaves_out_the_thread_s_own_messages(
        htm_factory: Callable[..., HTM]) -> None:
    """Colliding texts: the same question asked in an earlier thread is a memory like any
    other and is recalled; the copy being answered now is not."""
    htm = htm_factory(robot="assistant")
    model = RecordingChatModel(replies=[
        AIMessage("I don't know yet."),
        tool_call("recall", {"query": "locker code"}, "c1"),
        AIMessage("Still unknown."),
    ])
    agent = create_agent(model, tools=langchain_tools(htm), middleware=[HTMMiddleware(htm)],
                         checkpointer=InMemorySaver())
    for thread in ("old", "new"):
        out = agent.invoke({"messages": [{"role": "user", "content": "What is my locker code?"}]},
                           {"configurable": {"thread_id": thread}}, context={"user_id": "ada"})
    lines = [line for line in _tool_text(out).splitlines() if "locker code" in line]
    assert len(lines) == 1, lines
    assert "session:old:msg:" in lines[0]


def _block(system: str) -> str:
    found = re.search(r"<htm_memory>.*?</htm_memory>", system, re.S)
    return found.group(0) if found else ""


def test_the_langchain_tools_take_a_min_score(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    _fill(htm)
    _remember, recall, _forget = langchain_tools(htm, shared=True)
    assert recall.invoke({"query": "submarine periscope"}).startswith("Nothing in memory")
    assert recall.invoke({"query": "green tea"}).count("\n- ") < len(NOTES) - 1
    _remember, every, _forget = langchain_tools(htm, shared=True, min_score=None)
    assert every.invoke({"query": "green tea"}).count("- [") == len(NOTES)


def test_the_llama_index_tools_take_a_min_score(htm_factory: Callable[..., HTM]) -> None:
    pytest.importorskip("llama_index.core")
    from htm_integrations.llama_index import htm_tools as llama_tools

    htm = htm_factory()
    _fill(htm)
    _remember, recall, _forget = llama_tools(htm, shared=True)
    assert recall.call(query="submarine periscope").content.startswith("Nothing in memory")
    kept = recall.call(query="green tea").content
    assert "green tea" in kept and kept.count("- [") < len(NOTES)
    _remember, every, _forget = llama_tools(htm, shared=True, min_score=0)
    assert every.call(query="green tea").content.count("- [") == len(NOTES)


def test_the_ui_shows_the_api_score_and_labels_the_fused_value(
        htm_factory: Callable[..., HTM]) -> None:
    pytest.importorskip("starlette")
    from htm_integrations.ui import create_app
    from tests.ui.conftest import loopback_client

    htm = htm_factory()
    _fill(htm)
    api = [f"{h.score:.4f}" for h in htm.recall("green tea morning", limit=5, min_score=0)]
    app = create_app(htm)
    try:
        with loopback_client(app) as client:
            page = client.get("/recall", params={"q": "green tea morning", "limit": 5}).text
            listed = client.get("/memories", params={"q": "green tea morning",
                                                     "limit": 5}).text
            today = client.get("/recall", params={"q": "green tea today"}).text
    finally:
        app.state.ui.close()
    assert re.findall(r'<td class="num score">([0-9.]+)</td>', page) == api
    assert "fused (RRF)" in page and "fused score" not in page
    assert re.findall(r'<td class="num">(0\.[0-9]{4})</td>', listed) == api
    # every memory is from today: the window is read, and no @time arm runs
    assert "every candidate is inside it: no @time arms" in today
    assert 'id="arm-vector@time"' not in today


async def test_the_llama_index_recall_tool_never_returns_the_question_being_answered(
        htm_factory: Callable[..., HTM]) -> None:
    """A real ``FunctionAgent`` with ``HTMMemory``: the model calls ``recall`` while the
    question is stored and its answer is not; a second session asks the same words."""
    pytest.importorskip("llama_index.core")
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    from htm_integrations.llama_index import HTMMemory
    from htm_integrations.llama_index import htm_tools as llama_tools

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        results = [m for m in messages if m.role == MessageRole.TOOL]
        if not results:
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
                tool_call_id="c1", tool_name="recall", tool_kwargs={"query": "locker code"})])
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Found: {results[-1].content}")

    htm = htm_factory(robot="librarian")
    agent = FunctionAgent(llm=MockFunctionCallingLLM(response_generator=respond),
                          tools=llama_tools(htm, user_id="ada"))
    first = HTMMemory.from_defaults(htm=htm, user_id="ada", session_id="one")
    await agent.run(user_msg="My locker code is 4711", memory=first)
    second = HTMMemory.from_defaults(htm=htm, user_id="ada", session_id="two")
    answer = str(await agent.run(user_msg="What is my locker code?", memory=second))
    assert "My locker code is 4711" in answer
    assert "What is my locker code?" not in answer
    third = HTMMemory.from_defaults(htm=htm, user_id="ada", session_id="three")
    again = str(await agent.run(user_msg="What is my locker code?", memory=third))
    assert again.count("What is my locker code?") == 1  # session two's, not this one
