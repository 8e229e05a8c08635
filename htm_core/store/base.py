"""The ``LongTermStore`` protocol: what every long-term backend must do, in small roles.

``LongTermStore`` is the union of nine role protocols, each usable on its own by a
consumer that needs only that part (all ``runtime_checkable``):

- :class:`Lifecycle`: ``backend``, ``url``, schema version and migration, ``close``, and
  ``open_job_queue()`` (the enrichment job queue on the store's database; no SQLAlchemy
  engine crosses this seam);
- :class:`Records`: robots, and memories by key or id: add, get, touch, tag, count;
- :class:`Search`: the vector and full-text searches and the light reads of hybrid recall;
- :class:`Forgetting`: forget, restore, purge;
- :class:`WorkingSet`: each robot's persisted, versioned working-memory membership;
- :class:`OperationsLog`: reading the log every write appends to;
- :class:`Embeddings`: the store's embedder, vectors, content cache and failure marks;
- :class:`BulkLoad`: iterating every memory and large loads with indexes built once;
- :class:`Versions`: a memory's new version in place, its superseded versions kept;
- :class:`Windows`: the window vectors of long memories (``htm_core._windows``).

A store is durable and unbounded, and never forgets on its own. Everything that writes
commits before it returns. Keys are unique across the whole store (all robots).
Filters (timeframe, robot, tags) are applied inside each search, in the database, never
as a post-filter. Forgotten memories are invisible to search and to ``get`` (unless
asked for) until purged.

The contract tests in ``tests/contract`` run every backend through the same checks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ValidationError
from ..models import Memory, Operation, Robot
from .window_role import Recentre, Windows

if TYPE_CHECKING:
    from ..enrich.jobs import JobQueue

__all__ = [
    "LIST_ORDERS",
    "SCHEMA_VERSION",
    "AddResult",
    "Brief",
    "BulkLoad",
    "EmbeddingFailure",
    "Embeddings",
    "Forgetting",
    "Lifecycle",
    "LongTermStore",
    "NewMemory",
    "OperationsLog",
    "Records",
    "Search",
    "SearchFilters",
    "StoreCounts",
    "Versions",
    "Windows",
    "WorkingChange",
    "WorkingResult",
    "WorkingRow",
    "WorkingSet",
    "WorkingState",
    "content_hash",
    "generated_key",
    "tag_patterns",
]

#: The schema version this code writes and understands.
SCHEMA_VERSION = 5

#: The orders :meth:`Records.list_memories` (and ``HTM.list``) take; ties go by id.
LIST_ORDERS = ("created_at", "key", "importance")


def content_hash(content: str) -> str:
    """SHA-256 of the content, hex."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def generated_key(robot: str, content: str) -> str:
    """The key of a memory added without one: stable per (robot, content).

    Because keys are unique, the same content added twice by the same robot without a
    key maps to the same memory: the second add touches it instead of duplicating it.
    """
    digest = hashlib.sha256(f"{robot}\x00{content}".encode()).hexdigest()
    return f"m_{digest[:24]}"


@dataclass(frozen=True, kw_only=True)
class NewMemory:
    """A memory to be written. ``explicit_key`` says whether the caller chose the key."""

    key: str
    content: str
    robot: str
    importance: float
    token_count: int
    created_at: datetime
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: Sequence[float] | None = None
    embedder: str | None = None
    explicit_key: bool = False
    #: Import and copy set these to carry a memory's history over; new memories leave
    #: them at their defaults (last access = creation, no accesses, not forgotten).
    last_accessed: datetime | None = None
    access_count: int = 0
    forgotten_at: datetime | None = None
    #: Whether the caller chose ``importance``: a second add of existing content raises the
    #: stored importance to it; a default importance never changes the stored one.
    importance_given: bool = True

    @cached_property
    def content_hash(self) -> str:  # worked out once (the embedding cache and the writer)
        return content_hash(self.content)


