"""``HTM.update`` and ``HTM.versions``: a memory's new version, its old ones kept as history.

:class:`Versions` is the service ``HTM`` holds for them (its store, robot, intake, embedding
service, resident set, lock and clock). An update keeps the memory's key, id, creation time
and working-memory membership, makes the new text its current version in one compare-and-set
transaction (:meth:`~htm_core.store.base.Versions.update_memory`) and keeps the superseded
one as history. Also here: ``recall(..., include_history=True)`` (:func:`with_history`) and
the re-add of a text an update replaced (:func:`write_readding`). See docs/concepts.md
("Updating a memory: versions") and docs/decisions.md ("HTM.update").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ._embedding import EmbeddingService
from ._intake import Intake
from ._native import SharedLock
from .clock import Clock
from .errors import ConflictError, DuplicateKeyError, NotFoundError, ValidationError
from .models import Hit, Memory
from .scoring import evidence_of
from .store import ArmQuery, LongTermStore, NewMemory, SearchFilters
from .store import base as roles
from .store.base import UPDATE_FIELDS, capability
from .validation import check_key
from .working.resident import ResidentSet

__all__ = ["Versions", "changed_fields", "check_include_history", "rekey_superseded",
           "with_history", "write_readding"]

T = TypeVar("T")

#: How many ``<key>.<n>`` keys a re-added text may try (see :func:`rekey_superseded`).
_MAX_REKEY = 100


def _check_version(value: Any) -> int | None:
    """``update``'s ``expected_version``: None or a whole number from 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"expected_version must be a memory's version (a whole number "
                              f"from 1, as in memory.version) or None, got {value!r}")
    return value


def changed_fields(record: NewMemory, current: Memory) -> tuple[str, ...]:
    """The fields of ``record`` (an update of ``current``) that differ from it."""
    differs = {"content": record.content != current.content,
               "importance": record.importance != current.importance,
               "tags": set(record.tags) != set(current.tags),
               "metadata": record.metadata != current.metadata,
               "kind": record.kind != current.kind, "source": record.source != current.source,
               "confidence": record.confidence != current.confidence}
    return tuple(f for f in UPDATE_FIELDS if differs[f])


def _updatable(key: str, current: Memory | None, expected: int | None) -> Memory:
    """``current``, the memory an update of ``key`` starts from, if it can be updated."""
    if current is None:
        raise _missing(key)
    if current.forgotten_at is not None:
        raise NotFoundError(f"memory {key!r} is forgotten; restore({key!r}) it before "
                            "updating it")
    if expected is not None and expected != current.version:
        raise ConflictError(key, expected, current.version)
    return current


def _missing(key: str) -> NotFoundError:
    return NotFoundError(f"no memory with key {key!r}: it was never stored, or it has been "
                         "purged; add() it instead")


class Versions:
    """``update`` and ``versions`` for one robot: new versions written compare-and-set,
    with their vectors, working memory and windows brought along."""

    def __init__(self, store: LongTermStore, robot: str, *, intake: Intake,
                 embedding: EmbeddingService, resident: ResidentSet, lock: SharedLock,
                 clock: Clock) -> None:
        self._store = store
        self._robot = robot
        self._intake = intake
        self._embedding = embedding
        self._resident = resident
        self._lock = lock
        self._clock = clock

    def update(self, key: str, content: str, *, importance: float | None = None,
               tags: Iterable[str] | str | None = None,
               metadata: Mapping[str, Any] | None = None,
               expected_version: int | None = None, kind: str | None = None,
               source: str | None = None, confidence: float | None = None) -> Memory:
        """The memory under ``key`` with a new version; see :meth:`HTM.update
        <htm_core.HTM.update>`."""
        key = check_key(key)
        expected = _check_version(expected_version)
        current = self._store.get(key, include_forgotten=True)
        record = self._intake.record(
            content, key=key,
            importance=current.importance if importance is None and current else importance,
            tags=current.tags if tags is None and current else tags,
            metadata=current.metadata if metadata is None and current else metadata,
            # Not given: as the memory has it (the rules do not classify an update).
            kind=current.kind if kind is None and current else kind,
            source=current.source if source is None and current else source,
            confidence=current.confidence if confidence is None and current else confidence)
        current = _updatable(key, current, expected)
        fields = changed_fields(record, current)
        return self._write(record, current, fields, strict=expected is not None) \
            if fields else current

    def versions(self, key: str) -> list[Memory]:
        """Every version of the memory under ``key``, oldest first; see
        :meth:`HTM.versions <htm_core.HTM.versions>`."""
        key = check_key(key)
        found = capability(self._store, roles.Versions, "listing versions").versions(key)
        if not found:
            raise _missing(key)
        return found

    def _write(self, record: NewMemory, current: Memory, fields: tuple[str, ...], *,
               strict: bool) -> Memory:
        """Write ``fields`` of ``record`` over ``current`` (compare-and-set in the store),
        with a vector made for a new text, and bring working memory and windows along."""
        if "content" in fields:
            record = self._embedding.with_vectors([record])[0]
        with self._lock:
            memory = capability(self._store, roles.Versions, "update").update_memory(
                record, robot=self._robot, at=self._clock(), read_version=current.version,
                fields=fields, strict=strict)
            self._resident.refresh()
            memory = replace(memory, in_working_memory=record.key in self._resident.wm)
        if "content" in fields and memory.content == record.content:
            self._embedding.add_windows([memory])  # the trigger dropped the old text's windows
        self._embedding.wake()
        return memory


