"""``HTM.get`` and ``HTM.list``: reading memories as they are (or were), counting no access.

:class:`Lister` is the service ``HTM`` holds for them (a store and a clock): exact lookup by
key and pages of memories by filters, key prefix and order, done in SQL by the store
(:meth:`~htm_core.store.base.Records.list_memories`). Neither touches working memory nor
counts an access. A page's ``next_cursor`` is opaque (base64 of the order, the direction, the
last memory's (order value, id) and, for an ``importance`` walk, the history mark taken before
its first page): keyset paging, see docs/api.md ("Paging").
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ._provenance import provenance_filters
from .clock import Clock
from .errors import ValidationError
from .models import Memory, Page
from .store import LongTermStore, SearchFilters
from .store.base import LIST_ORDERS, Versions, capability
from .timeframe import parse_timeframe
from .validation import check_key, check_key_prefix, check_limit, check_tags

__all__ = ["Lister", "decode_cursor", "encode_cursor"]

_BAD_CURSOR = ("cursor {!r:.60} is not a next_cursor that list() returned; pass a page's "
               "next_cursor unchanged, or None for the first page")


def encode_cursor(order: str, descending: bool, memory: Memory,
                  mark: int | None = None) -> str:
    """The cursor of the page after ``memory`` in this order (``mark``: the walk's history
    mark, for ``importance``)."""
    value = getattr(memory, order)
    if isinstance(value, datetime):
        value = value.isoformat()
    fields = [order, descending, value, memory.id]
    raw = json.dumps(fields if mark is None else [*fields, mark], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: Any, order: str, descending: bool) -> tuple[Any, int, int | None]:
    """The (order value, id, history mark or None) a cursor continues from;
    ``ValidationError`` if it is not one of ``list``'s or was made for another order or
    direction."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        made_for, made_desc, value, last_id, *rest = json.loads(
            base64.urlsafe_b64decode(padded))
        mark = rest[0] if rest else None
        if made_for == "created_at":
            value = datetime.fromisoformat(value)
        if made_for not in LIST_ORDERS or not _whole(last_id) or len(rest) > 1 \
                or not (mark is None or _whole(mark)) or not isinstance(made_desc, bool) \
                or isinstance(value, bool) or not isinstance(value, (str, float, int, datetime)):
            raise ValueError(made_for)
    except (TypeError, ValueError, binascii.Error, UnicodeDecodeError):
        raise ValidationError(_BAD_CURSOR.format(cursor)) from None
    if (made_for, made_desc) != (order, descending):
        raise ValidationError(
            f"this cursor continues a list in order={made_for!r}, descending={made_desc}; "
            f"call list() with those (and the same filters), or cursor=None to start over")
    return value, last_id, mark


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Lister:
    """``get`` and ``list`` over one store: exact lookups and keyset pages, counting no
    access and leaving working memory alone."""

    def __init__(self, store: LongTermStore, *, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def get(self, key: str, include_forgotten: bool = False, *,
            version: int | None = None) -> Memory | None:
        """The memory (or one version of it) under ``key``; see :meth:`HTM.get
        <htm_core.HTM.get>`."""
        key = check_key(key)
        if version is None:
            return self._store.get(key, include_forgotten=include_forgotten is True)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValidationError(f"version must be a whole number from 1, got {version!r}")
        history = capability(self._store, Versions, f"reading version {version} of {key!r}")
        found = [m for m in history.versions(key) if m.version == version]
        if not found or (found[0].forgotten_at is not None and include_forgotten is not True):
            return None
        return found[0]

    def list(self, *, robot: str | None = None, tags: Iterable[str] | str | None = None,
             timeframe: Any = None, key_prefix: str | None = None,
             include_forgotten: bool = False, order: str = "created_at",
             descending: bool = False, limit: int = 100, cursor: str | None = None,
             kinds: Any = None, sources: Any = None, min_confidence: Any = None) -> Page:
        """One page of memories; see :meth:`HTM.list <htm_core.HTM.list>`."""
        if order not in LIST_ORDERS:
            raise ValidationError(f"order must be one of {', '.join(LIST_ORDERS)}, "
                                  f"got {order!r}")
        if not isinstance(descending, bool) or not isinstance(include_forgotten, bool):
            raise ValidationError("descending and include_forgotten must be True or False")
        limit = check_limit(limit)
        key_prefix = check_key_prefix(key_prefix)
        start, end = parse_timeframe(timeframe, clock=self._clock)
        filters = SearchFilters(start=start, end=end, tags=check_tags(tags),
                                robot=None if robot is None else check_key(robot),
                                **provenance_filters(kinds, sources, min_confidence))
        after, mark = None, None
        if cursor is not None:
            value, last_id, mark = decode_cursor(cursor, order, descending)
            after = (value, last_id)
        elif order == "importance" and isinstance(self._store, Versions):
            mark = self._store.history_mark()  # pages keep the order an update would move
        rows = self._store.list_memories(filters, key_prefix=key_prefix,
                                         include_forgotten=include_forgotten, order=order,
                                         descending=descending, limit=limit + 1, after=after,
                                         as_of=mark)
        more = len(rows) > limit
        return Page(tuple(rows[:limit]),
                    encode_cursor(order, descending, rows[limit - 1], mark) if more else None)
