"""The MCP server end to end: a real server subprocess driven by the mcp SDK's own client.

Each test spawns ``python -m htm_integrations.mcp`` over stdio (or loopback streamable HTTP)
on a real SQLite file with the hashing embedder; nothing touches the network.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from htm_core import HTM, HashingEmbedder
from htm_core.scope import ChatScope, login_user
from htm_integrations.mcp.server import build_server, main, parse_args

ROOT = Path(__file__).resolve().parents[2]
def login_key(key: str) -> str:
    """The key a server run by this account without ``--user`` stores a given ``key`` under."""
    return ChatScope.of(user_id=login_user()).own_key(key)


VIM = "chat:user:ada:key:pref-vim"
TOOLS = {"remember", "recall", "retrieve", "forget", "restore", "list_memories",
         "create_context", "stats", "list_robots", "tags"}


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTM_")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "PYTHONPATH": str(ROOT)}, **extra)
    return env


@asynccontextmanager
async def connect(db: str, robot: str, *extra_args: str, errlog: Path | None = None,
                  env: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """A client session with a fresh server subprocess over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "htm_integrations.mcp", "--db", db, "--robot", robot, "--embedder",
              "hashing", *extra_args],
        env=env or server_env(), cwd=str(ROOT))
    with open(errlog or os.devnull, "w") as log:
        async with Client(stdio_client(params, errlog=log), cache=None,
                          read_timeout_seconds=60) as client:
            yield client


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    assert result.structured_content is None
    return " ".join(getattr(c, "text", "") for c in result.content)


async def test_lists_the_tools_and_the_context_resource(sqlite_url: str) -> None:
    async with connect(sqlite_url, "lister") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        forget = tools["forget"].input_schema
        assert forget["properties"]["confirm"]["type"] == "boolean"
        assert forget["required"] == ["key"]
        assert tools["forget"].annotations is not None
        assert tools["forget"].annotations.destructive_hint is True
        assert tools["recall"].input_schema["required"] == ["query"]
        resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["htm://context"]
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["htm://context/{strategy}"]
        assert client.server_info is not None
        assert client.server_info.name == "htm"


async def test_every_tool_round_trip(sqlite_url: str, tmp_path: Path) -> None:
    errlog = tmp_path / "server.log"
    async with connect(sqlite_url, "assistant", "--log-level", "INFO", "--user", "ada",
                       errlog=errlog) as client:
        vim = ok(await client.call_tool("remember", {
            "content": "User prefers Vim keybindings", "importance": 9,
            "tags": ["user:preferences:editor"], "key": "pref-vim",
            "metadata": {"source": "chat"}}))
        assert vim["key"] == VIM  # a given key is stored inside the user's scope
        assert vim["robot"] == "assistant"
        assert sorted(vim["tags"]) == ["chat:user:ada", "chat:user:ada:tag:user:preferences:editor",
                                       "user:preferences:editor"]
        assert vim["metadata"] == {"source": "chat"}
        assert vim["in_working_memory"] is True
        ok(await client.call_tool("remember", {"content": "The deploy runs on Fridays",
                                               "tags": ["ops"]}))
        ok(await client.call_tool("remember", {"content": "Lunch was a sandwich"}))

        hits = ok(await client.call_tool("recall", {"query": "Vim keybindings", "limit": 2}))
        assert hits["count"] == len(hits["hits"]) >= 1
        assert hits["hits"][0]["key"] == VIM
        assert hits["hits"][0]["score"] > 0
        tagged = ok(await client.call_tool("recall", {"query": "deploy Fridays",
                                                      "tags": ["ops"], "strategy": "fulltext"}))
        assert [h["content"] for h in tagged["hits"]] == ["The deploy runs on Fridays"]
        today = ok(await client.call_tool("recall", {"query": "sandwich", "timeframe": "today",
                                                     "strategy": "fulltext"}))
        assert [h["content"] for h in today["hits"]] == ["Lunch was a sandwich"]
        ok_none = ok(await client.call_tool("recall", {"query": "sandwich",
                                                       "timeframe": "2001-01-01..2001-02-01"}))
        assert ok_none["count"] == 0

        found = ok(await client.call_tool("retrieve", {"key": "pref-vim"}))
        assert found["found"] is True
        assert found["content"] == "User prefers Vim keybindings"
        assert ok(await client.call_tool("retrieve", {"key": "nope"})) == {"found": False,
                                                                          "key": "nope"}

        ctx = ok(await client.call_tool("create_context", {"strategy": "important",
                                                           "max_tokens": 1000}))
        assert ctx["keys"][0] == VIM
        assert "User prefers Vim keybindings" in ctx["text"]
        assert 0 < ctx["tokens"] <= ctx["budget"] < 1000

        resource = await client.read_resource("htm://context")
        assert "User prefers Vim keybindings" in resource.contents[0].text
        by_strategy = await client.read_resource("htm://context/recent")
        assert "Lunch was a sandwich" in by_strategy.contents[0].text

        refused = error_text(await client.call_tool("forget", {"key": "pref-vim"}))
        assert "ConfirmationRequiredError" in refused and "confirm=True" in refused
        assert ok(await client.call_tool("retrieve", {"key": "pref-vim"}))["found"] is True
        gone = ok(await client.call_tool("forget", {"key": "pref-vim", "confirm": True}))
        assert gone["forgotten"] is True
        after = ok(await client.call_tool("recall", {"query": "Vim keybindings"}))
        assert VIM not in [h["key"] for h in after["hits"]]
        back = ok(await client.call_tool("restore", {"key": "pref-vim"}))
        assert back["forgotten"] is False
        again = ok(await client.call_tool("recall", {"query": "Vim keybindings"}))
        assert again["hits"][0]["key"] == VIM

        stats = ok(await client.call_tool("stats", {}))
        assert stats["robot"] == "assistant"
        assert stats["backend"] == "sqlite"
        assert stats["long_term_total"] == 3
        assert stats["forgotten"] == 0
        assert stats["embedder"].startswith("hashing")
        assert stats["embedding_calls"] >= 3
        assert 0 < stats["working_memory_utilisation"] < 1
        metrics = stats["extra"]["metrics"]
        assert metrics["adds"] == 3
        assert metrics["forgets"] == 1
        assert metrics["latency_ms"]["recall"]["count"] == 6

        robots = ok(await client.call_tool("list_robots", {}))["robots"]
        assert [r["name"] for r in robots] == ["assistant"]
        assert ok(await client.call_tool("tags", {}))["tags"] == {
            "user:preferences:editor": 1, "ops": 1}
    log = errlog.read_text()
    assert "tool forget refused: ConfirmationRequiredError" in log
    assert "htm robot=assistant" in log


