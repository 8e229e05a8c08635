"""The adapters' async methods run natively on PostgreSQL (``htm_core.run_async``): the
LangGraph store's ``abatch``, LlamaIndex's ``aput``/``aget``, LangChain's message history,
many sessions at once from one loop, answer as their sync methods do and start no worker
thread; on SQLite they still run in one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from htm_core import HTM, run_async

pytest.importorskip("langgraph.store.base")
pytest.importorskip("llama_index.core")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.base import GetOp, PutOp, SearchOp
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from htm_integrations.langchain import HTMChatMessageHistory, HTMStore
from htm_integrations.llama_index import HTMMemory

BOUND = 120.0


def worker_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("asyncio_")]


async def test_the_adapters_async_methods_run_natively_on_postgres(
        htm_factory: Callable[..., HTM], store_url: str) -> None:
    native = not store_url.endswith(".db")
    htm = htm_factory(robot="bot")
    assert htm.native_async == native
    store = HTMStore(htm=htm, fields=["text"])
    users = ("Ada", "ada", "a:da", "a/da")

    async def langgraph(user: str) -> None:
        await store.abatch([PutOp(("users", user), f"k{n}", {"text": f"{user} likes tea {n}"})
                            for n in range(5)])
        found = await store.abatch([GetOp(("users", user), "k0"),
                                    SearchOp(("users", user), query="tea", limit=10)])
        assert found[0].value == {"text": f"{user} likes tea 0"}  # type: ignore[union-attr]
        assert {i.key for i in found[1]} == {f"k{n}" for n in range(5)}  # type: ignore[union-attr]

    async def llama(user: str) -> None:
        memory = HTMMemory.from_defaults(htm=htm, user_id=user, session_id=f"s-{user}")
        await memory.aput(ChatMessage(role=MessageRole.USER, content=f"{user} asks about kites"))
        await memory.aput(ChatMessage(role=MessageRole.ASSISTANT, content=f"kites for {user}"))
        got = [m.content for m in await memory.aget_all()]
        assert got == [f"{user} asks about kites", f"kites for {user}"]
        assert got == [m.content for m in memory.get_all()]

    async def history(user: str) -> None:
        chat = HTMChatMessageHistory(htm=htm, session_id=f"chat-{user}")
        await chat.aadd_messages([HumanMessage(f"hi from {user}"), AIMessage(f"hello {user}")])
        got = [m.content for m in await chat.aget_messages()]
        assert got == [f"hi from {user}", f"hello {user}"] == [m.content for m in chat.messages]

    await asyncio.wait_for(asyncio.gather(
        *(job(u) for u in users for job in (langgraph, llama, history))), BOUND)
    assert bool(worker_threads()) != native
    assert await run_async(htm, htm.stats) is not None



async def test_the_mcp_tools_run_natively_on_postgres(
        htm_factory: Callable[..., HTM], store_url: str) -> None:
    """The MCP server's tools and context resources go through ``run_async``: served in
    process to two users at once, each recalls only its own notes, and on PostgreSQL no
    worker thread is started."""
    pytest.importorskip("mcp")
    from mcp import Client

    from htm_integrations.mcp.server import build_server

    native = not store_url.endswith(".db")
    clients = [Client(build_server(htm_factory(robot="assistant"), user_id=user), cache=None)
               for user in ("Ada", "ada")]
    for client in clients:
        await client.__aenter__()
    try:
        async def session(client: Any, user: str) -> list[str]:
            for n in range(4):
                result = await client.call_tool(
                    "remember", {"content": f"{user} keeps lantern {n}", "key": f"l{n}"})
                assert not result.is_error, result.content
            found = await client.call_tool("recall", {"query": "lantern", "limit": 10})
            assert not found.is_error, found.content
            text = (await client.read_resource("htm://context")).contents[0].text
            assert f"{user} keeps lantern" in text
            return [h["content"] for h in found.structured_content["hits"]]

        got = await asyncio.wait_for(asyncio.gather(
            session(clients[0], "Ada"), session(clients[1], "ada")), BOUND)
        assert sorted(got[0]) == [f"Ada keeps lantern {n}" for n in range(4)]
        assert sorted(got[1]) == [f"ada keeps lantern {n}" for n in range(4)]
        assert bool(worker_threads()) != native
    finally:
        for client in reversed(clients):
            await client.__aexit__(None, None, None)
