"""The plain values that cross the store seam (re-exported by ``base.py``): what a write
hands a store (:class:`NewMemory`, :class:`WorkingChange`), what reads and searches hand
back (:class:`AddResult`, :class:`WorkingRow`, :class:`Brief`, :class:`StoreCounts`,
:class:`EmbeddingFailure`), the filters and arms of a search, and the hashing of content
and keys that every backend shares."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from ..errors import DatabaseCorruptError, ValidationError
from ..models import Memory
from .vector_index import FloatArray, unit_rows

T = TypeVar("T")


def checked_instance(cls: type[T], like: T | None = None, /, **values: Any) -> T:
    """``cls(**values)`` (or ``replace(like, **values)``) of values already checked, for a
    frozen dataclass without ``__post_init__``: the instance's ``__dict__`` is filled at once
    instead of by the generated ``__init__``'s ``object.__setattr__`` per field, which is a
    good part of the add path's cost for values made once per memory. Fields without a
    plain default (``default_factory``) must be given."""
    return _filled(cls, _plain_defaults(cls) if like is None else like.__dict__, values)


def checked_from(cls: type[T], values: dict[str, Any]) -> T:
    """:func:`checked_instance` of ``values`` given as a dict: a read makes one per row,
    and a dict literal costs less to hand over than as many keyword arguments."""
    return _filled(cls, _plain_defaults(cls), values)


def _filled(cls: type[T], base: dict[str, Any], values: dict[str, Any]) -> T:
    """A ``cls`` whose fields are ``base`` updated with ``values``, no ``__init__`` run."""
    out: T = object.__new__(cls)
    held = out.__dict__
    held.update(base)
    held.update(values)
    return out


_DEFAULTS: dict[type, dict[str, Any]] = {}


def _plain_defaults(cls: type) -> dict[str, Any]:
    """The fields of the dataclass ``cls`` with a plain default, and those defaults."""
    found = _DEFAULTS.get(cls)
    if found is None:
        found = _DEFAULTS[cls] = {f.name: f.default for f in fields(cls)
                                  if f.default is not MISSING}
    return found


def content_hash(content: str) -> str:
    """SHA-256 of the content, hex."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def content_crc(content: str) -> int:
    """CRC-32 of the content's UTF-8 bytes: the cheap checksum every read compares."""
    return zlib.crc32(content.encode("utf-8"))


def check_stored_text(key: str, memory_id: int, content: str, stored_crc: int | None,
                      stored_hash: str, url: str) -> None:
    """Raise :class:`DatabaseCorruptError` when a memory's text read from the database at
    ``url`` no longer matches the checksum stored with it: damaged text is never served.

    A read compares the CRC-32 of the text with ``content_crc``, a fraction of the cost of
    a SHA-256: every change of up to 32 bits, and all but one in 2**32 larger ones, gives
    another CRC. A row without one (written by PostgreSQL before schema version 7) is
    checked against ``content_hash``, the SHA-256 that ``htm check`` always compares.
    """
    if (content_crc(content) == stored_crc if stored_crc is not None
            else content_hash(content) == stored_hash):
        return
    raise DatabaseCorruptError(
        f"memory {key!r} (id {memory_id}) in the database {url} does not match its stored checksum: "
        "its text was damaged and is not served; run `htm check` to list every damaged "
        "memory, then restore them from an export")


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
    #: What the memory is, where it came from and how sure that is (see
    #: :class:`~htm_core.models.Memory`); checked by the intake.
    kind: str = "episodic"
    source: str | None = None
    confidence: float | None = None

    @cached_property
    def content_hash(self) -> str:  # worked out once (the embedding cache and the writer)
        return content_hash(self.content)

    @property
    def content_crc(self) -> int:
        return content_crc(self.content)