def check_include_history(value: Any) -> bool:
    """``recall``'s ``include_history``: True or False."""
    if not isinstance(value, bool):
        raise ValidationError(f"include_history must be True or False, got {value!r}")
    return value


def with_history(store: LongTermStore, hits: list[Hit], *, query: str,
                 query_vector: Callable[[], Sequence[float]], strategy: str, limit: int,
                 filters: SearchFilters, min_score: float | None = None) -> list[Hit]:
    """``hits`` (current versions) merged with the best superseded versions, by score.

    The history is searched with the same strategy and filters (on the memory); each old
    version found gets its relevance on the recall's 0..1 scale
    (:func:`htm_core.scoring.evidence_of`: its cosine to the query when the vector arm
    found it, else the share of the query's words it holds). Versions below ``min_score``
    are dropped. On a tie the current version comes first. At most ``limit`` hits in all.
    """
    history = capability(store, roles.Versions, "recall(include_history=True)")
    arms: dict[str, list[tuple[Memory, float]]] = {}
    if strategy != "fulltext":
        arms["vector"] = history.search_history(
            ArmQuery(limit=limit, filters=filters, vector=query_vector()))
    if strategy != "vector":
        arms["fulltext"] = history.search_history(ArmQuery(limit=limit, filters=filters,
                                                         text=query))
    found: dict[tuple[int, int], tuple[Memory, dict[str, int], float | None]] = {}
    for arm, listed in arms.items():
        for rank, (memory, score) in enumerate(listed, start=1):
            place = (memory.id, memory.version)
            _, ranks, cosine = found.get(place, (memory, {}, None))
            found[place] = (memory, {**ranks, arm: rank}, score if arm == "vector" else cosine)
    old = [Hit(memory=memory, score=evidence_of(query, memory.content, cosine), ranks=ranks)
           for memory, ranks, cosine in found.values()]
    old = [h for h in old if min_score is None or h.score >= min_score]
    merged = sorted([*hits, *old], key=lambda h: (-h.score, h.memory.superseded))
    return merged[:limit]


def rekey_superseded(store: LongTermStore, records: Sequence[NewMemory]
                     ) -> list[NewMemory] | None:
    """``records`` with a new key for each text re-added after an update replaced it.

    A memory added without a key has the stable key of its robot and text; once updated,
    that key holds other text, and adding the old text again would clash with it. Such a
    record goes to ``<key>.2`` (or ``.3``... past others updated the same way), where a
    later add of the same text finds it again. None when no record needs it (the clash is
    a real one: the caller's :class:`~htm_core.errors.DuplicateKeyError` stands).
    """
    out, moved = [], False
    for record in records:
        key = record.key
        for n in range(2, _MAX_REKEY + 2):
            held = record.explicit_key or store.get(key, include_forgotten=True)
            if not isinstance(held, Memory) or held.content == record.content \
                    or held.version == 1:
                break
            key = f"{record.key}.{n}"
        if key != record.key:
            moved = True
            record = replace(record, key=key)
        out.append(record)
    return out if moved else None


def write_readding(store: LongTermStore, records: list[NewMemory],
                   write: Callable[[list[NewMemory]], T]) -> tuple[T, list[NewMemory]]:
    """``write(records)``; when it clashes with an updated memory's key (see
    :func:`rekey_superseded`), ``write`` again with the moved records. Returns what
    ``write`` returned and the records written."""
    try:
        return write(records), records
    except DuplicateKeyError:
        again = rekey_superseded(store, records)
        if again is None:
            raise
        return write(again), again