@dataclass(frozen=True, kw_only=True)
class WorkingState:
    """One robot's hold on one memory in its working memory, as persisted.

    ``last_accessed`` / ``access_count`` are the robot's own (not the memory's global
    figures); ``seq`` and ``access_seq`` are the item's entry and latest-access order, so
    a restarted working memory keeps its order under every policy.
    """

    key: str
    last_accessed: datetime
    access_count: int
    seq: int
    access_seq: int
    #: The memory's content hash as read (empty when not read): a reader whose copy of the
    #: memory has another hash fetches it again (it was updated). Not part of equality.
    content_hash: str = field(default="", compare=False)
    #: The memory's version as read (0 when not read): a reader holding another version
    #: fetches it again (an update that kept the text changed its importance, tags or
    #: metadata). Not part of equality.
    version: int = field(default=0, compare=False)


@dataclass(frozen=True, kw_only=True)
class WorkingChange:
    """A change of one robot's working memory, written in one transaction.

    ``put`` memories enter (or update) membership only while visible: one forgotten or
    purged meanwhile is refused (see :class:`WorkingResult`). ``evict`` keys leave it,
    each logged as an eviction. ``touch`` ids get an access recorded on the memory.
    """

    robot: str
    at: datetime
    put: Sequence[WorkingState] = ()
    evict: Sequence[str] = ()
    touch: Sequence[int] = ()


@dataclass(frozen=True)
class WorkingResult:
    """What a :class:`WorkingChange` did: the robot's working-set version after it, whether
    that version was the one expected (nobody else changed the set in between), and the
    keys refused because the memory is not visible."""

    version: int
    in_step: bool
    refused: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True)
class WorkingRow:
    """A persisted working-memory entry with its memory (see :meth:`LongTermStore.working_rows`)."""

    memory: Memory
    state: WorkingState


@dataclass(frozen=True)
class AddResult:
    """The stored memory; ``created`` is False when an existing one was touched instead."""

    memory: Memory
    created: bool


@dataclass(frozen=True, kw_only=True)
class SearchFilters:
    """Filters applied inside each search arm.

    ``start`` is inclusive and ``end`` exclusive. ``tags`` match a memory carrying any of
    them or any tag below one of them (``"user"`` matches ``"user:preferences"``).
    ``robot`` None means all robots.
    """

    start: datetime | None = None
    end: datetime | None = None
    robot: str | None = None
    tags: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return self.start is None and self.end is None and self.robot is None and not self.tags


@dataclass(frozen=True, kw_only=True)
class ArmQuery:
    """One search of :meth:`LongTermStore.search_arms`: by ``vector`` or by full ``text``."""

    limit: int
    filters: SearchFilters
    vector: Sequence[float] | None = None
    text: str | None = None
    #: A vector search scores each memory by the better of its whole vector and its best
    #: window (:class:`Windows`); False: by its whole vector alone.
    windows: bool = True
    #: With ``windows``: the windows' query given their own mean (None, or None: ``vector``).
    recentre: Recentre | None = None

    def __post_init__(self) -> None:
        if (self.vector is None) == (self.text is None):
            raise ValidationError("ArmQuery takes exactly one of vector= or text=")


@dataclass(frozen=True, slots=True)
class Brief:
    """What hybrid recall reads of a candidate memory while ranking (no tags, no vector)."""

    id: int
    content: str
    robot: str
    created_at: datetime


@dataclass(frozen=True, kw_only=True)
class StoreCounts:
    """Counts for ``stats()``."""

    total: int
    robot: int
    forgotten: int
    robots: int
    #: Visible memories without a vector that are waiting for one (not marked as failing).
    missing_embeddings: int
    #: Visible memories without a vector whose text the embedder rejected (marked).
    failed_embeddings: int = 0


