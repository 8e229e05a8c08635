"""Plain data types shared by every part of htm."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

__all__ = [
    "Context",
    "ContextItem",
    "Hit",
    "Memory",
    "Operation",
    "Page",
    "Robot",
    "Stats",
]


@dataclass(frozen=True, kw_only=True)
class Memory:
    """One memory as the long-term store keeps it: a value, never changed once made.

    A later call that changes the memory (a recall or a read counting an access, an
    update, a forget, new tags or importance) returns or stores a new ``Memory``; one a
    caller holds keeps the fields it was read with. ``dataclasses.replace(memory, ...)``
    makes a changed copy.

    Times are timezone-aware and in UTC. ``embedding`` is ``None`` until it has been
    computed (for instance in background mode); ``forgotten_at`` is set while a memory
    is forgotten but not yet purged. ``version`` counts the memory's versions (1 until
    :meth:`htm_core.HTM.update` writes a new one); a superseded version, as
    :meth:`htm_core.HTM.versions` and ``recall(..., include_history=True)`` return it,
    has ``superseded_at`` set (when the next version replaced it).
    """

    id: int
    key: str
    content: str
    robot: str
    importance: float = 1.0
    token_count: int = 0
    created_at: datetime
    last_accessed: datetime
    access_count: int = 0
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""
    embedder: str | None = None
    embedding: list[float] | None = field(default=None, repr=False)
    forgotten_at: datetime | None = None
    version: int = 1
    superseded_at: datetime | None = None
    #: What the memory is: one of :data:`htm_core.consolidation.KINDS` (``episodic``
    #: unless known to be a ``fact``, ``preference``, ``skill``, ``document``, ``digest``
    #: or ``summary``); where it came from (free text such as ``"user"`` or
    #: ``"import:notes.md"``, None when not said); how sure that is, 0 to 1 (None: not
    #: said). See docs/consolidation.md ("Kinds").
    kind: str = "episodic"
    source: str | None = None
    confidence: float | None = None
    #: Set by :meth:`htm_core.HTM.add`: whether the memory is now in working memory
    #: (False when it is larger than the whole working-memory budget).
    in_working_memory: bool = False

    @property
    def superseded(self) -> bool:
        """Whether this is an old version (history), not the memory's current one."""
        return self.superseded_at is not None


@dataclass(frozen=True, kw_only=True)
class Hit:
    """A recalled memory, its score and its rank in each retrieval arm.

    ``score`` is the memory's relevance on one scale for every strategy: 0 (no evidence:
    no shared word, no similarity) to 1 (an exact match), the larger of its cosine
    similarity to the query and the share of the query's words it contains, never
    increasing down the list (:mod:`htm_core.scoring`); with a reranker, the reranker's
    score squashed to 0..1. ``recall(min_score=...)`` drops hits below a threshold.

    With ``recall(..., include_history=True)`` a hit may be a superseded version of a
    memory: ``hit.memory.superseded`` is then True (see :class:`Memory`).

    ``path`` is how ``recall(..., strategy="tiered")`` reached the hit: the keys of the
    month, week and day digests it went down through, widest first; empty for a hit
    found outside the digests (a period not consolidated yet) and for other strategies.
    """

    memory: Memory
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    path: tuple[str, ...] = ()


