"""What both SQL backends mean by coherence: the re-add merge, working-set order numbers.

A second add of content a memory already holds is never a silent loss: :func:`merge_readd`
says what it changes (tags unioned, importance raised to a larger given one, metadata
merged with the new keys winning) and what the ``touch`` log line records about it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .base import NewMemory

__all__ = ["Merged", "as_dict", "merge_readd", "touch_detail"]


@dataclass
class Merged:
    """A memory's importance, metadata and tags after a re-add, and what changed."""

    importance: float
    metadata: dict[str, Any]
    tags: set[str]
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def changed_row(self) -> bool:
        """Whether importance or metadata (columns of the memory's row) changed."""
        return "importance" in self.detail or "metadata" in self.detail


def merge_readd(current: Merged, record: NewMemory) -> Merged:
    """Merge ``record`` (a second add of ``current``'s content) into ``current``.

    >>> from datetime import datetime, timezone
    >>> rec = NewMemory(key="k", content="c", robot="r", importance=7.0, token_count=1,
    ...                 created_at=datetime.now(timezone.utc), tags=("b",), metadata={"x": 2})
    >>> m = merge_readd(Merged(3.0, {"x": 1, "y": 1}, {"a"}), rec)
    >>> m.importance, m.metadata, sorted(m.tags), m.detail["importance"]
    (7.0, {'x': 2, 'y': 1}, ['a', 'b'], [3.0, 7.0])
    """
    detail = dict(current.detail)
    importance = current.importance
    if record.importance_given and record.importance > importance:
        first = detail.get("importance", [importance])[0]
        importance = float(record.importance)
        detail["importance"] = [first, importance]
    metadata = current.metadata
    if record.metadata:
        merged = {**metadata, **record.metadata}
        if merged != metadata:
            keys = sorted(set(detail.get("metadata", [])) | {
                k for k, v in record.metadata.items() if metadata.get(k, _ABSENT) != v})
            detail["metadata"] = keys
            metadata = merged
    tags = set(current.tags)
    added = set(record.tags) - tags
    if added:
        detail["tags"] = sorted(set(detail.get("tags", [])) | added)
        tags |= added
    return Merged(importance, metadata, tags, detail)


def touch_detail(merged: Merged | None) -> dict[str, Any]:
    """The detail of the log line of a re-add: the reason, and what it merged."""
    detail: dict[str, Any] = {"reason": "added again"}
    if merged is not None and merged.detail:
        detail["merged"] = merged.detail
    return detail


_ABSENT = object()


def as_dict(value: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """A metadata column as a dict (SQLite keeps JSON text, PostgreSQL ``jsonb``)."""
    if value is None:
        return {}
    if isinstance(value, str):
        loaded = json.loads(value)
        return dict(loaded) if isinstance(loaded, dict) else {}
    return dict(value)
