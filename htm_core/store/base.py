"""The ``LongTermStore`` protocol: what every long-term backend must do.

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from ..errors import ValidationError
from ..models import Memory, Operation, Robot

__all__ = [
    "SCHEMA_VERSION",
    "AddResult",
    "Brief",
    "LongTermStore",
    "NewMemory",
    "SearchFilters",
    "StoreCounts",
    "content_hash",
    "generated_key",
    "tag_patterns",
]

#: The schema version this code writes and understands.
SCHEMA_VERSION = 2


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

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)


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
    missing_embeddings: int


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching strings that start with ``prefix`` (escape ``\\``)."""
    return re.sub(r"([\\%_])", r"\\\1", prefix) + "%"


def tag_patterns(tag: str) -> tuple[str, str]:
    """The exact tag and a LIKE pattern for tags below it (``_``/``%`` escaped with ``\\``)."""
    escaped = re.sub(r"([\\%_])", r"\\\1", tag)
    return tag, f"{escaped}:%"


class LongTermStore(Protocol):
    """What the facade needs from a long-term backend."""

    #: ``"sqlite"`` or ``"postgres"``.
    backend: str
    #: The database URL with any password masked.
    url: str

    @property
    def engine(self) -> Any:
        """The SQLAlchemy engine (for companions such as the enrichment job queue)."""
        ...

    # -- lifecycle and schema --------------------------------------------------------
    def schema_version(self) -> int:
        """The schema version in the database (0 when empty)."""
        ...

    def migrate(self) -> int:
        """Create or upgrade the schema; return the version now in place. Never drops."""
        ...

    def close(self) -> None:
        """Release connections and in-process indexes."""
        ...

    # -- robots ----------------------------------------------------------------------
    def ensure_robot(self, name: str) -> Robot:
        """Register ``name`` if new; return it."""
        ...

    def robots(self) -> list[Robot]:
        """Every robot on the store, with its memory count."""
        ...

    # -- writing ---------------------------------------------------------------------
    def add_many(self, records: Sequence[NewMemory]) -> list[AddResult]:
        """Write ``records`` in one transaction; all or nothing.

        A record whose key exists with the same content touches that memory (and
        restores it if forgotten); with different content raises ``DuplicateKeyError``
        and nothing of the batch is written.
        """
        ...

    def touch(self, ids: Sequence[int], *, at: datetime) -> None:
        """Record an access: set ``last_accessed`` and increment ``access_count``."""
        ...

    def set_embeddings(self, items: Sequence[tuple[int, Sequence[float]]], embedder: str) -> None:
        """Store vectors for existing memories (background embedding, re-embedding)."""
        ...

    def reset_embeddings(self) -> None:
        """Drop every vector and the store's embedder/dimension, to re-embed from scratch."""
        ...

    def add_tags(self, key: str, tags: Sequence[str], *, robot: str) -> Memory:
        """Link more tags to a memory (merged with its own; logged). ``NotFoundError``."""
        ...

    def set_importance(self, key: str, importance: float, *, robot: str) -> Memory:
        """Change a memory's importance (enrichment; logged). ``NotFoundError``."""
        ...

    # -- reading ---------------------------------------------------------------------
    def get(self, key: str, *, include_forgotten: bool = False,
            include_embedding: bool = False) -> Memory | None:
        """The memory under ``key``, or None (forgotten ones only when asked)."""
        ...

    def get_many(self, ids: Sequence[int], *, include_embedding: bool = False,
                 include_forgotten: bool = False) -> list[Memory]:
        """Memories with these ids (visible ones unless asked), in the order of ``ids``."""
        ...

    def find_embedding(self, content_hash: str, embedder: str) -> list[float] | None:
        """A stored vector for this content by this embedder, if any (the store cache)."""
        ...

    def keys_with_prefix(self, prefix: str, *, include_forgotten: bool = False) -> list[str]:
        """Keys starting with ``prefix`` (document chunks, chat sessions), sorted."""
        ...

    def find_embeddings(self, content_hashes: Sequence[str], embedder: str
                        ) -> dict[str, list[float]]:
        """Stored vectors by this embedder for any of these contents, by content hash."""
        ...

    def missing_embeddings(self, *, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` (id, content) of visible memories that have no vector yet."""
        ...

    def iter_memories(self, *, batch_size: int = 1000, include_forgotten: bool = True,
                      include_embedding: bool = False, after_id: int = 0) -> Any:
        """Every memory in id order, in batches (for export, copy and re-embedding)."""
        ...

    # -- searching -------------------------------------------------------------------
    def vector_search(self, vector: Sequence[float], *, limit: int,
                      filters: SearchFilters) -> list[tuple[int, float]]:
        """Top ``limit`` (id, cosine similarity) by vector, best first, filters applied."""
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

    # -- working-memory membership ---------------------------------------------------
    def working_set(self, robot: str) -> list[Memory]:
        """The memories in ``robot``'s persisted working memory, oldest entry first."""
        ...

    def update_working(self, robot: str, *, add: Sequence[int] = (),
                       remove: Sequence[int] = (), at: datetime) -> None:
        """Add/remove working-memory membership; each removal is logged as an eviction."""
        ...

    def clear_working(self, robot: str) -> int:
        """Drop ``robot``'s working-memory membership (memories stay); return how many."""
        ...

    # -- never forget ----------------------------------------------------------------
    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        """Hide the memory from recall, recoverably. Raises ``NotFoundError``."""
        ...

    def restore(self, key: str, *, robot: str) -> Memory:
        """Undo ``forget``. Raises ``NotFoundError`` when no such memory exists."""
        ...

    def purge(self, *, robot: str, key: str | None = None) -> int:
        """Delete forgotten memories for good (one, or all); return how many."""
        ...

    # -- catalogue and log -----------------------------------------------------------
    def tags(self) -> dict[str, int]:
        """Every tag with the number of visible memories carrying it."""
        ...

    def log(self, op: str, *, robot: str | None, key: str | None = None,
            detail: dict[str, Any] | None = None) -> None:
        """Append a line to the operations log."""
        ...

    def operations(self, *, limit: int = 100, robot: str | None = None,
                   op: str | None = None) -> list[Operation]:
        """The newest operations first."""
        ...

    def counts(self, robot: str) -> StoreCounts:
        """Figures for ``stats()``."""
        ...

    def embedding_info(self) -> tuple[str, int] | None:
        """(embedder name, dimension) fixed for this store, or None before any vector."""
        ...