BAD_INPUT = [
    ("remember", {"content": "   "}, "InvalidContentError"),
    ("remember", {"content": "nul\x00byte"}, "InvalidContentError"),
    ("remember", {"content": "x", "importance": 11}, "InvalidImportanceError"),
    ("remember", {"content": "x", "tags": ["not a tag!"]}, "InvalidTagError"),
    ("remember", {"content": "x", "metadata": "not an object"}, "validation error"),
    ("remember", {}, "content"),
    ("recall", {"query": "x", "strategy": "psychic"}, "UnknownStrategyError"),
    ("recall", {"query": "x", "timeframe": "when pigs fly"}, "TimeframeError"),
    ("recall", {"query": "x", "limit": 0}, "InvalidBudgetError"),
    ("recall", {"query": "x", "limit": "many"}, "valid integer"),
    ("recall", {"query": ""}, "InvalidContentError"),
    ("retrieve", {"key": ""}, "InvalidKeyError"),
    ("forget", {"key": "missing", "confirm": True}, "NotFoundError"),
    ("restore", {"key": "missing"}, "NotFoundError"),
    ("create_context", {"strategy": "random"}, "UnknownStrategyError"),
    ("create_context", {"max_tokens": -5}, "InvalidBudgetError"),
]


async def test_bad_input_is_a_tool_error_and_the_server_survives(sqlite_url: str) -> None:
    """One server takes every bad call in turn (a server per case would cost seconds each)."""
    async with connect(sqlite_url, "strict") as client:
        for tool, args, expected in BAD_INPUT:
            text = error_text(await client.call_tool(tool, args))
            assert expected in text, (tool, args, text)
        assert ok(await client.call_tool("stats", {}))["long_term_total"] == 0  # nothing written
        assert ok(await client.call_tool("remember", {"content": "still serving"}))["id"] == 1


