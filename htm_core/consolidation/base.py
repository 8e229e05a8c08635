"""What a summarising strategy takes and gives: source items in, a :class:`Digest` out.

A strategy has a ``name`` and ``summarise(items, target_tokens) -> Digest``; the digest's
text is at most ``target_tokens`` long (counted by the strategy's token counter) and names
the items it was made from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol, runtime_checkable

from ..errors import InvalidContentError, InvalidTimeError, ValidationError
from ..validation import check_content, check_int

__all__ = ["Digest", "DigestStrategy", "SourceItem", "check_target", "source_items",
           "sources_of"]


@dataclass(frozen=True, kw_only=True)
class SourceItem:
    """One text a digest may be made from: a memory's content, or a lower period's digest.

    ``id`` and ``key`` name it in the digest's provenance; ``embedding`` (its vector, when
    known) and ``created_at`` help the extractive strategy choose and order.
    """

    text: str
    id: int | str | None = None
    key: str | None = None
    embedding: tuple[float, ...] | None = None
    created_at: datetime | None = None


@dataclass(frozen=True)
class Digest:
    """A digest's text, the items it was made from (in source order), its size and maker."""

    text: str
    sources: tuple[SourceItem, ...]
    tokens: int
    strategy: str

    @property
    def source_ids(self) -> list[int | str]:
        """The ids of :attr:`sources` that have one."""
        return [item.id for item in self.sources if item.id is not None]

    @property
    def source_keys(self) -> list[str]:
        """The keys of :attr:`sources` that have one."""
        return [item.key for item in self.sources if item.key is not None]


@runtime_checkable
class DigestStrategy(Protocol):
    """Makes a digest of source items within a token target."""

    name: str

    def summarise(self, items: Iterable[Any], target_tokens: int) -> Digest:
        """A digest of ``items`` (see :func:`source_items`) of at most ``target_tokens``."""
        ...


def _embedding(value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    try:
        vector = tuple(float(x) for x in value)
    except (TypeError, ValueError):
        raise ValidationError("an item's embedding must be a sequence of numbers") from None
    if not vector or not all(math.isfinite(x) for x in vector):
        raise ValidationError("an item's embedding must be a non-empty list of finite numbers; "
                              "leave it out (None) when the item has none")
    return vector


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def _item(value: Any) -> SourceItem:
    """``value`` as a source item; a non-blank text must be one htm can store."""
    item = _as_item(value)
    if not isinstance(item.text, str):
        raise InvalidContentError(f"an item's text must be a string, got {item.text!r}")
    if item.text.strip():
        check_content(item.text)
    return item


def _as_item(value: Any) -> SourceItem:
    if isinstance(value, SourceItem):
        return value
    if isinstance(value, str):
        return SourceItem(text=value)
    text = _field(value, "text")
    text = _field(value, "content") if text is None else text
    if not isinstance(text, str):
        raise InvalidContentError(
            f"each item must be a string, a SourceItem, a dict with 'text' (or 'content'), or "
            f"a memory; got {type(value).__name__}")
    created_at = _field(value, "created_at")
    if created_at is not None and not isinstance(created_at, datetime):
        raise InvalidTimeError(f"an item's created_at must be a datetime or None, got "
                               f"{created_at!r}")
    return SourceItem(text=text, id=_field(value, "id"), key=_field(value, "key"),
                      embedding=_embedding(_field(value, "embedding")),
                      created_at=created_at)


def source_items(items: Iterable[Any]) -> list[SourceItem]:
    """``items`` as :class:`SourceItem` values in source order.

    Each item is a string, a ``SourceItem``, a dict (``text`` or ``content``, and
    optionally ``id``, ``key``, ``embedding``, ``created_at``) or a memory
    (:class:`htm_core.Memory`). Source order is ``created_at`` order when every item has
    one (ties keep the order given), else the order given.
    """
    if isinstance(items, (str, bytes)):
        raise InvalidContentError("give a list of items to summarise, not one string")
    out = [_item(value) for value in items]
    times = [item.created_at for item in out]
    if out and all(isinstance(when, datetime) for when in times):
        order = sorted(range(len(out)), key=lambda i: _utc(times[i]))
        out = [out[i] for i in order]
    return out


def _utc(when: datetime | None) -> datetime:
    """``when`` made comparable: a naive time is read as UTC, as htm reads ``created_at``."""
    if when is None:
        raise InvalidTimeError("every item needs created_at to be ordered by it")
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def check_target(target_tokens: Any) -> int:
    """A token target is a positive integer."""
    return check_int("target_tokens", target_tokens)


def sources_of(items: Sequence[SourceItem], used: Iterable[int]) -> tuple[SourceItem, ...]:
    """The items at the positions ``used``, in source order, each once."""
    return tuple(items[i] for i in sorted(set(used)))
