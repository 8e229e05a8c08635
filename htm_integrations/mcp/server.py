"""The htm MCP server: one robot's memory as Model Context Protocol tools and a resource.

Run it over stdio (``htm mcp --robot assistant --db ~/htm.db``, or
``python -m htm_integrations.mcp``) or over streamable HTTP on a loopback port (``--http``).
Tools ``remember``, ``recall``, ``retrieve``, ``forget``, ``restore``, ``list_memories``,
``create_context``, ``stats``, ``list_robots`` and ``tags``; resources
``htm://context[/{strategy}]``. A server works in one user's memory (``--user``, default
``$HTM_USER``, else the login name); an :class:`~htm_core.errors.HTMError` becomes a tool
error result. :func:`build_server` builds one around an ``HTM`` you already have. See
docs/mcp.md.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from htm_core import HTM, HTMError, run_async
from htm_core import __version__ as htm_version
from htm_core.errors import MissingDependencyError, install_hint, missing_extra
from htm_core.models import Context, Robot, Stats
from htm_core.scope import check_topic_tags, login_user, scope_user
from htm_core.scoring import DEFAULT_MIN_SCORE
from htm_core.serialize import (
    context_to_dict,
    hit_to_dict,
    memory_to_dict,
    robot_to_dict,
    stats_to_dict,
)

from .._scope import ChatScope
from .command import main, parse_args

if importlib.util.find_spec("mcp") is None:
    raise missing_extra("mcp", "mcp")
try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    from mcp.types import ToolAnnotations
    from pydantic import Field
except ImportError:
    raise MissingDependencyError(
        "the htm MCP server needs the mcp SDK 2.x (MCPServer); upgrade it with: "
        + install_hint("mcp", upgrade=True)) from None

__all__ = ["build_server", "main", "parse_args"]

logger = logging.getLogger(__name__)

SERVER_NAME = "htm"
CONTEXT_URI = "htm://context"

_F = TypeVar("_F", bound=Callable[..., Any])


def default_user() -> str:
    """The user a server works for when none is given: ``$HTM_USER``, else the login name."""
    return scope_user() or login_user()


def scoped_stats(htm: HTM, scope: ChatScope) -> Stats:
    """``htm.stats()`` with every count of memories taken inside ``scope`` (long-term
    totals, forgotten, robots, the working memory's count and tokens), counted in the
    database. Unchanged for a shared scope (the whole store)."""
    return htm.stats(tags=scope.visible)


def scoped_robots(htm: HTM, scope: ChatScope) -> list[Robot]:
    """``htm.robots()``, inside ``scope``: the robots that wrote a memory it sees, each
    with the number of those memories (not forgotten) as ``memory_count``."""
    return htm.robots(tags=scope.visible)


#: The tools' parameters, described once (MCP clients show these to the model).
Content = Annotated[str, Field(description="The text to remember.")]
Importance = Annotated[float, Field(description="0 to 10; higher stays in working "
                                                "memory longer.")]
Tags = Annotated[list[str] | None, Field(description="Hierarchical tags such as "
                                                     "'user:preferences:editor'.")]
NewKey = Annotated[str | None, Field(description="A key for exact lookup, unique in your "
                                                 "memory; stored inside your scope. "
                                                 "Default derived from the content.")]
Metadata = Annotated[dict[str, Any] | None, Field(description="Any JSON object.")]
Kind = Annotated[str | None, Field(description="What the memory is: 'episodic', 'fact', "
                                               "'preference', 'skill', 'document', 'digest' "
                                               "or 'summary'. Default: recognised from a "
                                               "plain statement ('my name is', 'I prefer', "
                                               "'remember that'), else 'episodic'.")]
Source = Annotated[str | None, Field(description="Where it came from, e.g. 'user', "
                                                 "'assistant' or 'import:notes.md'.")]
Confidence = Annotated[float | None, Field(description="How sure the kind and text are, "
                                                       "0 to 1.")]
KindFilter = Annotated[list[str] | None, Field(description="Only memories of these kinds, "
                                                           "e.g. ['fact', 'preference'].")]
SourceFilter = Annotated[list[str] | None, Field(description="Only memories from these "
                                                             "sources, exactly, e.g. "
                                                             "['user'].")]
MinConfidence = Annotated[float | None, Field(description="Only memories at least this sure, "
                                                          "0 to 1 (one without a "
                                                          "confidence never passes).")]
Cursor = Annotated[str | None, Field(description="The next_cursor of the page before; "
                                                 "none for the first page.")]
Query = Annotated[str, Field(description="What to look for, in plain words.")]
Timeframe = Annotated[str | None, Field(description="E.g. 'last 7 days' or 'past 24 "
                                                    "hours' (rolling, ending now), "
                                                    "'today', 'yesterday', 'last week' "
                                                    "(the previous Monday-to-Sunday "
                                                    "week), 'May 2023', "
                                                    "'2024-05-01..2024-05-08'.")]
Limit = Annotated[int, Field(description="How many memories at most.")]
Strategy = Annotated[str, Field(description="'hybrid' (default), 'vector', 'fulltext' or "
                                            "'tiered' (down the period digests).")]
TagFilter = Annotated[list[str] | None, Field(description="Only memories with one of these "
                                                          "tags (or a tag below one).")]
RobotFilter = Annotated[str | None, Field(description="Only memories written by this robot; "
                                                      "default every robot.")]
MinScore = Annotated[float, Field(description="Leave out memories scoring below this "
                                              "(0 to 1; 0 keeps every hit).")]
Key = Annotated[str, Field(description="The memory's key.")]
ForgottenKey = Annotated[str, Field(description="The forgotten memory's key.")]
Confirm = Annotated[bool, Field(description="Must be true: forgetting hides the memory "
                                            "from recall until `restore`.")]
ContextStrategy = Annotated[str, Field(description="'balanced' (importance x recency, "
                                                   "default), 'recent' or 'important'.")]
Budget = Annotated[int | None, Field(description="Token budget for the text; default the "
                                                 "working-memory budget.")]

READS = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
HIDES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                        open_world_hint=False)
BRINGS_BACK = ToolAnnotations(read_only_hint=False, destructive_hint=False,
                              idempotent_hint=True, open_world_hint=False)


class ScopedTools:
    """What each tool does, for one ``HTM`` inside one :class:`ChatScope`: keys and tags go
    through the scope, so a caller can reach no memory outside it."""

    def __init__(self, htm: HTM, scope: ChatScope) -> None:
        self.htm = htm
        self.scope = scope

    def table(self) -> list[tuple[Callable[..., dict[str, Any]], ToolAnnotations]]:
        """Every tool with its annotations, in the order the server lists them."""
        return [(self.remember, WRITES), (self.recall, WRITES), (self.retrieve, READS),
                (self.forget, HIDES), (self.restore, BRINGS_BACK),
                (self.list_memories, READS), (self.create_context, READS), (self.stats, READS),
                (self.list_robots, READS), (self.tags, READS)]

    def in_scope(self, key: str) -> str:
        """The stored key ``key`` names in the scope (forgotten or not), else NotFoundError,
        the same whether the key is unknown or another scope's."""
        return self.scope.key_of(lambda k: self.htm.store.get(k, include_forgotten=True), key)

    def scoped_key(self, content: Any, key: str | None) -> str | None:
        """The key a remembered ``content`` is stored under: in the scope, always."""
        if key is not None:
            return self.scope.own_key(key)
        return self.scope.note_key(content) if isinstance(content, str) else None

    def context(self, strategy: str, max_tokens: int | None = None) -> Context:
        """The working memory as prompt text, the scope's memories only."""
        if self.scope.visible is None:
            return self.htm.create_context(strategy=strategy, max_tokens=max_tokens)
        return self.htm.create_context(strategy=strategy, max_tokens=max_tokens,
                                       tags=self.scope.visible, scope_working=True)

    def remember(self, content: Content, importance: Importance = 1.0, tags: Tags = None,
                 key: NewKey = None, metadata: Metadata = None, kind: Kind = None,
                 source: Source = None, confidence: Confidence = None) -> dict[str, Any]:
        """Store a memory durably (long-term) and put it into working memory."""
        text = content.strip() if isinstance(content, str) else content
        memory = self.htm.add(text, importance=importance, key=self.scoped_key(text, key),
                              tags=self.scope.stored_tags(check_topic_tags(tags)),
                              metadata=metadata, kind=kind, source=source,
                              confidence=confidence)
        return memory_to_dict(memory)

    def recall(self, query: Query, timeframe: Timeframe = None, limit: Limit = 10,
               strategy: Strategy = "hybrid", tags: TagFilter = None, robot: RobotFilter = None,
               min_score: MinScore = DEFAULT_MIN_SCORE,
               kinds: KindFilter = None, sources: SourceFilter = None,
               min_confidence: MinConfidence = None) -> dict[str, Any]:
        """Find the memories most relevant to a query (they enter working memory)."""
        hits = self.htm.recall(query, timeframe=timeframe, limit=limit, strategy=strategy,
                               tags=self.scope.topic_filter(check_topic_tags(tags)), robot=robot,
                               min_score=min_score, kinds=kinds, sources=sources,
                               min_confidence=min_confidence)
        return {"count": len(hits), "hits": [hit_to_dict(hit) for hit in hits]}

    def list_memories(self, kinds: KindFilter = None, tags: TagFilter = None,
                      timeframe: Timeframe = None, limit: Limit = 20,
                      cursor: Cursor = None, sources: SourceFilter = None,
                      min_confidence: MinConfidence = None) -> dict[str, Any]:
        """List memories oldest first by kind, source, confidence, tags and time (no access
        counted); pass ``next_cursor`` back for the next page."""
        page = self.htm.list(kinds=kinds, sources=sources, min_confidence=min_confidence,
                             tags=self.scope.topic_filter(check_topic_tags(tags)),
                             timeframe=timeframe, limit=limit, cursor=cursor)
        return {"count": len(page.memories), "next_cursor": page.next_cursor,
                "memories": [memory_to_dict(m) for m in page.memories]}

    def retrieve(self, key: Key) -> dict[str, Any]:
        """Look a memory up by its exact key; ``found`` is false when there is none."""
        found = self.scope.find(self.htm.store.get, key)
        memory = self.htm.retrieve(found.key) if found is not None else None
        if memory is None:
            return {"found": False, "key": key}
        return {"found": True, **memory_to_dict(memory)}

    def forget(self, key: Key, confirm: Confirm = False) -> dict[str, Any]:
        """Hide a memory from recall (recoverable with ``restore``); needs confirm=true."""
        return memory_to_dict(self.htm.forget(self.in_scope(key), confirm=confirm))

    def restore(self, key: ForgottenKey) -> dict[str, Any]:
        """Bring back a forgotten memory."""
        return memory_to_dict(self.htm.restore(self.in_scope(key)))

    def create_context(self, strategy: ContextStrategy = "balanced",
                       max_tokens: Budget = None) -> dict[str, Any]:
        """Assemble working memory into prompt text within a token budget."""
        return context_to_dict(self.context(strategy, max_tokens))

    def stats(self) -> dict[str, Any]:
        """Figures of the memories this server sees, embedding use and latency percentiles."""
        return stats_to_dict(scoped_stats(self.htm, self.scope))

    def list_robots(self) -> dict[str, Any]:
        """The robots that wrote memories this server sees, with how many each wrote."""
        return {"robots": [robot_to_dict(r) for r in scoped_robots(self.htm, self.scope)]}

    def tags(self) -> dict[str, Any]:
        """Every topic tag of this server's scope with the number of visible memories
        carrying it."""
        return {"tags": self.scope.topics(self.htm.tags())}


def guarded(lock: asyncio.Lock, htm: HTM, fn: _F) -> _F:
    """``fn`` as an async tool: run under the server lock through
    :func:`htm_core.run_async` (natively on PostgreSQL, else in a worker thread); an
    HTMError becomes a tool error result."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        async with lock:
            try:
                return await run_async(htm, fn, *args, **kwargs)
            except HTMError as exc:
                logger.info("tool %s refused: %s: %s", fn.__name__, type(exc).__name__, exc)
                raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    return wrapper  # type: ignore[return-value]


def add_context_resources(server: MCPServer, tools: ScopedTools, lock: asyncio.Lock) -> None:
    """``htm://context`` (balanced) and ``htm://context/{strategy}``: working memory as text."""

    async def context_text(strategy: str) -> str:
        async with lock:
            try:
                return (await run_async(tools.htm, tools.context, strategy)).text
            except HTMError as exc:
                raise ResourceError(f"{type(exc).__name__}: {exc}") from exc

    @server.resource(CONTEXT_URI, name="working-memory", mime_type="text/plain",
                     description=f"The working memory of robot {tools.htm.robot!r} as prompt "
                                 "text (balanced strategy).")
    async def working_memory() -> str:
        return await context_text("balanced")

    @server.resource(CONTEXT_URI + "/{strategy}", name="working-memory-by-strategy",
                     mime_type="text/plain",
                     description="Working memory as prompt text: strategy is balanced, recent "
                                 "or important.")
    async def working_memory_by(strategy: str) -> str:
        return await context_text(strategy)


def build_server(htm: HTM, *, name: str = SERVER_NAME, log_level: str = "WARNING",
                 user_id: str | None = None, session_id: str | None = None,
                 shared: bool = False, shared_tags: list[str] | None = None) -> MCPServer:
    """An MCP server exposing ``htm`` as tools and a context resource.

    Calls are serialised (one at a time) because they share one working memory. The
    caller keeps ownership of ``htm`` and closes it after the server stops.

    The server works in the memory of ``user_id`` (default :func:`default_user`), or of
    the session ``session_id`` of that user; memories carrying one of ``shared_tags`` are
    visible too; ``shared=True`` serves the whole store (see docs/mcp.md, "Whose memory").

    Example::

        with HTM(robot="assistant", embedder="hashing") as htm:
            build_server(htm, user_id="ada").run("stdio")
    """
    user = user_id if user_id is not None else default_user()
    scope = ChatScope.of(user_id=user, session_id=session_id, shared=shared,
                         shared_tags=shared_tags)
    whose = "every user's" if shared else f"user {user!r}'s"
    server: MCPServer = MCPServer(
        name=name,
        instructions=(
            f"Long-term memory for robot {htm.robot!r} ({whose} memories). Use `recall` before "
            "answering questions about the past, `remember` for facts worth keeping, and read "
            "`htm://context` for what is in working memory now. `forget` needs confirm=true and "
            "can be undone with `restore`."),
        version=htm_version,
        log_level=log_level.upper(),  # type: ignore[arg-type]
        warn_on_duplicate_tools=True,
    )
    lock = asyncio.Lock()
    tools = ScopedTools(htm, scope)
    for fn, hints in tools.table():
        server.tool(annotations=hints)(guarded(lock, htm, fn))
    add_context_resources(server, tools, lock)
    return server