async def test_two_robots_on_one_database_share_long_term_memory(store_url: str) -> None:
    """Two server processes, two robots, one database (every backend in ``BACKENDS``)."""
    async with connect(store_url, "alpha") as alpha, \
            connect(store_url, "beta", "--telemetry") as beta:
        ok(await alpha.call_tool("remember", {"content": "Alpha learned the wifi password",
                                              "key": "wifi"}))
        ok(await beta.call_tool("remember", {"content": "Beta booked the meeting room"}))

        seen = ok(await beta.call_tool("recall", {"query": "wifi password",
                                                  "robot": "alpha"}))
        assert [(h["key"], h["robot"]) for h in seen["hits"]] == [(login_key("wifi"), "alpha")]
        other = ok(await alpha.call_tool("recall", {"query": "meeting room booked",
                                                    "strategy": "fulltext"}))
        assert [h["robot"] for h in other["hits"]] == ["beta"]
        assert ok(await beta.call_tool("retrieve", {"key": "wifi"}))["robot"] == "alpha"

        robots = ok(await alpha.call_tool("list_robots", {}))["robots"]
        assert sorted(r["name"] for r in robots) == ["alpha", "beta"]
        a_stats = ok(await alpha.call_tool("stats", {}))
        b_stats = ok(await beta.call_tool("stats", {}))
        assert a_stats["long_term_total"] == b_stats["long_term_total"] == 2
        assert (a_stats["long_term_robot"], b_stats["long_term_robot"]) == (1, 1)
        assert b_stats["extra"]["metrics"]["telemetry"] is True
        assert a_stats["extra"]["metrics"]["telemetry"] is False

        # Working memory is per robot: beta's context holds what beta recalled, not alpha's.
        alpha_ctx = ok(await alpha.call_tool("create_context", {}))
        assert "Beta booked the meeting room" in alpha_ctx["text"]  # alpha recalled it
        beta_ctx = ok(await beta.call_tool("create_context", {"strategy": "recent"}))
        assert beta_ctx["keys"][0] == login_key("wifi")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_streamable_http_on_loopback(sqlite_url: str, tmp_path: Path) -> None:
    port = free_port()
    log = open(tmp_path / "http.log", "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [sys.executable, "-m", "htm_integrations.mcp", "--http", "--port", str(port), "--db",
         sqlite_url, "--robot", "web", "--embedder", "hashing"],
        env=server_env(), cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, (tmp_path / "http.log").read_text()
            assert time.monotonic() < deadline, "the HTTP server did not start in 30 s"
            time.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp", cache=None) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            ok(await client.call_tool("remember", {"content": "served over HTTP", "key": "h"}))
            assert ok(await client.call_tool("retrieve", {"key": "h"}))["robot"] == "web"
        foreign = httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=10,
                             headers={"Host": "attacker.example", "Accept": "application/json"})
        assert foreign.status_code == 421  # DNS-rebinding protection: foreign Host refused
        listening = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                                   text=True, check=False).stdout
        if listening:  # `ss` is there: the one listening socket is bound to loopback only
            assert [line.split()[3] for line in listening.splitlines()] == [f"127.0.0.1:{port}"]
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()
    with HTM(database_url=sqlite_url, embedder=HashingEmbedder(), robot="checker") as htm:
        memory = htm.retrieve(login_key("h"))
        assert memory is not None and memory.robot == "web"


def start_line(proc: subprocess.Popen[str], deadline: float) -> str:
    """The server's first stderr line naming its address (log lines before it are skipped)."""
    assert proc.stderr is not None
    seen: list[str] = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.2)
        if not ready:
            assert proc.poll() is None, "".join(seen)
            continue
        line = proc.stderr.readline()
        assert line, f"the server ended without printing its address: {''.join(seen)}"
        if line.startswith("htm mcp on "):
            return line
        seen.append(line)
    raise AssertionError(f"no address line within 30 s: {''.join(seen)}")


def initialize(url: str, deadline: float) -> httpx.Response:
    """POST an MCP ``initialize`` request to ``url``, retrying while the port is not yet open."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "test", "version": "0"}}}
    while True:
        try:
            return httpx.post(url, json=request, timeout=10,
                              headers={"Accept": "application/json, text/event-stream"})
        except httpx.ConnectError:
            assert time.monotonic() < deadline, f"nothing answered on {url} within 30 s"
            time.sleep(0.1)


def test_http_start_prints_the_address_it_serves(sqlite_url: str) -> None:
    """``--http`` says on stderr, in one line, the URL an MCP client connects to."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "htm_integrations.mcp", "--http", "--port", str(port), "--db",
         sqlite_url, "--robot", "Ada:web", "--embedder", "hashing"],
        env=server_env(), cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    try:
        deadline = time.monotonic() + 30
        line = start_line(proc, deadline)
        assert line.endswith("\n") and line.count("\n") == 1
        url = line.split()[3]
        assert url == f"http://127.0.0.1:{port}/mcp"
        assert "robot Ada:web" in line
        answer = initialize(url, deadline)
        assert answer.status_code == 200, answer.text
        assert '"serverInfo"' in answer.text and '"name":"htm"' in answer.text
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        assert proc.stderr is not None
        proc.stderr.close()


