"""What the scopes property test (test_scopes_property.py) pins, as focused cases.

- The MCP server's ``stats`` and ``list_robots`` count only the memories of the server's
  user: another user's memories are neither shown nor counted.
- LlamaIndex ``HTMMemory`` and ``HTMMemoryBlock`` store each turn under a key inside the
  conversation's scope (``<scope tag>:llama_index:<uuid>``), like every other surface.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage
from mcp import Client

from htm_core import HTM
from htm_core.scope import ChatScope
from htm_integrations.llama_index import HTMMemory, HTMMemoryBlock
from htm_integrations.mcp.server import build_server


async def call(htm: HTM, user: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    async with Client(build_server(htm, user_id=user), cache=None) as client:
        result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


@pytest.mark.parametrize(("mine", "theirs"), [("ada", "Ada"), ("ada", "\u0430da"),
                                              ("a:b", "a/b")])
async def test_mcp_stats_and_robots_count_only_the_users_memories(
        htm_factory: Callable[..., HTM], mine: str, theirs: str) -> None:
    htm = htm_factory(robot="assistant")
    other = htm_factory(robot="importer")
    for n in range(3):
        await call(htm, theirs, "remember", {"content": f"Their note number {n}"})
    other.add("An import for them", tags=[ChatScope.of(user_id=theirs).tag])
    await call(htm, mine, "remember", {"content": "My locker code is 4711"})
    gone = await call(htm, mine, "remember", {"content": "My old bike code", "key": "bike"})
    await call(htm, mine, "forget", {"key": gone["key"], "confirm": True})
    await call(htm, mine, "recall", {"query": "locker", "strategy": "fulltext"})

    stats = await call(htm, mine, "stats", {})
    assert (stats["long_term_total"], stats["long_term_robot"], stats["forgotten"],
            stats["robots"]) == (1, 1, 1, 1)
    assert stats["working_memory_count"] <= 1
    robots = (await call(htm, mine, "list_robots", {}))["robots"]
    assert [(r["name"], r["memory_count"]) for r in robots] == [("assistant", 1)]

    theirs_stats = await call(htm, theirs, "stats", {})
    assert (theirs_stats["long_term_total"], theirs_stats["robots"]) == (4, 2)
    counted = {r["name"]: r["memory_count"]
               for r in (await call(htm, theirs, "list_robots", {}))["robots"]}
    assert counted == {"assistant": 3, "importer": 1}


async def test_a_shared_server_counts_the_whole_store(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    htm.add("One for everyone")
    htm.add("One of Ada's", tags=[ChatScope.of(user_id="ada").tag])
    async with Client(build_server(htm, user_id="bob", shared=True), cache=None) as client:
        stats = (await client.call_tool("stats", {})).structured_content
    assert stats is not None and stats["long_term_total"] == 2


@pytest.mark.parametrize(("user", "session"), [("Ada", "s:1"), (None, "s1"), ("a/b", "S1")])
async def test_llama_index_turns_are_keyed_inside_their_scope(
        htm_factory: Callable[..., HTM], user: str | None, session: str) -> None:
    """Turns of HTMMemory and of HTMMemoryBlock: each key begins with the conversation's
    scope tag, so a key lookup in another scope can never reach the turn."""
    htm = htm_factory()
    scope = ChatScope.of(user_id=user, session_id=session)
    memory = HTMMemory.from_defaults(htm=htm, user_id=user, session_id=session)
    memory.put(ChatMessage(role="user", content="My parking spot is 31"))
    block = HTMMemoryBlock(htm=htm, user_id=user)
    await block.aput([ChatMessage(role="user", content="My desk is 4B",
                                  additional_kwargs={"session_id": session})])
    keys = {m.key for m in htm.list(tags=[scope.tag]).memories}
    assert len(keys) == 2
    assert all(k.startswith(f"{scope.tag}:llama_index:") for k in keys), keys
    assert len(htm.list(key_prefix=scope.key_prefix).memories) == 2
