"""How an update meets the memory as it is now: which fields it writes, or why it is refused.

One rule for every backend (the SQL stores and :class:`~htm_core.testing.InMemoryStore`):
an update names the version it was based on; when the memory moved on since, a field the
update sets that the other writer changed too, to another value, refuses it
(:class:`~htm_core.errors.ConflictError`), every other field the other writer changed is
kept, and ``expected_version`` (strict) refuses any move.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ..errors import ConflictError
from ..models import Memory
from .base import UPDATE_FIELDS, NewMemory

__all__ = ["merge_update", "update_fields"]


def update_fields(memory: Memory | NewMemory) -> dict[str, Any]:
    """The fields an update can set, as compared: tags as a set."""
    return {"content": memory.content, "importance": float(memory.importance),
            "tags": frozenset(memory.tags), "metadata": dict(memory.metadata),
            "kind": memory.kind, "source": memory.source, "confidence": memory.confidence}


def merge_update(key: str, record: NewMemory, fields: Collection[str], *,
                 now: Mapping[str, Any], base: Mapping[str, Any] | None,
                 versions: tuple[int | None, int], strict: bool) -> set[str]:
    """The fields of ``record`` an update writes on the memory as it ``now`` is.

    ``versions`` is (the version the update was based on, or None; the version now),
    ``base`` that version's fields (None when the memory has no such version). When the
    memory moved on: with ``strict`` (``expected_version``) the update is refused; else a
    field the update sets that the other writer changed too, to another value, refuses
    it (:class:`~htm_core.errors.ConflictError`), and every other field the other writer
    changed is kept.

    >>> from datetime import datetime, timezone
    >>> rec = NewMemory(key="k", content="a", robot="r", importance=5.0, token_count=1,
    ...                 created_at=datetime.now(timezone.utc))
    >>> was = {"content": "a", "importance": 1.0, "tags": frozenset(), "metadata": {}}
    >>> sorted(merge_update("k", rec, ["importance"], now={**was, "content": "b"}, base=was,
    ...                     versions=(1, 2), strict=False))
    ['importance']
    """
    read, current = versions
    wanted = update_fields(record)
    if read is not None and read != current:
        if strict or base is None:
            raise ConflictError(key, read, current)
        clash = tuple(f for f in UPDATE_FIELDS if f in fields
                      and now[f] != base[f] and now[f] != wanted[f])
        if clash:
            raise ConflictError(key, read, current, clash)
    return {f for f in fields if wanted[f] != now[f]}
