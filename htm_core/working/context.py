"""Context assembly strategies: which resident items go into the prompt, in what order.

``recent`` (most recently accessed first), ``important`` (highest importance first) and
``balanced`` (:func:`balanced_score`: importance × 1 / (1 + hours since the last access)),
each a lazy, deterministic ordering over indexes working memory keeps up to date, so a
context reads only the items it needs. :func:`fit` is the last step of
``HTM.create_context``: it takes the candidates (summaries, recalled memories, then resident
ones in strategy order) while they fit the budget. See docs/concepts.md ("Context
strategies") and docs/architecture.md ("The working memory").
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from ..errors import UnknownStrategyError
from ..models import Memory
from .eviction import WorkingItem

__all__ = ["SEPARATOR", "STRATEGIES", "RecencyEntry", "balanced_score", "fit", "live_entries",
           "order_items", "recency_entry", "recency_key"]

STRATEGIES = ("balanced", "important", "recent")

#: What separates items in an assembled context's text.
SEPARATOR = "\n\n"

#: What the recency indexes hold: ``[last_accessed, access_seq, item]``, or ``[last_accessed,
#: access_seq, None]`` once dead (its item removed or re-keyed). ``(last_accessed, access_seq)``
#: is unique among all entries, dead or live, so comparisons never reach the item and run in C.
RecencyEntry = list[Any]

#: The item of an entry, None when the entry is dead; items are always true.
_item = itemgetter(2)


def recency_key(item: WorkingItem) -> tuple[float, int]:
    """Ascending key of the recency indexes: oldest access first."""
    return (item.last_accessed, item.access_seq)


def recency_entry(item: WorkingItem) -> RecencyEntry:
    """The entry that stands for ``item`` in a recency index."""
    return [item.last_accessed, item.access_seq, item]


def live_entries(entries: Sequence[RecencyEntry]) -> list[RecencyEntry]:
    """The live entries of a recency index, in its order."""
    return list(filter(_item, entries))


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
    by_recency: Sequence[RecencyEntry],
    by_importance: Mapping[float, Sequence[RecencyEntry]],
    now: float,
) -> Iterator[WorkingItem]:
    """Yield resident items in the order ``strategy`` puts them into a context.

    ``by_recency`` holds a :data:`RecencyEntry` for every item, in ascending order;
    ``by_importance`` maps each distinct importance to its items' entries, ordered the
    same way. Both may hold dead entries, which are skipped.
    """
    check_strategy(strategy)
    if strategy == "recent":
        return filter(None, map(_item, reversed(by_recency)))
    if strategy == "important":
        return chain.from_iterable(
            filter(None, map(_item, reversed(by_importance[importance])))
            for importance in sorted(by_importance, reverse=True)
        )
    return _balanced(by_importance, now)


def _balanced(by_importance: Mapping[float, Sequence[RecencyEntry]], now: float
              ) -> Iterator[WorkingItem]:
    # Within one importance level the most recently accessed item always scores highest,
    # so a k-way merge over the levels' newest items yields the global order lazily.
    # No item scores above its importance, so a level joins the merge only once the best
    # remaining score drops to its importance: a context of a few hundred items from a
    # large working memory touches only the levels that can contribute.
    # Heap entries are (-score, -last_accessed, -seq, importance, level iterator, item);
    # seq is unique, so comparisons stop before the iterator.
    levels = sorted(by_importance, reverse=True)
    heap: list[tuple[float, float, int, float, Iterator[RecencyEntry], WorkingItem]] = []
    push, replace, pop = heapq.heappush, heapq.heapreplace, heapq.heappop
    level: Iterator[RecencyEntry]
    waiting, count = 0, len(levels)
    while True:
        while waiting < count and (not heap or levels[waiting] >= -heap[0][0]):
            importance = levels[waiting]
            waiting += 1
            level = filter(_item, reversed(by_importance[importance]))
            first = next(level, None)
            if first is None:
                continue
            la, seq, item = first
            age = now - la
            score = importance * (1.0 / (1.0 + (age if age > 0.0 else 0.0) / 3600.0))
            push(heap, (-score, -la, -seq, importance, level, item))
        if not heap:
            return
        _, _, _, importance, level, item = heap[0]
        yield item
        nxt = next(level, None)
        if nxt is None:
            pop(heap)
        else:
            la, seq, item = nxt
            age = now - la
            score = importance * (1.0 / (1.0 + (age if age > 0.0 else 0.0) / 3600.0))
            replace(heap, (-score, -la, -seq, importance, level, item))


def fit(candidates: Sequence[Memory], budget: int, *, count: Callable[[str], int],
        separator_tokens: int) -> tuple[list[Memory], str, int]:
    """Take candidates in order (each key once) while their stored token counts fit,
    then recount the joined text with ``count`` and drop from the end until it fits
    (separators and token merges can make the text a little longer than the sum).

    Returns the chosen memories, their joined text and its token count.
    """
    chosen: list[Memory] = []
    seen: set[str] = set()
    used = 0
    for memory in candidates:
        cost = memory.token_count + (separator_tokens if chosen else 0)
        if memory.key not in seen and used + cost <= budget:
            chosen.append(memory)
            seen.add(memory.key)
            used += cost
    text = SEPARATOR.join(m.content for m in chosen)
    tokens = count(text) if text else 0
    while chosen and tokens > budget:
        chosen.pop()
        text = SEPARATOR.join(m.content for m in chosen)
        tokens = count(text) if text else 0
    return chosen, text, tokens
