"""Eviction policies: the order in which a full working memory gives items up.

A policy is a sort key (:class:`EvictionPolicy`): working memory keeps its items in a binary
heap by that key and evicts from the top. :class:`HybridPolicy` (the default: lowest
importance first, then the oldest memory), :class:`ImportancePolicy`, :class:`LRUPolicy` and
:class:`FrequencyPolicy`; a policy whose key depends on access says so with
``tracks_access``. The table: docs/concepts.md ("Eviction").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import UnknownPolicyError

__all__ = [
    "POLICIES",
    "EvictionPolicy",
    "FrequencyPolicy",
    "HybridPolicy",
    "ImportancePolicy",
    "LRUPolicy",
    "WorkingItem",
    "get_policy",
]


@dataclass(slots=True, kw_only=True, eq=False)
class WorkingItem:
    """One item resident in working memory. Times are POSIX timestamps (seconds, UTC)."""

    key: str
    content: str
    token_count: int
    importance: float
    created_at: float
    added_at: float
    last_accessed: float
    access_count: int = 0
    #: Order of entry into working memory (unique per working memory).
    seq: int = 0
    #: Order of the latest access (unique; drawn from the same counter as ``seq``), so an
    #: access moves an item even when the clock has not advanced.
    access_seq: int = 0
    metadata: dict[str, object] = field(default_factory=dict)


SortKey = tuple[float, ...]


class EvictionPolicy(Protocol):
    """Orders items for eviction: the smallest key is evicted first."""

    name: str
    tracks_access: bool

    def sort_key(self, item: WorkingItem) -> SortKey:
        """The eviction order key of ``item``; ties are broken by ``seq`` inside it."""
        ...


class HybridPolicy:
    """Lowest importance first; among equals the oldest memory, then the earliest added."""

    name = "hybrid"
    tracks_access = False

    def sort_key(self, item: WorkingItem) -> SortKey:
        return (item.importance, item.created_at, item.seq)


class ImportancePolicy:
    """Lowest importance first; among equals the earliest added to working memory."""

    name = "importance"
    tracks_access = False

    def sort_key(self, item: WorkingItem) -> SortKey:
        return (item.importance, item.seq)


class LRUPolicy:
    """Least recently accessed (added, read or recalled) first."""

    name = "lru"
    tracks_access = True

    def sort_key(self, item: WorkingItem) -> SortKey:
        return (item.last_accessed, item.access_seq)


class FrequencyPolicy:
    """Least often accessed first; among equals the least recently accessed."""

    name = "frequency"
    tracks_access = True

    def sort_key(self, item: WorkingItem) -> SortKey:
        return (item.access_count, item.last_accessed, item.access_seq)


POLICIES: dict[str, Callable[[], EvictionPolicy]] = {
    "hybrid": HybridPolicy,
    "importance": ImportancePolicy,
    "lru": LRUPolicy,
    "frequency": FrequencyPolicy,
}


def get_policy(policy: str | EvictionPolicy) -> EvictionPolicy:
    """Resolve a policy name (or pass a policy object through)."""
    if isinstance(policy, str):
        try:
            return POLICIES[policy]()
        except KeyError:
            raise UnknownPolicyError(
                f"unknown eviction policy {policy!r}; use one of {', '.join(sorted(POLICIES))}"
            ) from None
    if not callable(getattr(policy, "sort_key", None)):
        raise UnknownPolicyError(
            f"{policy!r} is not an eviction policy: it needs a sort_key(item) method"
        )
    return policy
