"""Users on one store never reach each other's memories, on any surface (a property test).

A Hypothesis state machine drives several users (and sessions) on one store, on SQLite and
on PostgreSQL, through the real surfaces: the MCP server (``build_server``, called through
the ``mcp`` SDK's in-memory client), the LangChain agent tools, ``HTMRetriever`` and
``HTMChatMessageHistory``, the LlamaIndex ``HTMVectorStore`` and ``HTMMemory``, and the
``htm`` command (in process, and in a second OS process). The user ids are drawn to
collide: letter case, Unicode lookalikes (Latin and Cyrillic ``a``, NFC and NFD ``é``),
separators, a trailing ``:``, and an id spelling the hashed slug of another. The users
remember the same sentences and give the same keys; they recall, forget, restore and
re-remember, each through any surface, and try each other's keys.

The model keeps, per user, the memories that user wrote and whether each is forgotten.
Checked after every step, for every user: the store holds under the user's scope (tag and
key prefix) exactly the model's memories, content and state; every recall, context, count
and message list of a surface acting for the user shows only that user's memories and
shows what the user remembered and did not forget; a forget, restore or re-remember
through a user never changes another's memory; a refusal reads the same for another
user's key as for a key that does not exist.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

pytest.importorskip("mcp")
pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.messages import HumanMessage
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from mcp import Client

from htm_core import HTM, HashingEmbedder
from htm_core.cli import main as htm_main
from htm_core.scope import ChatScope, id_slug
from htm_integrations.langchain import HTMChatMessageHistory, HTMRetriever, HTMStore, htm_tools
from htm_integrations.llama_index import HTMMemory, HTMVectorStore
from htm_integrations.mcp.server import build_server

#: Ids drawn to collide: case, lookalikes, normal forms, separators, a hashed slug.
USERS = ["Ada", "ada", "ADA", "\u0430da", "\u00e9va", "e\u0301va", "a:b", "a/b", "a_b",
         "a-b", "a%b", "a:", id_slug("a:b")]
SESSIONS = ["s1", "S1", "s:1"]
#: Each sentence has one word no other has, so a full-text recall for it is exact.
SENTENCES = ["The locker code is 4711", "Ada prefers Vim keybindings",
             "The bike stands in the cellar", "Standup moved to Tuesday",
             "The orchid needs water weekly"]
WORDS = ["locker", "Vim", "cellar", "Tuesday", "orchid"]
KEYS = ["pref", "Pref", "pref:1", "a:b", "h-0123456789abcdef0123456789abcdef"]
DB = ("--embedder", "hashing")
#: The acting robot of the commands that write (``recall --robot`` filters instead).
AS_SHELL = ("--robot", "shell")
NO_USER_ENV = {k: v for k, v in os.environ.items() if k != "HTM_USER"}


def _word(content: str) -> str | None:
    return next((w for w in WORDS if w in content), None)


class Model:
    """What each user wrote: stored key -> [content, forgotten]."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, list[Any]]] = {}

    def of(self, user: str) -> dict[str, list[Any]]:
        return self.users.setdefault(user, {})

    def alive(self, user: str) -> dict[str, str]:
        return {k: c for k, (c, gone) in self.of(user).items() if not gone}

    def resolve(self, user: str, key: str) -> str | None:
        """The stored key ``key`` names in the user's scope (what ``ChatScope.find`` does)."""
        mine = self.of(user)
        if key in mine:
            return key
        own = f"{ChatScope.of(user_id=user).key_prefix}key:{key}"
        return own if own in mine else None

    def wrote(self, user: str, key: str, content: str) -> None:
        self.of(user)[key] = [content, False]

    def others_keys(self, user: str) -> set[str]:
        return {k for u, mine in self.users.items() if u != user for k in mine}


