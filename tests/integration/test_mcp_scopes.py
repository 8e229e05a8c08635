"""Two users of the MCP server on one store never reach each other's memories.

The servers run in process (``build_server``) and are driven through the official ``mcp``
SDK's client, one per user, on every backend. The users' ids are drawn to collide: letter
case (``Ada``/``ada``), a Unicode lookalike (Cyrillic ``а``) and separators (``a:b``/``a/b``).
The ``htm`` command's ``--user`` is checked to meet the same user's server.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.types import CallToolResult

from htm_core import HTM
from htm_core.cli import main as htm_main
from htm_core.errors import ValidationError
from htm_integrations.mcp.server import build_server

PAIRS = [("Ada", "ada"), ("ada", "\u0430da"), ("a:b", "a/b")]
SENTENCE = "The locker code is 4711"


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)


@asynccontextmanager
async def servers(make: Callable[..., HTM], *users: str) -> AsyncIterator[list[Client]]:
    """One client per user, each on its own server and ``HTM`` (one robot, one store)."""
    clients = []
    try:
        for user in users:
            client = Client(build_server(make(robot="assistant"), user_id=user), cache=None)
            clients.append(await client.__aenter__())
        yield clients
    finally:
        for client in reversed(clients):
            await client.__aexit__(None, None, None)


@pytest.mark.parametrize(("first", "second"), PAIRS)
async def test_the_same_sentence_of_two_users_is_two_memories(
        htm_factory: Callable[..., HTM], first: str, second: str) -> None:
    """Each keeps its own tags and metadata; one user's forget leaves the other's memory."""
    async with servers(htm_factory, first, second) as (a, b):
        mine = ok(await a.call_tool("remember", {"content": SENTENCE, "tags": ["personal"],
                                                 "metadata": {"owner": first}}))
        theirs = ok(await b.call_tool("remember", {"content": SENTENCE, "tags": ["work"],
                                                   "metadata": {"owner": second}}))
        assert mine["key"] != theirs["key"]
        assert mine["id"] != theirs["id"]
        assert theirs["metadata"] == {"owner": second}
        assert not any("personal" in t for t in theirs["tags"])
        again = ok(await a.call_tool("retrieve", {"key": mine["key"]}))
        assert again["metadata"] == {"owner": first}
        assert sorted(again["tags"]) == sorted(mine["tags"])
        assert not any("work" in t for t in again["tags"])

        ok(await a.call_tool("forget", {"key": mine["key"], "confirm": True}))
        kept = ok(await b.call_tool("retrieve", {"key": theirs["key"]}))
        assert kept["found"] is True and kept["forgotten"] is False
        hits = ok(await b.call_tool("recall", {"query": "locker code", "strategy": "fulltext"}))
        assert [h["key"] for h in hits["hits"]] == [theirs["key"]]


@pytest.mark.parametrize(("first", "second"), PAIRS)
async def test_recall_and_context_stay_in_each_users_scope(
        htm_factory: Callable[..., HTM], first: str, second: str) -> None:
    async with servers(htm_factory, first, second) as (a, b):
        ok(await a.call_tool("remember", {"content": SENTENCE}))
        ok(await b.call_tool("remember", {"content": "The bike code is 1234"}))
        for client, kept, hidden in ((a, "4711", "1234"), (b, "1234", "4711")):
            hits = ok(await client.call_tool("recall", {"query": "code", "limit": 10,
                                                        "strategy": "fulltext"}))
            assert [kept in h["content"] for h in hits["hits"]] == [True]
            text = ok(await client.call_tool("create_context", {}))["text"]
            assert kept in text and hidden not in text


@pytest.mark.parametrize(("first", "second"), PAIRS)
async def test_another_users_key_is_neither_reached_nor_revealed(
        htm_factory: Callable[..., HTM], first: str, second: str) -> None:
    """Reading, forgetting or restoring the other user's key answers as for a key that
    does not exist; re-remembering under it (given or stored form) writes one's own memory
    and leaves theirs as it was."""
    async with servers(htm_factory, first, second) as (a, b):
        mine = ok(await a.call_tool("remember", {"content": SENTENCE, "key": "locker",
                                                 "metadata": {"owner": first}}))
        hidden = mine["key"]
        assert ok(await b.call_tool("retrieve", {"key": hidden})) == {"found": False,
                                                                      "key": hidden}
        for tool, args in (("forget", {"confirm": True}), ("restore", {})):
            refused = error_text(await b.call_tool(tool, {"key": hidden, **args}))
            unknown = error_text(await b.call_tool(tool, {"key": "never-there", **args}))
            assert refused.replace(repr(hidden), "K") == unknown.replace("'never-there'", "K")

        other = ok(await b.call_tool("remember", {"content": "Something else", "key": "locker"}))
        same = ok(await b.call_tool("remember", {"content": SENTENCE, "key": hidden,
                                                 "metadata": {"owner": second}}))
        assert hidden not in (same["key"], other["key"])
        assert same["metadata"] == {"owner": second}
        untouched = ok(await a.call_tool("retrieve", {"key": "locker"}))
        assert (untouched["key"], untouched["metadata"]) == (hidden, {"owner": first})
        assert sorted(untouched["tags"]) == sorted(mine["tags"])
        assert untouched["forgotten"] is False


@pytest.mark.parametrize("tag", ["chat:user:bob", "chat", "Chat:User:bob",
                                 "chat:session:s1", "chat:role:note"])
async def test_scope_tags_given_as_arguments_are_refused(
        htm_factory: Callable[..., HTM], tag: str) -> None:
    """A tag in the scopes' namespace would plant a memory in Bob's recall; it is refused,
    named in the error, and nothing is written."""
    async with servers(htm_factory, "ada", "bob") as (ada, bob):
        refused = error_text(await ada.call_tool("remember", {"content": "Bob owes Ada 10 EUR",
                                                              "tags": ["ops", tag]}))
        assert "ValidationError" in refused and repr(tag) in refused
        assert ok(await ada.call_tool("stats", {}))["long_term_total"] == 0
        assert ok(await bob.call_tool("recall", {"query": "owes EUR",
                                                 "strategy": "fulltext"}))["count"] == 0
        asked = error_text(await bob.call_tool("recall", {"query": "owes", "tags": [tag]}))
        assert "ValidationError" in asked and repr(tag) in asked
    with pytest.raises(ValidationError, match="shared_tags"):
        build_server(htm_factory(), user_id="ada", shared_tags=[tag])


async def test_a_note_through_the_server_and_the_agent_tools_is_one_memory(
        htm_factory: Callable[..., HTM]) -> None:
    """The MCP server and the agent tools of one user give one note the same key."""
    pytest.importorskip("langchain")
    from htm_integrations.langchain import htm_tools

    htm = htm_factory(robot="assistant")
    remember, _recall, forget = htm_tools(htm, user_id="ada")
    said = remember.invoke({"content": "Ada prefers Vim"})
    async with servers(htm_factory, "ada") as (ada,):
        served = ok(await ada.call_tool("remember", {"content": "Ada prefers Vim"}))
        assert f"[{served['key']}]" in said
        assert ok(await ada.call_tool("remember", {"content": "Ada uses tmux",
                                                   "key": "pref-tmux"}))
    assert "Ada uses tmux" in forget.invoke({"key": "pref-tmux"})
    assert len(htm.list(tags=["chat:user:ada"]).memories) == 2


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = htm_main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


async def test_the_cli_user_meets_that_users_server(
        store_url: str, htm_factory: Callable[..., HTM],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``htm add --user ada`` is recalled by Ada's server, not Ada's lookalike's; a key Ada's
    server gave is forgotten with ``htm forget --user ada``, refused for another user."""
    monkeypatch.delenv("HTM_USER", raising=False)
    db = ("--db", store_url, "--embedder", "hashing", "--robot", "shell")
    code, out, err = run_cli("add", "Ada's bike is in the cellar", "--user", "ada",
                             "--tag", "home", *db)
    assert code == 0, err
    assert out.startswith("chat:user:ada:note:")
    monkeypatch.setenv("HTM_USER", "ada")
    assert run_cli("add", "Ada waters the plants on Sundays", *db)[0] == 0
    monkeypatch.delenv("HTM_USER")
    async with servers(htm_factory, "ada", "\u0430da") as (ada, lookalike):
        found = ok(await ada.call_tool("recall", {"query": "bike cellar", "tags": ["home"],
                                                  "strategy": "fulltext"}))
        assert [h["content"] for h in found["hits"]] == ["Ada's bike is in the cellar"]
        plants = ok(await ada.call_tool("recall", {"query": "plants Sundays",
                                                   "strategy": "fulltext"}))
        assert plants["count"] == 1
        for query in ("bike cellar", "plants Sundays"):
            assert ok(await lookalike.call_tool("recall", {"query": query,
                                                           "strategy": "fulltext"}))["count"] == 0
        ok(await ada.call_tool("remember", {"content": "Ada prefers Vim", "key": "pref-vim"}))
    code, _, refused = run_cli("forget", "pref-vim", "--yes", "--user", "Ada", *db)
    _, _, unknown = run_cli("forget", "nothing", "--yes", "--user", "Ada", *db)
    assert "no memory with key" in unknown
    assert code == 1
    assert refused.replace("'pref-vim'", "K") == unknown.replace("'nothing'", "K")
    code, out, err = run_cli("forget", "pref-vim", "--yes", "--user", "ada", *db)
    assert (code, out.split()[1]) == (0, "chat:user:ada:key:pref-vim"), err
    assert run_cli("restore", "pref-vim", "--user", "\u0430da", *db)[0] == 1
    assert run_cli("restore", "pref-vim", "--user", "ada", *db)[:2] == (
        0, "restored chat:user:ada:key:pref-vim\n")
    assert "bike" in run_cli("context", "--user", "ada", *db)[1]
    code, out, _ = run_cli("context", "--user", "\u0430da", *db)
    assert code == 0 and "bike" not in out and "plants" not in out
    code, _, err = run_cli("add", "Bob owes Ada", "--user", "ada", "--tag", "chat:user:bob", *db)
    assert code == 1 and "'chat:user:bob'" in err and "namespace" in err