def unit_embeddings(records: Sequence[NewMemory]) -> tuple[list[int], FloatArray]:
    """The positions of the records carrying an embedding, and those embeddings as unit
    float32 rows made at once (:func:`~htm_core.store.vector_index.unit_rows`: one that is
    not finite is refused, naming its record's key). They must share one dimension."""
    have = [i for i, r in enumerate(records) if r.embedding is not None]
    if not have:
        return have, np.zeros((0, 0), dtype=np.float32)
    return have, unit_rows([v for r in records if (v := r.embedding) is not None],
                           lambda row: f"key {records[have[row]].key!r}")


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
    #: The memory's id (0: not known, the key names it). An entry naming its memory by id
    #: is refused when that memory is forgotten or purged by the time it is written (a
    #: write that waited names the memory it read, never whatever holds its key then);
    #: with a ``version`` that is no longer current, it is written and reported stale.
    #: Not part of equality.
    memory_id: int = field(default=0, compare=False)


@dataclass(frozen=True, kw_only=True)
class WorkingChange:
    """A change of one robot's working memory, written in one transaction.

    ``put`` memories enter (or update) membership only while visible: one forgotten or
    purged meanwhile is refused, and one named by ``memory_id`` whose ``version`` is no
    longer the current one (updated meanwhile) is reported stale (see
    :class:`WorkingResult`). ``evict`` keys leave it, each logged as an eviction;
    ``evict_ids`` names, in the same order, the memory each eviction took out (0, or
    missing at the end: the memory now under the key), so an eviction that waited never
    touches another memory that has taken its key. ``touch`` ids get an access recorded
    on the memory.
    """

    robot: str
    at: datetime
    put: Sequence[WorkingState] = ()
    evict: Sequence[str] = ()
    touch: Sequence[int] = ()
    evict_ids: Sequence[int] = ()

    def evictions(self) -> list[tuple[str, int]]:
        """``evict`` with each one's memory id (0: not named)."""
        ids = list(self.evict_ids)
        return list(zip(self.evict, ids + [0] * (len(self.evict) - len(ids)), strict=False))


@dataclass(frozen=True)
class WorkingResult:
    """What a :class:`WorkingChange` did: the robot's working-set version after it, whether
    that version was the one expected (nobody else changed the set in between), the
    keys refused because the memory is not visible (forgotten, purged, or not the memory
    the entry names), and the keys entered whose memory is at another version than the
    entry named (the writer's copy is old: it fetches the memory again)."""

    version: int
    in_step: bool
    refused: frozenset[str] = frozenset()
    stale: frozenset[str] = frozenset()


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
    them or any tag below one of them (``"user"`` matches ``"user:preferences"``), exactly,
    byte for byte (:mod:`htm_core.identity`: ``"User"`` does not match ``"user"``).
    ``robot`` None means all robots.
    """

    start: datetime | None = None
    end: datetime | None = None
    robot: str | None = None
    tags: tuple[str, ...] = ()
    #: Only memories of one of these kinds (empty: every kind).
    kinds: tuple[str, ...] = ()
    #: Only memories whose source is one of these, exactly (empty: any source, or none).
    sources: tuple[str, ...] = ()
    #: Only memories with a confidence of at least this (None: any, or none).
    min_confidence: float | None = None

    @property
    def is_empty(self) -> bool:
        return (self.start is None and self.end is None and self.robot is None
                and not self.tags and not self.provenance)

    @property
    def provenance(self) -> bool:
        """Whether these filters test a memory's kind, source or confidence."""
        return bool(self.kinds or self.sources or self.min_confidence is not None)

    def admits(self, kind: str, source: str | None, confidence: float | None) -> bool:
        """Whether a memory of this kind, source and confidence passes the kind, source
        and confidence filters (a NULL confidence never passes ``min_confidence``)."""
        return ((not self.kinds or kind in self.kinds)
                and (not self.sources or source in self.sources)
                and (self.min_confidence is None
                     or (confidence is not None and confidence >= self.min_confidence)))


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