def test_main_reports_an_unusable_database_and_exits_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(tmp_path), "--embedder", "hashing"]) == 2  # a directory
    err = capsys.readouterr().err
    assert err.startswith("htm mcp: DatabaseUnavailableError")


def test_arguments_are_checked() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--port", "70000"])
    with pytest.raises(SystemExit):
        parse_args(["--log-level", "LOUD"])
    args = parse_args(["--robot", "r", "--db", "x.db", "--http", "--port", "9000"])
    assert (args.robot, args.db, args.http, args.port) == ("r", "x.db", True, 9000)


async def test_build_server_in_process(sqlite_url: str) -> None:
    """``build_server`` wraps an HTM the caller owns; the SDK client connects in process."""
    with HTM(database_url=sqlite_url, embedder=HashingEmbedder(), robot="inproc") as htm:
        server = build_server(htm)
        async with Client(server, cache=None) as client:
            ok(await client.call_tool("remember", {"content": "in process", "key": "ip"}))
        assert htm.retrieve(login_key("ip")) is not None


@pytest.mark.parametrize(("hide", "expected"), [
    ("mcp", 'mcp is not installed; install it with: pip install -e ".[mcp]" from the root'),
    ("mcp.server.mcpserver", 'needs the mcp SDK 2.x (MCPServer); upgrade it with: pip install -U'),
])
def test_a_missing_or_old_sdk_names_the_extra(hide: str, expected: str) -> None:
    """The SDK is installed here, so its absence (or a 1.x without MCPServer) is simulated by
    blocking the module in a fresh interpreter."""
    code = (f"import sys; sys.modules[{hide!r}] = None\n"
            "from htm_core.errors import MissingDependencyError\n"
            "try:\n    import htm_integrations.mcp\n"
            "except MissingDependencyError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=server_env(), cwd=str(ROOT), timeout=60, check=True)
    assert expected in out.stdout, out.stderr


def test_docs_cover_every_flag_and_tool() -> None:
    """docs/mcp.md names every command-line flag, tool and resource the server has."""
    from htm_integrations.mcp.command import _parser

    doc = (ROOT / "docs" / "mcp.md").read_text()
    flags = {opt for action in _parser()._actions for opt in action.option_strings
             if opt.startswith("--") and opt not in ("--help", "--database-url")}
    assert {f for f in flags if f"`{f}" not in doc} == set()
    assert {t for t in TOOLS if f"| `{t}` |" not in doc} == set()
    assert "`htm://context`" in doc and "`htm://context/{strategy}`" in doc


async def test_each_user_sees_only_their_own_memory(store_url: str) -> None:
    """Two server processes for Ada and Bob on one database, then a restart of Bob's; the
    shared server and a --shared-tag see across users, on purpose."""
    async with connect(store_url, "assistant", "--user", "ada") as ada:
        ok(await ada.call_tool("remember", {"content": "Ada's locker code is 4711",
                                            "key": "ada-locker", "tags": ["personal"]}))
        ok(await ada.call_tool("remember", {"content": "Ada's project deadline is in May",
                                            "tags": ["work"]}))
        for generation in range(2):
            async with connect(store_url, "assistant", "--user", "bob") as bob:
                if generation == 0:
                    ok(await bob.call_tool("remember", {"content": "Bob's locker code is 9350",
                                                        "tags": ["personal"]}))
                hits = ok(await bob.call_tool("recall", {"query": "locker code", "limit": 10}))
                assert [h["content"] for h in hits["hits"]] == ["Bob's locker code is 9350"]
                tagged = ok(await bob.call_tool("recall", {"query": "locker code",
                                                           "tags": ["personal"]}))
                assert [h["content"] for h in tagged["hits"]] == ["Bob's locker code is 9350"]
                assert ok(await bob.call_tool("retrieve", {"key": "ada-locker"}))["found"] is False
                refused = error_text(await bob.call_tool("forget", {"key": "ada-locker",
                                                                    "confirm": True}))
                assert "NotFoundError" in refused
                context = ok(await bob.call_tool("create_context", {}))
                assert "4711" not in context["text"] and "9350" in context["text"]
                resource = await bob.read_resource("htm://context")
                assert "4711" not in resource.contents[0].text
                assert ok(await bob.call_tool("tags", {}))["tags"] == {"personal": 1}
        mine = ok(await ada.call_tool("recall", {"query": "locker code", "tags": ["personal"]}))
        assert [h["key"] for h in mine["hits"]] == ["chat:user:ada:key:ada-locker"]
        assert "9350" not in ok(await ada.call_tool("create_context", {}))["text"]
    async with connect(store_url, "assistant", "--shared") as everyone:
        hits = ok(await everyone.call_tool("recall", {"query": "locker code", "limit": 10,
                                                      "strategy": "fulltext"}))
        assert {h["content"] for h in hits["hits"]} == {"Bob's locker code is 9350",
                                                        "Ada's locker code is 4711"}
    with HTM(database_url=store_url, embedder=HashingEmbedder(), robot="kb") as htm:
        htm.add("Lockers are emptied on Fridays", tags=["kb"])
        server = build_server(htm, user_id="carol", shared_tags=["kb"])
        async with Client(server, cache=None) as carol:
            hits = ok(await carol.call_tool("recall", {"query": "locker code", "limit": 10}))
            assert [h["content"] for h in hits["hits"]] == ["Lockers are emptied on Fridays"]


async def test_kinds_in_remember_recall_and_list_memories(sqlite_url: str) -> None:
    """``remember`` takes a kind, source and confidence (or the rules give the kind);
    ``recall`` and ``list_memories`` filter by kinds, each user (``Ada``, ``ada``) seeing
    only their own memories of the kind."""
    for user in ("Ada", "ada"):
        async with connect(sqlite_url, "assistant", "--user", user) as client:
            fact = ok(await client.call_tool("remember", {
                "content": f"{user}'s venue is the old mill", "kind": "fact",
                "source": "user", "confidence": 0.9}))
            assert (fact["kind"], fact["source"], fact["confidence"]) == ("fact", "user", 0.9)
            ruled = ok(await client.call_tool("remember", {"content": "I prefer the mill"}))
            assert (ruled["kind"], ruled["confidence"]) == ("preference", 0.85)
            ok(await client.call_tool("remember", {"content": "we visited the mill today"}))
            bad = await client.call_tool("remember", {"content": "x", "kind": "facts"})
            assert "kind must be one of" in error_text(bad)
    for user in ("Ada", "ada"):
        async with connect(sqlite_url, "assistant", "--user", user) as client:
            hits = ok(await client.call_tool("recall", {"query": "venue mill", "kinds": ["fact"],
                                                        "min_score": 0}))
            assert [h["content"] for h in hits["hits"]] == [f"{user}'s venue is the old mill"]
            listed = ok(await client.call_tool("list_memories", {
                "kinds": ["fact", "preference"], "limit": 1}))
            assert listed["count"] == 1 and listed["next_cursor"] is not None
            rest = ok(await client.call_tool("list_memories", {
                "kinds": ["fact", "preference"], "limit": 1, "cursor": listed["next_cursor"]}))
            assert [(m["kind"], m["content"]) for m in listed["memories"] + rest["memories"]] == [
                ("fact", f"{user}'s venue is the old mill"), ("preference", "I prefer the mill")]


async def test_sources_and_min_confidence_in_recall_and_list_memories(sqlite_url: str) -> None:
    """``recall`` and ``list_memories`` filter by exact sources and a least confidence
    (a memory without one never passes), each user (``Ada``, ``ada``) seeing only their own;
    a bad filter is refused with what to give."""
    for user in ("Ada", "ada"):
        async with connect(sqlite_url, "assistant", "--user", user) as client:
            for source, confidence in [("user", 0.9), ("User", 0.9), ("user", 0.2),
                                       ("user:x", 1.0), ("user", None)]:
                ok(await client.call_tool("remember", {
                    "content": f"{user} {source} {confidence}: the venue is the mill",
                    "kind": "episodic", "source": source, "confidence": confidence}))
    for user in ("Ada", "ada"):
        async with connect(sqlite_url, "assistant", "--user", user) as client:
            hits = ok(await client.call_tool("recall", {
                "query": "venue mill", "sources": ["user"], "min_confidence": 0.5,
                "min_score": 0}))
            assert [h["content"] for h in hits["hits"]] == [
                f"{user} user 0.9: the venue is the mill"]
            listed = ok(await client.call_tool("list_memories", {"sources": ["user"]}))
            assert sorted(m["confidence"] or 0 for m in listed["memories"]) == [0, 0.2, 0.9]
            assert {m["content"].split(":")[0] for m in listed["memories"]} <= {
                f"{user} user 0.9", f"{user} user 0.2", f"{user} user None"}
            sure = ok(await client.call_tool("list_memories", {"min_confidence": 1}))
            assert [m["source"] for m in sure["memories"]] == ["user:x"]
            bad = await client.call_tool("recall", {"query": "venue", "min_confidence": 2})
            assert "min_confidence must be a number from 0 to 1" in error_text(bad)
            bad = await client.call_tool("list_memories", {"sources": [" "]})
            assert "source must be a non-blank string" in error_text(bad)