class Surfaces:
    """The surfaces acting for each user, over one store at ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.app = HTM(robot="app", database_url=url, embedder=HashingEmbedder())
        self.mcp_htm = HTM(robot="assistant", database_url=url, embedder=HashingEmbedder())
        self.servers: dict[str, Any] = {}

    def close(self) -> None:
        self.app.close()
        self.mcp_htm.close()

    def mcp(self, user: str, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """``(ok, structured result or error text)`` of one MCP tool call as ``user``."""
        if user not in self.servers:
            self.servers[user] = build_server(self.mcp_htm, user_id=user)

        async def call() -> Any:
            async with Client(self.servers[user], cache=None) as client:
                return await client.call_tool(tool, args)

        result = asyncio.run(call())
        if result.is_error:
            return False, " ".join(getattr(c, "text", "") for c in result.content)
        return True, result.structured_content

    def cli(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        acting = () if argv[0] == "recall" else AS_SHELL
        code = htm_main([*argv, "--db", self.url, *DB, *acting], stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    def tools(self, user: str) -> dict[str, Any]:
        return {t.name: t for t in htm_tools(self.app, user_id=user, recall_limit=20)}

    def vector_store(self, user: str) -> HTMVectorStore:
        return HTMVectorStore(htm=self.app, user_id=user)


class ScopesMachine(RuleBasedStateMachine):
    """Users of :data:`USERS` on one fresh store (``make_url`` gives one per example)."""

    make_url: Callable[[], Iterator[str]] = staticmethod(lambda: iter(()))  # type: ignore

    def __init__(self) -> None:
        super().__init__()
        self._url_source = type(self).make_url()
        self.s = Surfaces(next(self._url_source))
        self.model = Model()
        self.processes = 0
        self.items: dict[tuple[str, str], str] = {}  # LangGraph items: (user, key) -> text

    def teardown(self) -> None:
        self.s.close()
        self._url_source.close()

    # -- writes ---------------------------------------------------------------------------

    def _write(self, user: str, key: str | None, content: str,
               do: Callable[[], tuple[bool, Any]], given: str | None = None) -> None:
        """Run a write of ``content`` (under ``key`` in the scope, if known beforehand) and
        check it against the model: a key holding other text refuses, else it is stored."""
        held = self.model.of(user).get(key) if key is not None else None
        ok, got = do()
        if held is not None and held[0] != content:
            assert not ok and "already holds different content" in got, got
            self._no_foreign(user, got, given=(content, *([given] if given else [])))
            return
        assert ok, got
        stored = got if key is None else key
        self.model.wrote(user, stored, content)

    @rule(user=st.sampled_from(USERS), n=st.integers(0, len(SENTENCES) - 1),
          key=st.one_of(st.none(), st.sampled_from(KEYS)))
    def mcp_remember(self, user: str, n: int, key: str | None) -> None:
        scope = ChatScope.of(user_id=user)
        text = SENTENCES[n]
        stored = scope.own_key(key) if key is not None else scope.note_key(text)
        args = {"content": text, **({"key": key} if key is not None else {})}

        def do() -> tuple[bool, Any]:
            ok, got = self.s.mcp(user, "remember", args)
            return ok, (got["key"] if ok else got)
        self._write(user, stored, text, do, given=key)

    @rule(user=st.sampled_from(USERS), n=st.integers(0, len(SENTENCES) - 1))
    def tool_remember(self, user: str, n: int) -> None:
        text = SENTENCES[n]

        def do() -> tuple[bool, Any]:
            said = self.s.tools(user)["remember"].invoke({"content": text})
            found = re.match(r"Remembered \[(.+?)\]: ", said)
            return found is not None, (found.group(1) if found else said)
        self._write(user, ChatScope.of(user_id=user).note_key(text), text, do)

    @rule(user=st.sampled_from(USERS), n=st.integers(0, len(SENTENCES) - 1),
          key=st.one_of(st.none(), st.sampled_from(KEYS)))
    def cli_add(self, user: str, n: int, key: str | None) -> None:
        scope = ChatScope.of(user_id=user)
        text = SENTENCES[n]
        stored = scope.own_key(key) if key is not None else scope.note_key(text)

        def do() -> tuple[bool, Any]:
            code, out, err = self.s.cli("add", text, "--user", user,
                                        *(("--key", key) if key is not None else ()))
            return code == 0, (out.strip() if code == 0 else err)
        self._write(user, stored, text, do, given=key)

    @rule(user=st.sampled_from(USERS), n=st.integers(0, len(SENTENCES) - 1))
    def vector_add(self, user: str, n: int) -> None:
        store = self.s.vector_store(user)
        node = TextNode(text=SENTENCES[n], id_=f"node-{n}")

        def do() -> tuple[bool, Any]:
            store.add([node])
            return True, store.key_for(node.node_id)
        self._write(user, store.key_for(node.node_id), SENTENCES[n], do)

    @rule(user=st.sampled_from(USERS), session=st.sampled_from(SESSIONS),
          n=st.integers(0, len(SENTENCES) - 1), llama=st.booleans())
    def chat_turn(self, user: str, session: str, n: int, llama: bool) -> None:
        """A turn of the user's session through LangChain's history or LlamaIndex's memory;
        each adapter's messages are then the session's turns the model holds."""
        prefix = ChatScope.of(user_id=user).key_prefix
        before = set(self._listed(prefix))
        if llama:
            HTMMemory.from_defaults(htm=self.s.app, user_id=user, session_id=session).put(
                ChatMessage(role="user", content=SENTENCES[n]))
        else:
            HTMChatMessageHistory(htm=self.s.app, session_id=session, user_id=user
                                  ).add_messages([HumanMessage(SENTENCES[n])])
        after = self._listed(prefix)
        new = set(after) - before
        assert len(new) == 1, new  # the turn's key lies in the user's scope
        key = new.pop()
        assert SENTENCES[n] in after[key][0]
        self.model.wrote(user, key, after[key][0])

    @rule(user=st.sampled_from(USERS), session=st.sampled_from(SESSIONS))
    def chat_read(self, user: str, session: str) -> None:
        alive = " | ".join(self.model.alive(user).values())
        history = HTMChatMessageHistory(htm=self.s.app, session_id=session, user_id=user)
        memory = HTMMemory.from_defaults(htm=self.s.app, user_id=user, session_id=session)
        for text in [m.content for m in history.messages] + \
                [m.content for m in memory.get_all()]:
            assert isinstance(text, str) and text in alive, (user, session, text)

    @rule(user=st.sampled_from(USERS), key=st.sampled_from(["pref", "Pref"]),
          n=st.integers(0, len(SENTENCES) - 1), delete=st.booleans())
    def langgraph_put(self, user: str, key: str, n: int, delete: bool) -> None:
        """LangGraph's store, one namespace per user: a put over an item is an update."""
        store = HTMStore(htm=self.s.app)
        if delete:
            store.delete(("users", user), key)
            self.items.pop((user, key), None)
        else:
            store.put(("users", user), key, {"text": SENTENCES[n]})
            self.items[(user, key)] = SENTENCES[n]

    # -- reads ----------------------------------------------------------------------------

    def _check_hits(self, user: str, word: str, keys: list[str], *, complete: bool) -> None:
        alive = self.model.alive(user)
        assert set(keys) <= set(alive), (user, set(keys) - set(alive))
        if complete:
            assert set(keys) >= {k for k, c in alive.items() if word in c}, (user, word)

    @rule(user=st.sampled_from(USERS), word=st.sampled_from(WORDS),
          surface=st.sampled_from(["mcp", "tools", "retriever", "cli", "vector"]))
    def recall(self, user: str, word: str, surface: str) -> None:
        if surface == "mcp":
            ok, got = self.s.mcp(user, "recall", {"query": word, "limit": 50,
                                                  "strategy": "fulltext"})
            assert ok, got
            self._check_hits(user, word, [h["key"] for h in got["hits"]], complete=True)
        elif surface == "tools":
            said = self.s.tools(user)["recall"].invoke({"query": word})
            self._check_hits(user, word, re.findall(r"^- \[(.+?)\] ", said, re.M),
                             complete=False)
        elif surface == "retriever":
            docs = HTMRetriever(htm=self.s.app, user_id=user, k=50,
                                strategy="fulltext").invoke(word)
            self._check_hits(user, word, [d.metadata["key"] for d in docs], complete=True)
        elif surface == "cli":
            code, out, err = self.s.cli("recall", word, "--user", user, "--json",
                                        "--limit", "50", "--strategy", "fulltext")
            assert code == 0, err
            keys = [json.loads(line)["key"] for line in out.splitlines()]
            self._check_hits(user, word, keys, complete=True)
        else:
            store = self.s.vector_store(user)
            found = store.query(VectorStoreQuery(query_str=word, similarity_top_k=50))
            self._check_hits(user, word, [store.key_for(i) for i in found.ids or []],
                             complete=False)

    @rule(user=st.sampled_from(USERS))
    def mcp_context_and_counts(self, user: str) -> None:
        """The user's context, tag list, figures and robot list count only the user's."""
        ok, ctx = self.s.mcp(user, "create_context", {})
        assert ok and set(ctx["keys"]) <= set(self.model.alive(user)), ctx
        ok, stats = self.s.mcp(user, "stats", {})
        assert ok, stats
        mine = self.model.of(user)
        assert stats["long_term_total"] == len(self.model.alive(user)), stats
        assert stats["forgotten"] == len(mine) - len(self.model.alive(user)), stats
        ok, robots = self.s.mcp(user, "list_robots", {})
        assert ok, robots
        counted = sum(r["memory_count"] for r in robots["robots"])
        assert counted == len(self.model.alive(user)), robots

    @rule(user=st.sampled_from(USERS), word=st.sampled_from(WORDS))
    @precondition(lambda self: self.processes < 1)
    def cli_in_another_process(self, user: str, word: str) -> None:
        """``htm recall --user`` in a second OS process sees the user's memories only."""
        self.processes += 1
        env = {**NO_USER_ENV, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        done = subprocess.run(
            [sys.executable, "-m", "htm_core.cli", "recall", word, "--user", user, "--json",
             "--limit", "50", "--strategy", "fulltext", "--db", self.s.url, *DB],
            capture_output=True, text=True, env=env, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        keys = [json.loads(line)["key"] for line in done.stdout.splitlines()]
        self._check_hits(user, word, keys, complete=True)

    # -- forget, restore, re-remember ----------------------------------------------------

    def _target(self, data: st.DataObject) -> str:
        """A key to try: one any user stored, or one any user gave."""
        stored = sorted(k for mine in self.model.users.values() for k in mine)
        return data.draw(st.sampled_from(stored + KEYS) if stored else st.sampled_from(KEYS))

    def _no_foreign(self, user: str, text: str, *, given: tuple[str, ...]) -> None:
        """An error shown to ``user`` names no key of another scope the caller did not give."""
        for said in given:
            text = text.replace(said, "")
        for key in self.model.others_keys(user):
            assert key not in text, (user, key, text)

    def _refused_as_unknown(self, user: str, key: str, text: str,
                            ask: Callable[[str], str]) -> None:
        unknown = ask("never-there")
        assert text.replace(repr(key), "K") == unknown.replace("'never-there'", "K"), text
        self._no_foreign(user, text, given=(key,))

    @rule(user=st.sampled_from(USERS), data=st.data(),
          surface=st.sampled_from(["mcp", "tools", "cli"]))
    def forget(self, user: str, data: st.DataObject, surface: str) -> None:
        key = self._target(data)
        own = self.model.resolve(user, key)
        if surface == "tools":
            said = self.s.tools(user)["forget"].invoke({"key": key, "confirm": True})
            if own is None or self.model.of(user)[own][1]:  # unknown, or already forgotten
                assert said.startswith("No memory with key"), said
                self._no_foreign(user, said, given=(key,))
            else:
                assert said == f"Forgotten [{own}] (an operator can restore it).", said
                self.model.of(user)[own][1] = True
            return
        self._forget_or_restore(user, key, own, "forget", surface)

    @rule(user=st.sampled_from(USERS), data=st.data(), surface=st.sampled_from(["mcp", "cli"]))
    def restore(self, user: str, data: st.DataObject, surface: str) -> None:
        key = self._target(data)
        self._forget_or_restore(user, key, self.model.resolve(user, key), "restore", surface)

    def _forget_or_restore(self, user: str, key: str, own: str | None, op: str,
                           surface: str) -> None:
        def ask(k: str) -> str:
            if surface == "mcp":
                return str(self.s.mcp(user, op, {"key": k, "confirm": True} if op == "forget"
                                      else {"key": k})[1])
            argv = [op, k, "--user", user, *(["--yes"] if op == "forget" else [])]
            code, out, err = self.s.cli(*argv)
            return out if code == 0 else err

        said = ask(key)
        if own is None:
            self._refused_as_unknown(user, key, said, ask)
            return
        assert own in said, said
        self.model.of(user)[own][1] = op == "forget"

    @rule(user=st.sampled_from(USERS), data=st.data())
    def remember_under_anothers_key(self, user: str, data: st.DataObject) -> None:
        """Remembering under a key stored by any user (its stored form) writes in one's own
        scope; the other's memory is left as it was (the invariant checks it)."""
        key = self._target(data)
        self.mcp_remember(user, data.draw(st.integers(0, len(SENTENCES) - 1)), key)

    # -- the invariant ---------------------------------------------------------------------

    def _listed(self, prefix: str) -> dict[str, tuple[str, bool]]:
        page = self.s.app.list(key_prefix=prefix, include_forgotten=True, limit=10_000)
        return {m.key: (m.content, m.forgotten_at is not None) for m in page.memories}

    @invariant()
    def every_scope_holds_exactly_its_own(self) -> None:
        for user in USERS:
            scope = ChatScope.of(user_id=user)
            expected = {k: (c, gone) for k, (c, gone) in self.model.of(user).items()}
            assert self._listed(scope.key_prefix) == expected, user
            tagged = self.s.app.list(tags=[scope.recall_tag], include_forgotten=True,
                                     limit=10_000)
            assert {m.key for m in tagged.memories} == set(expected), user
            for memory in tagged.memories:  # no other scope's tag merged in
                chat = [t for t in memory.tags if t.split(":", 1)[0] == "chat"]
                assert all(t.startswith("chat:role:") or t == scope.recall_tag
                           or t.startswith(scope.key_prefix) for t in chat), memory.tags

    @invariant()
    def every_namespace_holds_exactly_its_items(self) -> None:
        found = HTMStore(htm=self.s.app).search(("users",), limit=1000)
        assert {(i.namespace[1], i.key): i.value["text"] for i in found} == self.items
        assert all(len(i.namespace) == 2 for i in found)


def _run(make_url: Callable[[], Iterator[str]]) -> None:
    machine = type("Machine", (ScopesMachine,), {"make_url": staticmethod(make_url)})
    run_state_machine_as_test(machine, settings=settings(
        max_examples=15, stateful_step_count=30, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_users_on_one_store_stay_in_their_scopes(backend: str,
                                                 request: pytest.FixtureRequest) -> None:
    """Every example gets a fresh store (a file, or a database on the test server)."""
    if backend == "sqlite":
        def make_url() -> Iterator[str]:
            with tempfile.TemporaryDirectory() as where:
                yield str(Path(where) / "htm.db")
    else:
        from tests.pg import fresh_database
        server = request.getfixturevalue("postgres_server_url")

        def make_url() -> Iterator[str]:
            yield from fresh_database(server)
    _run(make_url)
