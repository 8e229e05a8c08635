"""Context assembly strategies: which resident items go into the prompt, in what order.

=============  =====================================================================
``recent``     most recently accessed first
``important``  highest importance first; among equals the most recently accessed
``balanced``   highest ``importance × 1 / (1 + age in hours)`` first, where age is the
               time since the item was last accessed (added or recalled)
=============  =====================================================================

Every strategy is a lazy ordering over indexes that working memory keeps up to date,
so assembling an 8k-token context from 20k resident items reads only the items it
needs, not the whole set. Ties are always broken the same way, so the output is
deterministic for the same state.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping

from sortedcontainers import SortedKeyList

from ..errors import UnknownStrategyError
from .eviction import WorkingItem

__all__ = ["STRATEGIES", "balanced_score", "order_items", "recency_key"]

STRATEGIES = ("balanced", "important", "recent")


def recency_key(item: WorkingItem) -> tuple[float, int]:
    """Ascending key of the recency indexes: oldest access first."""
    return (item.last_accessed, item.seq)


def balanced_score(item: WorkingItem, now: float) -> float:
    """``importance × 1 / (1 + age in hours)``, age measured from the last access."""
    age_hours = max(0.0, now - item.last_accessed) / 3600.0
    return item.importance * (1.0 / (1.0 + age_hours))


def check_strategy(strategy: str) -> str:
    """Return ``strategy`` if known, else raise :class:`UnknownStrategyError`."""
    if strategy not in STRATEGIES:
        raise UnknownStrategyError(
            f"unknown context strategy {strategy!r}; use one of {', '.join(STRATEGIES)}"
        )
    return strategy


def order_items(
    strategy: str,
    *,
    by_recency: SortedKeyList,
    by_importance: Mapping[float, SortedKeyList],
    now: float,
) -> Iterator[WorkingItem]:
    """Yield resident items in the order ``strategy`` puts them into a context.

    ``by_recency`` holds every item ordered by :func:`recency_key`; ``by_importance``
    maps each distinct importance to its items ordered the same way.
    """
    check_strategy(strategy)
    if strategy == "recent":
        yield from reversed(by_recency)
    elif strategy == "important":
        for importance in sorted(by_importance, reverse=True):
            yield from reversed(by_importance[importance])
    else:
        yield from _balanced(by_importance, now)


def _balanced(by_importance: Mapping[float, SortedKeyList], now: float) -> Iterator[WorkingItem]:
    # Within one importance level the most recently accessed item always scores highest,
    # so a k-way merge over the levels' newest items yields the global order lazily.
    heap: list[tuple[float, float, int, float, int]] = []
    for importance, items in by_importance.items():
        if items:
            head = items[-1]
            heap.append((-balanced_score(head, now), -head.last_accessed, -head.seq,
                         importance, len(items) - 1))
    heapq.heapify(heap)
    while heap:
        _, _, _, importance, index = heapq.heappop(heap)
        items = by_importance[importance]
        yield items[index]
        if index > 0:
            nxt = items[index - 1]
            heapq.heappush(heap, (-balanced_score(nxt, now), -nxt.last_accessed, -nxt.seq,
                                  importance, index - 1))