@dataclass(frozen=True, kw_only=True)
class EmbeddingFailure:
    """A memory whose text the embedder rejected: its key, the embedder, the reason, when."""

    key: str
    embedder: str
    error: str
    failed_at: datetime


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching strings that start with ``prefix`` (escape ``\\``)."""
    return re.sub(r"([\\%_])", r"\\\1", prefix) + "%"


def tag_patterns(tag: str) -> tuple[str, str]:
    """The exact tag and a LIKE pattern for tags below it (``_``/``%`` escaped with ``\\``)."""
    escaped = re.sub(r"([\\%_])", r"\\\1", tag)
    return tag, f"{escaped}:%"


@runtime_checkable
class Lifecycle(Protocol):
    """Opening, schema and closing; and the companions a store hands out."""

    #: ``"sqlite"`` or ``"postgres"``.
    backend: str
    #: The database URL with any password masked.
    url: str

    def schema_version(self) -> int:
        """The schema version in the database (0 when empty)."""
        ...

    def migrate(self) -> int:
        """Create or upgrade the schema; return the version now in place. Never drops."""
        ...

    def close(self) -> None:
        """Release connections and in-process indexes."""
        ...

    def open_job_queue(self) -> JobQueue:
        """The enrichment job queue on this store's database (the ``htm_jobs`` table), or an
        in-process one when the database lives in memory. It uses the store's connections:
        close the store, not the queue."""
        ...


@runtime_checkable
class Records(Protocol):
    """Robots and memories by key or id: write, read, touch, tag, count."""

    def ensure_robot(self, name: str) -> Robot:
        """Register ``name`` if new; return it."""
        ...

    def robots(self) -> list[Robot]:
        """Every robot on the store, with its memory count."""
        ...

    def add_many(self, records: Sequence[NewMemory]) -> list[AddResult]:
        """Write ``records`` in one transaction; all or nothing.

        A record whose key exists with the same content touches that memory (and
        restores it if forgotten), merging what the record adds: tags unioned, importance
        raised to the record's when given and larger, metadata merged (the record's keys
        win); the ``touch`` log line lists what changed. With different content it
        raises ``DuplicateKeyError`` and nothing of the batch is written.
        """
        ...

    def touch(self, ids: Sequence[int], *, at: datetime) -> None:
        """Record an access: set ``last_accessed`` and increment ``access_count``."""
        ...

    def add_tags(self, key: str, tags: Sequence[str], *, robot: str) -> Memory:
        """Link more tags to a memory (merged with its own; logged). ``NotFoundError``."""
        ...

    def set_importance(self, key: str, importance: float, *, robot: str) -> Memory:
        """Change a memory's importance (enrichment; logged). ``NotFoundError``."""
        ...

    def get(self, key: str, *, include_forgotten: bool = False,
            include_embedding: bool = False) -> Memory | None:
        """The memory under ``key``, or None (forgotten ones only when asked)."""
        ...

    def get_many(self, ids: Sequence[int], *, include_embedding: bool = False,
                 include_forgotten: bool = False) -> list[Memory]:
        """Memories with these ids (visible ones unless asked), in the order of ``ids``."""
        ...

    def keys_with_prefix(self, prefix: str, *, include_forgotten: bool = False) -> list[str]:
        """Keys starting with ``prefix`` (document chunks, chat sessions), sorted."""
        ...

    def list_memories(self, filters: SearchFilters, *, key_prefix: str | None = None,
                      include_forgotten: bool = False, order: str = "created_at",
                      descending: bool = False, limit: int = 100,
                      after: tuple[Any, int] | None = None) -> list[Memory]:
        """Up to ``limit`` memories matching ``filters`` (the tag rule and times of recall) and
        ``key_prefix``, ordered by ``order`` (``created_at``, ``key`` or ``importance``) then
        id, both ``descending`` or not; ``after`` is the (order value, id) of the last memory
        of the previous page. No access is counted."""
        ...

    def tags(self) -> dict[str, int]:
        """Every tag with the number of visible memories carrying it."""
        ...

    def counts(self, robot: str) -> StoreCounts:
        """Figures for ``stats()``."""
        ...


