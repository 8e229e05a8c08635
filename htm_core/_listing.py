"""``HTM.get`` and ``HTM.list``: reading memories as they are (or were), counting no access.

:class:`Listing` is a part of the facade (like :class:`~htm_core._async.AsyncTwins`): exact
lookup by key and pages of memories by filters, key prefix and order, done in SQL by the
store (:meth:`~htm_core.store.base.Records.list_memories`). Neither touches working memory
nor counts an access. A page's ``next_cursor`` is opaque: base64 of the order, the
direction and the (order value, id) of the page's last memory, from which the next page
starts (keyset paging: no offset, so a page costs the same wherever it is).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from .errors import ValidationError
from .models import Memory, Page
from .store import SearchFilters
from .store.base import LIST_ORDERS
from .timeframe import parse_timeframe
from .validation import check_key, check_limit, check_tags

if TYPE_CHECKING:
    from .htm import HTM

__all__ = ["Listing", "decode_cursor", "encode_cursor"]

_BAD_CURSOR = ("cursor {!r:.60} is not a next_cursor that list() returned; pass a page's "
               "next_cursor unchanged, or None for the first page")


def encode_cursor(order: str, descending: bool, memory: Memory) -> str:
    """The cursor of the page after ``memory`` in this order."""
    value = getattr(memory, order)
    if isinstance(value, datetime):
        value = value.isoformat()
    raw = json.dumps([order, descending, value, memory.id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: Any, order: str, descending: bool) -> tuple[Any, int]:
    """The (order value, id) a cursor continues from; ``ValidationError`` if it is not one
    of ``list``'s or was made for another order or direction."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        made_for, made_desc, value, last_id = json.loads(base64.urlsafe_b64decode(padded))
        if made_for == "created_at":
            value = datetime.fromisoformat(value)
        if made_for not in LIST_ORDERS or not isinstance(last_id, int) \
                or not isinstance(value, (str, float, int, datetime)):
            raise ValueError(made_for)
    except (TypeError, ValueError, binascii.Error, UnicodeDecodeError):
        raise ValidationError(_BAD_CURSOR.format(cursor)) from None
    if (made_for, made_desc) != (order, descending):
        raise ValidationError(
            f"this cursor continues a list in order={made_for!r}, descending={made_desc}; "
            f"call list() with those (and the same filters), or cursor=None to start over")
    return value, last_id


class Listing:
    """``HTM``'s ``get`` and ``list``."""

    def get(self, key: str, include_forgotten: bool = False, *,
            version: int | None = None) -> Memory | None:
        """The memory under ``key`` (exact lookup), or None (a forgotten one only with
        ``include_forgotten``). Unlike :meth:`retrieve` it counts no access and leaves
        working memory alone. With ``version`` (1 for the first text), that version of
        the memory (a superseded one has ``superseded_at`` set), or None when it has no
        such version; see :meth:`update`."""
        store = cast("HTM", self).store
        key = check_key(key)
        if version is None:
            return store.get(key, include_forgotten=include_forgotten is True)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValidationError(f"version must be a whole number from 1, got {version!r}")
        found = [m for m in store.versions(key) if m.version == version]
        if not found or (found[0].forgotten_at is not None and include_forgotten is not True):
            return None
        return found[0]

    def list(self, *, robot: str | None = None, tags: Iterable[str] | str | None = None,
             timeframe: Any = None, key_prefix: str | None = None,
             include_forgotten: bool = False, order: str = "created_at",
             descending: bool = False, limit: int = 100, cursor: str | None = None) -> Page:
        """One page of memories, filtered and ordered in the store; counts no access.

        Args:
            robot, tags, timeframe: as for :meth:`recall` (a tag matches the tags below it).
            key_prefix: only keys starting with this (``"doc:"``, a chat session's prefix).
            include_forgotten: list forgotten memories too.
            order: ``"created_at"`` (default), ``"key"`` or ``"importance"``; ties by id.
            descending: the order reversed.
            limit: memories per page, 1 to 10,000.
            cursor: ``None`` for the first page, then the ``next_cursor`` of the page
                before (with the same other arguments).

        Returns:
            a :class:`~htm_core.models.Page`; ``next_cursor`` is ``None`` on the last page.
        """
        htm = cast("HTM", self)
        if order not in LIST_ORDERS:
            raise ValidationError(f"order must be one of {', '.join(LIST_ORDERS)}, "
                                  f"got {order!r}")
        if not isinstance(descending, bool) or not isinstance(include_forgotten, bool):
            raise ValidationError("descending and include_forgotten must be True or False")
        limit = check_limit(limit)
        if key_prefix is not None and (not isinstance(key_prefix, str) or not key_prefix):
            raise ValidationError(f"key_prefix must be a non-empty string or None, "
                                  f"got {key_prefix!r}")
        start, end = parse_timeframe(timeframe, clock=htm._clock)
        filters = SearchFilters(start=start, end=end, tags=check_tags(tags),
                                robot=None if robot is None else check_key(robot))
        after = None if cursor is None else decode_cursor(cursor, order, descending)
        rows = htm.store.list_memories(filters, key_prefix=key_prefix,
                                       include_forgotten=include_forgotten, order=order,
                                       descending=descending, limit=limit + 1, after=after)
        more = len(rows) > limit
        return Page(tuple(rows[:limit]),
                    encode_cursor(order, descending, rows[limit - 1]) if more else None)