class ContextItem(Protocol):
    """What a context is assembled from: a :class:`Memory` or a working-memory item."""

    @property
    def key(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def importance(self) -> float: ...
    @property
    def token_count(self) -> int: ...


@dataclass(frozen=True, kw_only=True)
class Context:
    """Working memory assembled for a prompt.

    ``text`` is what goes into the prompt. ``memories`` are the items it holds, in the
    order they appear: :class:`Memory` objects when built by :class:`~htm_core.HTM`,
    working-memory items when :class:`~htm_core.working.WorkingMemory` is used alone.
    ``tokens`` is the token count of ``text`` by the facade's counter (the sum of the item
    counts when the working memory is used on its own). ``budget`` is ``max_tokens`` less
    the safety margin: the figure the assembly had to stay within.
    """

    text: str
    memories: tuple[ContextItem, ...]
    tokens: int
    strategy: str
    max_tokens: int
    budget: int

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of the memories in the context, in order."""
        return tuple(m.key for m in self.memories)


@dataclass(frozen=True)
class Page:
    """One page of :meth:`htm_core.HTM.list`: its memories, in order, and the cursor of the
    next page (``None`` on the last page)."""

    memories: tuple[Memory, ...]
    next_cursor: str | None = None


@dataclass(frozen=True, kw_only=True)
class Robot:
    """A named writer on a store; every :class:`~htm_core.HTM` instance is one."""

    id: int
    name: str
    created_at: datetime
    last_active: datetime | None = None
    memory_count: int = 0
    #: The working-memory budget (tokens) given to the robot's newest ``HTM`` that was given
    #: one (``HTM(working_memory_tokens=...)``, ``--working-memory-tokens``); None when none
    #: was (the default budget is not recorded).
    working_memory_tokens: int | None = None


@dataclass(frozen=True, kw_only=True)
class Operation:
    """One line of the operations log."""

    id: int
    at: datetime
    op: str
    robot: str | None
    key: str | None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, repr=False)
class Stats:
    """Figures for one robot's working memory and the shared long-term store.

    ``print(stats)`` shows the main figures in a few lines, ``repr`` in one;
    :meth:`to_dict` has every field as plain JSON values.
    """

    robot: str
    backend: str
    database: str
    working_memory_count: int
    working_memory_tokens: int
    working_memory_max_tokens: int
    eviction_policy: str
    long_term_total: int
    long_term_robot: int
    forgotten: int
    robots: int
    embedder: str
    embedding_dim: int | None
    embedder_choice: str
    token_counter: str
    pending_embeddings: int = 0
    failed_embeddings: int = 0
    embedding_calls: int = 0
    embedding_cache_hits: int = 0
    evictions: int = 0
    schema_version: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def working_memory_utilisation(self) -> float:
        """Fraction of the working-memory budget in use (0 to 1)."""
        if self.working_memory_max_tokens <= 0:
            return 0.0
        return self.working_memory_tokens / self.working_memory_max_tokens

    def to_dict(self) -> dict[str, Any]:
        """Every field by name plus ``working_memory_utilisation`` (0 to 1, six decimals),
        as values :func:`json.dumps` takes: ``extra`` is copied with its times as ISO 8601
        strings, tuples and sets as lists, keys as strings and any other object as its
        ``str``."""
        out = {name: _plain(getattr(self, name)) for name in self.__dataclass_fields__}
        out["working_memory_utilisation"] = round(self.working_memory_utilisation, 6)
        return out

    def __repr__(self) -> str:
        return (f"<Stats robot={self.robot!r} working={self.working_memory_count} "
                f"tokens={self.working_memory_tokens}/{self.working_memory_max_tokens} "
                f"long_term={self.long_term_total} forgotten={self.forgotten} "
                f"robots={self.robots} database={self.database!r}>")

    def __str__(self) -> str:
        return "\n".join([
            f"Stats for robot {self.robot!r}",
            f"  working memory  {_count(self.working_memory_count, 'memory', 'memories')}, "
            f"{self.working_memory_tokens:,} of {self.working_memory_max_tokens:,} tokens "
            f"({self.working_memory_utilisation:.1%}), {self.eviction_policy} eviction, "
            f"{_count(self.evictions, 'eviction', 'evictions')}",
            f"  long-term       {_count(self.long_term_total, 'memory', 'memories')} "
            f"({self.long_term_robot:,} by this robot), {self.forgotten:,} forgotten, "
            f"{_count(self.robots, 'robot', 'robots')}",
            f"  embedder        {self.embedder}, {self.pending_embeddings:,} pending, "
            f"{self.failed_embeddings:,} failed",
            f"  store           {self.backend} {self.database} (schema {self.schema_version})",
        ])


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _plain(value: Any) -> Any:
    """``value`` as JSON data: containers copied, times in ISO 8601, other objects as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return str(value)