@runtime_checkable
class Search(Protocol):
    """The searches hybrid recall runs, every filter applied inside them."""

    def vector_search(self, vector: Sequence[float], *, limit: int,
                      filters: SearchFilters, windows: bool = True) -> list[tuple[int, float]]:
        """Top ``limit`` (id, cosine similarity) by vector, best first, filters applied.

        A memory's similarity is the better of its whole vector's and its best window's
        (``windows=False``: the whole vector's alone); one hit per memory."""
        ...

    def fulltext_search(self, query: str, *, limit: int,
                        filters: SearchFilters) -> list[tuple[int, float]]:
        """Top ``limit`` (id, relevance) by full text, best first, filters applied.

        ``query`` is plain user text: the backend escapes it for its query language.
        """
        ...

    def search_arms(self, arms: Sequence[ArmQuery]) -> list[list[tuple[int, float]]]:
        """Run several vector and full-text searches, results in the order asked.

        Each is what :meth:`vector_search` / :meth:`fulltext_search` would return; hybrid
        recall asks for all of its arms at once, so a server backend can answer them in
        one round trip.
        """
        ...

    def briefs(self, ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        """Id, content, robot and creation time of those ``ids`` that are visible and pass
        ``filters``: one light read for the ranking steps of hybrid recall."""
        ...

    def vector_centroid(self) -> list[float] | None:
        """The unit-length mean direction of the stored vectors, or None when there are none.

        Hybrid recall removes the query's share of this direction (what every memory has
        in common) before the vector arm runs. An estimate is fine: a backend may compute
        it from a recent sample and refresh it as the store grows.
        """
        ...


@runtime_checkable
class Forgetting(Protocol):
    """Never forget on its own: hide recoverably, restore, purge for good."""

    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        """Hide the memory from recall, recoverably. Raises ``NotFoundError``."""
        ...

    def restore(self, key: str, *, robot: str) -> Memory:
        """Undo ``forget``. Raises ``NotFoundError`` when no such memory exists."""
        ...

    def purge(self, *, robot: str, key: str | None = None) -> int:
        """Delete forgotten memories for good (one, or all); return how many."""
        ...


@runtime_checkable
class WorkingSet(Protocol):
    """Each robot's persisted working-memory membership, versioned.

    Every change of a robot's membership (its own, or a forget/purge taking a memory out of
    it) bumps that robot's working-set version in the same transaction; a reader whose last
    known version differs reloads with :meth:`working_rows`.
    """

    def working_set(self, robot: str) -> list[Memory]:
        """The memories in ``robot``'s persisted working memory, oldest entry first."""
        ...

    def working_rows(self, robot: str) -> tuple[int, list[WorkingRow]]:
        """``robot``'s working-set version and its entries (visible memories, entry order),
        read in one snapshot."""
        ...

    def working_states(self, robot: str) -> tuple[int, dict[int, WorkingState]]:
        """``robot``'s working-set version and each entry's state by memory id (visible
        memories only), in one snapshot: the light read that lets a reader catch up."""
        ...

    def working_version(self, robot: str) -> int:
        """``robot``'s working-set version (0 for an unknown robot): one cheap read."""
        ...

    def hidden_ids(self, ids: Sequence[int]) -> frozenset[int]:
        """The ids among ``ids`` whose memory is forgotten or purged now: one cheap read
        (a recall checks its hits with it before they enter working memory)."""
        ...

    def recall_check(self, robot: str, ids: Sequence[int]) -> tuple[int, frozenset[int]]:
        """:meth:`working_version` and :meth:`hidden_ids` in one read (one snapshot, one
        round trip): what a recall checks before its hits enter working memory."""
        ...

    def apply_working(self, change: WorkingChange, *,
                      expected_version: int | None = None) -> WorkingResult:
        """Write a working-memory change in one transaction (see :class:`WorkingChange`)."""
        ...

    def update_working(self, robot: str, *, add: Sequence[int] = (),
                       remove: Sequence[int] = (), at: datetime) -> None:
        """Add/remove working-memory membership; each removal is logged as an eviction."""
        ...

    def clear_working(self, robot: str) -> int:
        """Drop ``robot``'s working-memory membership (memories stay); return how many."""
        ...

    def add_and_enter(self, records: Sequence[NewMemory], *,
                      working: Callable[[list[AddResult]], WorkingChange | None],
                      expected_version: int | None = None,
                      ) -> tuple[list[AddResult], WorkingResult | None]:
        """:meth:`add_many` and a working-memory change in one transaction.

        ``working`` is called inside the transaction with the results and returns the
        change to write with them (see :meth:`apply_working`); it is called again if the
        transaction is retried.
        """
        ...


@runtime_checkable
class OperationsLog(Protocol):
    """The operations log every write appends to, newest first."""

    def operations(self, *, limit: int = 100, robot: str | None = None,
                   op: str | None = None) -> list[Operation]:
        """The newest operations first."""
        ...


@runtime_checkable
class Embeddings(Protocol):
    """The store's vectors: one embedder per store, a content cache, filling and failures."""

    def embedding_info(self) -> tuple[str, int] | None:
        """(embedder name, dimension) fixed for this store, or None before any vector."""
        ...

    def set_embeddings(self, items: Sequence[tuple[int, Sequence[float]]], embedder: str) -> None:
        """Store vectors for existing memories (background embedding, re-embedding)."""
        ...

    def reset_embeddings(self) -> None:
        """Drop every vector and the store's embedder/dimension, to re-embed from scratch."""
        ...

    def find_embedding(self, content_hash: str, embedder: str) -> list[float] | None:
        """A stored vector for this content by this embedder, if any (the store cache)."""
        ...

    def find_embeddings(self, content_hashes: Sequence[str], embedder: str
                        ) -> dict[str, list[float]]:
        """Stored vectors by this embedder for any of these contents, by content hash."""
        ...

    def missing_embeddings(self, *, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        """Up to ``limit`` (id, content, metadata) of visible memories that have no vector
        yet and are not marked as failing, oldest first."""
        ...

    def mark_embedding_failures(self, failures: Sequence[tuple[int, str]], embedder: str) -> None:
        """Mark memories ``(id, reason)`` whose text ``embedder`` keeps rejecting: filling
        skips them until :meth:`retry_embedding_failures`. A stored vector clears a mark."""
        ...

    def embedding_failures(self, *, limit: int = 100) -> list[EmbeddingFailure]:
        """The visible memories marked as failing, with the reason, oldest mark first."""
        ...

    def retry_embedding_failures(self) -> int:
        """Clear every failure mark (those memories are pending again); return how many."""
        ...


@runtime_checkable
class BulkLoad(Protocol):
    """Moving many memories in or out: export, import, copy, large loads."""

    def iter_memories(self, *, batch_size: int = 1000, include_forgotten: bool = True,
                      include_embedding: bool = False, after_id: int = 0
                      ) -> Iterator[list[Memory]]:
        """Every memory in id order, in batches (for export, copy and re-embedding)."""
        ...

    def bulk_load(self) -> AbstractContextManager[object]:
        """A block for many ``add_many`` batches with the indexes built once, at the end."""
        ...


@runtime_checkable
class Versions(Protocol):
    """A memory's versions: a new one written in place, the superseded ones kept as history.

    The memory keeps its id and key; each superseded version (content, importance, tags,
    metadata, vector) is a history row with its number and when it was superseded, shown
    as a :class:`~htm_core.models.Memory` whose ``superseded_at`` is set. A purge deletes
    a memory's history with it.
    """

    def update_memory(self, record: NewMemory, *, robot: str, at: datetime) -> Memory:
        """Make ``record`` (content, importance, tags, metadata, vector) the current version
        of the memory under ``record.key``, keeping the current one as history; one
        transaction, logged as ``update``. Every robot holding the memory in its working
        memory sees its working-set version bumped. Raises ``NotFoundError`` for an unknown
        or forgotten key."""
        ...

    def versions(self, key: str) -> list[Memory]:
        """Every version of the memory under ``key``, oldest first, the current one last
        (forgotten memories too); empty for an unknown key."""
        ...

    def search_history(self, arm: ArmQuery) -> list[tuple[Memory, float]]:
        """Superseded versions of visible memories passing the arm's filters (on the
        memory), best first, by the arm's vector or full text: what
        ``recall(..., include_history=True)`` adds."""
        ...


@runtime_checkable
class LongTermStore(Lifecycle, Records, Search, Forgetting, WorkingSet, OperationsLog, Embeddings,
                    BulkLoad, Versions, Windows, Protocol):
    """What the facade needs from a long-term backend: every role above.

    A consumer that needs less takes the role it uses (retrieval takes :class:`Search`).
    """
