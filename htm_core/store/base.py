"""The ``LongTermStore`` protocol: what every long-term backend must do, in small roles.

``LongTermStore`` is the union of seven required roles (``runtime_checkable``, each usable
alone by a consumer that needs only it): :class:`Lifecycle`, :class:`Records`,
:class:`Search` (``search_arms``, the one search), :class:`Forgetting`,
:class:`WorkingSet`, :class:`OperationsLog` and :class:`Embeddings`. Five more are
capabilities a backend may offer (:data:`CAPABILITIES`: :class:`Versions`,
:class:`Windows`, :class:`BulkLoad`, :class:`EmbeddingRepair`, :class:`EnrichmentStore`);
the facade asks for one with :func:`capability` where it needs it. The rules every store
keeps, and how ``htm_core.testing`` proves a backend: docs/backends.md.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ..errors import UnsupportedError
from ..models import Memory, Operation, Robot
from ._common import rare_terms
from .values import (
    AddResult,
    ArmQuery,
    Brief,
    EmbeddingFailure,
    NewMemory,
    SearchFilters,
    StoreCounts,
    WorkingChange,
    WorkingResult,
    WorkingRow,
    WorkingState,
    content_hash,
    generated_key,
)
from .window_role import Windows

if TYPE_CHECKING:
    from ..jobs import JobQueue

__all__ = [
    "CAPABILITIES",
    "LIST_ORDERS",
    "SCHEMA_VERSION",
    "UPDATE_FIELDS",
    "AddResult",
    "ArmQuery",
    "Brief",
    "BulkLoad",
    "EmbeddingFailure",
    "EmbeddingRepair",
    "Embeddings",
    "EnrichmentStore",
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
    "capability",
    "content_hash",
    "generated_key",
    "rare_terms",
]

#: The schema version this code writes and understands.
SCHEMA_VERSION = 8

#: The orders :meth:`Records.list_memories` (and ``HTM.list``) take; ties go by id.
LIST_ORDERS = ("created_at", "key", "importance")

#: The fields of a memory ``update_memory`` can set.
UPDATE_FIELDS = ("content", "importance", "tags", "metadata", "kind", "source", "confidence")


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

@runtime_checkable
class Records(Protocol):
    """Robots and memories by key or id: write, read, touch, tag, count."""

    def ensure_robot(self, name: str, *, working_memory_tokens: int | None = None) -> Robot:
        """Register ``name`` if new; return it. ``working_memory_tokens``: the budget an
        ``HTM`` of this robot runs with, recorded on the robot (``Robot.working_memory_tokens``)
        so that tools looking at the store (the inspector) know it."""
        ...

    def robots(self, *, tags: Sequence[str] | None = None) -> list[Robot]:
        """Every robot on the store, with its count of visible memories; with ``tags``,
        only the robots with a visible memory carrying one of them (or a tag below one),
        each with the count of those."""
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
                      after: tuple[Any, int] | None = None,
                      as_of: int | None = None) -> list[Memory]:
        """Up to ``limit`` memories matching ``filters`` (the tag rule and times of recall) and
        ``key_prefix``, ordered by ``order`` (``created_at``, ``key`` or ``importance``) then
        id, both ``descending`` or not; ``after`` is the (order value, id) of the last memory
        of the previous page. With ``as_of`` (a :meth:`Versions.history_mark` taken before
        the first page), ``importance`` orders by each memory's importance as it was at that
        mark (an ``update`` since does not move it), and ``after``'s memory is placed the
        same way. No access is counted."""
        ...

    def tags(self) -> dict[str, int]:
        """Every tag with the number of visible memories carrying it."""
        ...

    def counts(self, robot: str, *, tags: Sequence[str] | None = None) -> StoreCounts:
        """Figures for ``stats()``. With ``tags``, ``total``, ``robot``, ``forgotten`` and
        ``robots`` count only memories carrying one of them (or a tag below one):
        ``robots`` is then the number of robots that wrote a visible one."""
        ...


@runtime_checkable
class Search(Protocol):
    """The searches hybrid recall runs, every filter applied inside them."""

    def search_arms(self, arms: Sequence[ArmQuery]) -> list[list[tuple[int, float]]]:
        """Run several vector and full-text searches, results in the order asked: the one
        search of the protocol (hybrid recall asks for all of its arms at once, so a server
        backend can answer them in one round trip).

        - A vector arm: the top ``limit`` (id, cosine similarity), best first. A memory's
          similarity is the better of its whole vector's and its best window's
          (``windows=False``: the whole vector's alone); one hit per memory.
        - A text arm: the top ``limit`` (id, relevance) by full text, best first.
          ``text`` is plain user text: the backend escapes it for its query language.

        Every arm's filters are applied inside its search, never afterwards.
        """
        ...

    def briefs(self, ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        """Id, content, robot and creation time of those ``ids`` that are visible and pass
        ``filters``: one light read for the ranking steps of hybrid recall."""
        ...

    def rare_terms(self, terms: Sequence[str], filters: SearchFilters) -> list[str]:
        """The ``terms`` (words or phrases of :func:`~htm_core.text.parse_query`) found in
        at least one and at most ``COMMON_TERM_SHARE`` (a tenth) of the memories passing
        ``filters`` (the recall's scope), in the order given: the words that say which
        memories a query wants, by the rule with which the full-text arm drops a word as
        too common (:func:`rare_terms`). Hybrid recall asks it
        only of a query naming a time, to decide whether the window's least typical
        memories should be an arm (:class:`~htm_core.recall.RetrievalConfig`)."""
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

    def recall_check(self, robot: str, ids: Sequence[int]) -> tuple[int, frozenset[int]]:
        """:meth:`working_version` and the ids among ``ids`` whose memory is forgotten or
        purged now, in one read (one snapshot, one round trip): what a recall checks
        before its hits enter working memory."""
        ...

    def apply_working(self, change: WorkingChange, *,
                      expected_version: int | None = None) -> WorkingResult:
        """Write a working-memory change in one transaction (see :class:`WorkingChange`)."""
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


@runtime_checkable
class EnrichmentStore(Protocol):
    """Capability ``enrichment``: the durable job queue and the writes its jobs make."""

    def open_job_queue(self) -> JobQueue:
        """The enrichment job queue on this store's database (the ``htm_jobs`` table), or an
        in-process one when the database lives in memory. It uses the store's connections:
        close the store, not the queue."""
        ...

    def add_tags(self, key: str, tags: Sequence[str], *, robot: str) -> Memory:
        """Link more tags to a memory (merged with its own; logged). ``NotFoundError``."""
        ...

    def set_importance(self, key: str, importance: float, *, robot: str) -> Memory:
        """Change a memory's importance (enrichment; logged). ``NotFoundError``."""
        ...


@runtime_checkable
class EmbeddingRepair(Protocol):
    """Capability ``embedding_repair``: re-embedding from scratch, and the failure marks."""

    def reset_embeddings(self) -> None:
        """Drop every vector and the store's embedder/dimension, to re-embed from scratch."""
        ...

    def embedding_failures(self, *, limit: int = 100) -> list[EmbeddingFailure]:
        """The visible memories marked as failing, with the reason, oldest mark first."""
        ...

    def retry_embedding_failures(self) -> int:
        """Clear every failure mark (those memories are pending again); return how many."""
        ...


@runtime_checkable
class BulkLoad(Protocol):
    """Capability ``bulk_load``: moving many memories in or out (export, import, copy)."""

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
    """Capability ``versions``: a new version written in place, the superseded ones kept.

    The memory keeps its id and key; each superseded version (content, importance, tags,
    metadata, vector) is a history row with its number and when it was superseded, shown
    as a :class:`~htm_core.models.Memory` whose ``superseded_at`` is set. A purge deletes
    a memory's history with it.
    """

    def update_memory(self, record: NewMemory, *, robot: str, at: datetime,
                      read_version: int | None = None,
                      fields: Collection[str] = UPDATE_FIELDS,
                      strict: bool = False) -> Memory:
        """Make ``fields`` (of content, importance, tags, metadata) of the memory under
        ``record.key`` ``record``'s, as its next version, keeping the current one as
        history; one transaction, logged as ``update``. Every robot holding the memory in
        its working memory sees its working-set version bumped. A new text takes
        ``record``'s vector (made for that text) or none (embedded later).

        Compare-and-set: ``read_version`` is the version the change was based on, compared
        under the row's lock. When the memory has moved on, ``strict`` refuses the update;
        otherwise a field set here that the other writer changed too (to another value)
        refuses it, and the other writer's changes to other fields are kept. A refusal is
        a ``ConflictError`` and writes nothing. Nothing differing from the memory as it is
        writes nothing and returns it. Raises ``NotFoundError`` for an unknown or
        forgotten key."""
        ...

    def history_mark(self) -> int:
        """A mark of the history as it is now (grows with every ``update_memory``; an
        update committed later never gets one at or below it)."""
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
                    Protocol):
    """What every long-term backend must do: the roles above, and nothing the core never
    calls. What a backend may add is a capability (:data:`CAPABILITIES`)."""


#: The optional roles a backend may offer, by name: the facade checks for one where it
#: needs it (:func:`capability`), and the conformance suite tests a role a backend declares.
CAPABILITIES: dict[str, type] = {
    "versions": Versions,
    "windows": Windows,
    "bulk_load": BulkLoad,
    "embedding_repair": EmbeddingRepair,
    "enrichment": EnrichmentStore,
}

R = TypeVar("R")


def capability(store: object, role: type[R], doing: str) -> R:
    """``store`` as the capability ``role``, or :class:`~htm_core.errors.UnsupportedError`
    naming the backend, the capability and what was being done."""
    if isinstance(store, role):
        return store
    name = next(k for k, v in CAPABILITIES.items() if v is role)
    backend = getattr(store, "backend", type(store).__name__)
    raise UnsupportedError(f"{doing} needs the {name!r} capability, which the {backend} store "
                           f"does not offer ({role.__name__} in htm_core.store.base)")
