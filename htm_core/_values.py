"""Values every store and the export format keep exactly: the checks ``add`` and ``import`` run.

A memory's metadata travels as JSON (SQLite text, PostgreSQL ``jsonb``, export lines) and its
``created_at`` must be a time both backends and ISO 8601 can hold; what cannot make that
round trip unchanged is refused up front with a specific error, before anything is written.
:func:`check_metadata` (a dict of JSON values at most :data:`MAX_METADATA_DEPTH` deep, no NUL,
no unpaired surrogate) and :func:`check_created_at` (between :data:`MIN_TIME` and
:data:`MAX_TIME`) are the checks; the rules are in docs/reliability.md ("Values").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from .errors import InvalidMetadataError, InvalidTimeError

__all__ = ["MAX_METADATA_DEPTH", "MAX_TIME", "MIN_TIME", "check_created_at", "check_metadata"]

#: How deeply metadata may nest (a dict or list inside another counts one level).
MAX_METADATA_DEPTH = 32
#: The earliest and latest ``created_at`` htm stores (UTC).
MIN_TIME = datetime(1, 1, 2, tzinfo=timezone.utc)
MAX_TIME = datetime(9998, 12, 31, tzinfo=timezone.utc)
_INT64 = 2**63
_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_text(text: str, where: str) -> None:
    if "\x00" in text:
        raise InvalidMetadataError(f"{where} holds a NUL character (\\x00), which PostgreSQL "
                                   "cannot store; remove it")
    if _SURROGATE.search(text):
        raise InvalidMetadataError(f"{where} holds an unpaired surrogate, which is not valid "
                                   "Unicode; decode the text with errors='replace' first")


def _clean(value: Any, where: str, depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise InvalidMetadataError(f"{where} = {value} does not fit in 64 bits; store "
                                       "it as a string")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMetadataError(f"{where} = {value!r} is not a finite number; JSON "
                                       "has no NaN or infinity")
        return value
    if isinstance(value, str):
        _check_text(value, where)
        return value
    if depth >= MAX_METADATA_DEPTH and isinstance(value, (Mapping, list, tuple)):
        raise InvalidMetadataError(f"metadata nests deeper than {MAX_METADATA_DEPTH} levels "
                                   f"(at {where}); flatten it")
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidMetadataError(
                    f"{where} has the key {key!r} ({type(key).__name__}); metadata keys must "
                    "be strings (JSON would turn it into a string)")
            _check_text(key, f"a key of {where}")
            out[key] = _clean(item, f"{where}[{key!r}]", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_clean(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise InvalidMetadataError(
        f"{where} is a {type(value).__name__}, which JSON cannot hold; use strings, numbers, "
        "booleans, None, lists and dicts (e.g. a datetime as its .isoformat())")


def check_metadata(metadata: Any) -> dict[str, Any]:
    r"""``metadata`` checked as docs/reliability.md ("Values") says (None is ``{}``); a new dict.

    >>> check_metadata({"source": "chat", "turn": 3, "tags": ("a", "b")})
    {'source': 'chat', 'turn': 3, 'tags': ['a', 'b']}
    >>> check_metadata({"bad": "nul\x00"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    htm_core.errors.InvalidMetadataError: metadata['bad'] holds a NUL character ...
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidMetadataError(f"metadata must be a dict, got {type(metadata).__name__}")
    result: dict[str, Any] = _clean(metadata, "metadata", 0)
    return result


def check_created_at(value: Any,
                     aware: Callable[[datetime], datetime] | None = None) -> datetime:
    """``created_at`` as an aware UTC datetime; ``aware`` gives a naive one its zone (UTC)."""
    if not isinstance(value, datetime):
        raise InvalidTimeError(f"created_at must be a datetime, got {value!r}")
    try:
        when = value if value.tzinfo is not None else (
            aware(value) if aware is not None else value.replace(tzinfo=timezone.utc))
        utc: datetime | None = when.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        utc = None
    if utc is None or not MIN_TIME <= utc <= MAX_TIME:
        raise InvalidTimeError(
            f"created_at {value.isoformat()} is outside the times htm stores "
            f"({MIN_TIME.date()} to {MAX_TIME.date()} UTC); check the date")
    return utc
