"""The working memory: the hot, token-budgeted tier that is always ready for a prompt."""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Iterator

from sortedcontainers import SortedList

from ..clock import Clock, local_now, to_timestamp
from ..errors import MemoryTooLargeError
from ..models import Context
from ..validation import (
    check_content,
    check_importance,
    check_key,
    check_margin,
    check_max_tokens,
    check_tokens,
)
from .context import RecencyEntry, check_strategy, order_items, recency_entry
from .eviction import EvictionPolicy, SortKey, WorkingItem, get_policy

__all__ = ["DEFAULT_SAFETY_MARGIN", "SEPARATOR", "WorkingMemory"]

DEFAULT_SAFETY_MARGIN = 0.10
#: What separates items in an assembled context's text.
SEPARATOR = "\n\n"


class WorkingMemory:
    """A token-budgeted set of items that never exceeds its budget.

    Usable on its own, without any store::

        >>> wm = WorkingMemory(max_tokens=100)
        >>> wm.add("a", "Alice likes tea", tokens=60, importance=2.0)
        []
        >>> [item.key for item in wm.add("b", "Bob likes coffee", tokens=60)]
        ['a']

    The new item always enters; to make room, items leave in the order of the eviction
    ``policy`` (see :mod:`htm_core.working.eviction`), greedily: eviction stops as soon
    as the new item fits. Evicted items are returned, once each. An item larger than the
    whole budget is refused with :class:`~htm_core.errors.MemoryTooLargeError` and the
    memory is left as it was. Every method is thread-safe.

    Args:
        max_tokens: the budget; the sum of resident items' tokens never exceeds it.
        policy: ``"hybrid"`` (default), ``"lru"``, ``"importance"``, ``"frequency"`` or an
            :class:`~htm_core.working.eviction.EvictionPolicy`.
        clock: returns the current aware ``datetime``; injectable so tests need no sleeps.
        safety_margin: fraction of ``max_tokens`` that :meth:`assemble` leaves free.
    """

    def __init__(
        self,
        max_tokens: int = 128_000,
        policy: str | EvictionPolicy = "hybrid",
        *,
        clock: Clock | None = None,
        safety_margin: float = DEFAULT_SAFETY_MARGIN,
    ) -> None:
        self._max_tokens = check_max_tokens(max_tokens)
        self._policy = get_policy(policy)
        self._clock: Clock = clock or local_now
        self._margin = check_margin(safety_margin)
        self._lock = threading.RLock()
        self._items: dict[str, WorkingItem] = {}
        self._tokens = 0
        self._seq = 0
        self._evictions = 0
        # Eviction order is a binary heap with lazy deletion: an entry is live while it is
        # the one recorded for its key in ``_entries``; stale entries (removed, replaced or
        # re-keyed items) are dropped when they reach the top, and the heap is rebuilt when
        # they outnumber live ones. Recency indexes are sorted lists of plain tuples so
        # every comparison runs in C. ``_size_counts`` with a lazy min-heap gives the
        # smallest resident token count in O(1).
        self._heap: list[_HeapEntry] = []
        self._entries: dict[str, _HeapEntry] = {}
        self._by_recency: SortedList = SortedList()
        self._by_importance: dict[float, SortedList] = {}
        self._size_counts: dict[int, int] = {}
        self._size_heap: list[int] = []

    # -- inspection -------------------------------------------------------------------

    @property
    def max_tokens(self) -> int:
        """The token budget."""
        return self._max_tokens

    @property
    def tokens(self) -> int:
        """Tokens currently resident (never more than :attr:`max_tokens`)."""
        return self._tokens

    @property
    def policy(self) -> str:
        """Name of the eviction policy."""
        return self._policy.name

    @property
    def safety_margin(self) -> float:
        """Fraction of a context budget that :meth:`assemble` leaves free."""
        return self._margin

    @property
    def evictions(self) -> int:
        """How many items have been evicted since this working memory was made."""
        return self._evictions

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def keys(self) -> list[str]:
        """Resident keys, in the order they would be evicted (first to go first)."""
        with self._lock:
            return [item.key for item in self._eviction_order()]

    def items(self) -> list[WorkingItem]:
        """A snapshot of resident items, in eviction order."""
        with self._lock:
            return self._eviction_order()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def peek(self, key: str) -> WorkingItem | None:
        """The item under ``key`` without counting an access, or None."""
        return self._items.get(key)

    # -- changes ----------------------------------------------------------------------

    def add(
        self,
        key: str,
        content: str,
        *,
        tokens: int,
        importance: float = 1.0,
        created_at: float | None = None,
        last_accessed: float | None = None,
        access_count: int = 0,
    ) -> list[WorkingItem]:
        """Put an item in, evicting by policy until it fits; return what was evicted.

        Adding a key that is already resident replaces that item (and counts as an
        access). ``created_at`` / ``last_accessed`` are POSIX timestamps; they default
        to now.
        """
        key = check_key(key)
        content = check_content(content)
        tokens = check_tokens(tokens)
        importance = check_importance(importance)
        if tokens > self._max_tokens:
            raise MemoryTooLargeError(
                f"item {key!r} has {tokens} tokens, more than the whole working-memory "
                f"budget of {self._max_tokens}; it can live in long-term memory only"
            )
        with self._lock:
            now = self._now()
            old = self._items.get(key)
            if old is not None:
                self._unlink(old)
                access_count = max(access_count, old.access_count + 1)
                created_at = old.created_at if created_at is None else created_at
            self._seq += 1
            item = WorkingItem(
                key=key,
                content=content,
                token_count=tokens,
                importance=importance,
                created_at=now if created_at is None else float(created_at),
                added_at=now,
                last_accessed=now if last_accessed is None else float(last_accessed),
                access_count=access_count,
                seq=self._seq,
            )
            evicted: list[WorkingItem] = []
            heap, entries = self._heap, self._entries
            while self._tokens + tokens > self._max_tokens:
                entry = heapq.heappop(heap)  # the hot path: the first live entry is the victim
                victim = entry[2]
                if entries.get(victim.key) is entry:
                    self._unlink(victim)
                    evicted.append(victim)
            self._evictions += len(evicted)
            self._link(item)
            return evicted

    def get(self, key: str) -> WorkingItem | None:
        """The item under ``key`` (None if absent); counts as an access."""
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._touch(item, self._now())
            return item

    def touch(self, key: str, *, at: float | None = None) -> bool:
        """Record an access to ``key`` if resident; return whether it was."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return False
            self._touch(item, self._now() if at is None else at)
            return True

    def remove(self, key: str) -> WorkingItem | None:
        """Take ``key`` out (no-op when absent); return the removed item."""
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._unlink(item)
            return item

    def clear(self) -> list[WorkingItem]:
        """Empty the working memory; return what was resident."""
        with self._lock:
            gone = self._eviction_order()
            self._items.clear()
            self._tokens = 0
            self._heap.clear()
            self._entries.clear()
            self._by_recency.clear()
            self._by_importance.clear()
            self._size_counts.clear()
            self._size_heap.clear()
            return gone

    # -- assembly ---------------------------------------------------------------------

    def budget_for(self, max_tokens: int | None = None) -> int:
        """The tokens an assembly may use: ``max_tokens`` less the safety margin."""
        limit = self._max_tokens if max_tokens is None else check_max_tokens(max_tokens)
        return max(0, math.floor(limit * (1.0 - self._margin)))

    def select(self, strategy: str = "balanced", max_tokens: int | None = None) -> list[WorkingItem]:
        """The items a context of ``strategy`` holds, in order, within the budget.

        Items are taken in the strategy's order; one that does not fit the tokens left is
        skipped and smaller ones after it may still go in.
        """
        check_strategy(strategy)
        budget = self.budget_for(max_tokens)
        with self._lock:
            chosen: list[WorkingItem] = []
            left = budget
            smallest = self._smallest()
            for item in order_items(
                strategy,
                by_recency=self._by_recency,
                by_importance=self._by_importance,
                now=self._now(),
            ):
                if left < smallest:
                    break
                if item.token_count <= left:
                    chosen.append(item)
                    left -= item.token_count
            return chosen

    def assemble(self, strategy: str = "balanced", max_tokens: int | None = None) -> Context:
        """Build a :class:`~htm_core.models.Context` of resident items for a prompt.

        The text is the items' content joined by a blank line, in strategy order;
        ``tokens`` is the sum of the items' token counts, which stays within
        ``max_tokens`` less the safety margin. Deterministic for the same state.
        """
        limit = self._max_tokens if max_tokens is None else check_max_tokens(max_tokens)
        chosen = self.select(strategy, limit)
        return Context(
            text=SEPARATOR.join(item.content for item in chosen),
            memories=tuple(chosen),
            tokens=sum(item.token_count for item in chosen),
            strategy=strategy,
            max_tokens=limit,
            budget=self.budget_for(limit),
        )

    # -- internals --------------------------------------------------------------------

    def _now(self) -> float:
        return to_timestamp(self._clock())

    def _eviction_order(self) -> list[WorkingItem]:
        return [entry[2] for entry in sorted(self._entries.values())]

    def _push(self, item: WorkingItem) -> None:
        entry: _HeapEntry = (self._policy.sort_key(item), item.seq, item)
        self._entries[item.key] = entry
        heapq.heappush(self._heap, entry)
        if len(self._heap) > 2 * len(self._entries) + 1024:
            self._heap = list(self._entries.values())
            heapq.heapify(self._heap)

    def _smallest(self) -> int:
        counts = self._size_counts
        heap = self._size_heap
        while heap and heap[0] not in counts:
            heapq.heappop(heap)
        return heap[0] if heap else 0

    def _link(self, item: WorkingItem) -> None:
        self._items[item.key] = item
        self._tokens += item.token_count
        self._push(item)
        entry: RecencyEntry = (item.last_accessed, item.seq, item)
        self._by_recency.add(entry)
        level = self._by_importance.get(item.importance)
        if level is None:
            level = self._by_importance[item.importance] = SortedList()
        level.add(entry)
        size = item.token_count
        count = self._size_counts.get(size)
        if count is None:
            self._size_counts[size] = 1
            heapq.heappush(self._size_heap, size)
        else:
            self._size_counts[size] = count + 1

    def _unlink(self, item: WorkingItem) -> None:
        del self._items[item.key]
        del self._entries[item.key]
        self._tokens -= item.token_count
        entry: RecencyEntry = (item.last_accessed, item.seq, item)
        self._by_recency.remove(entry)
        level = self._by_importance[item.importance]
        level.remove(entry)
        if not level:
            del self._by_importance[item.importance]
        size = item.token_count
        count = self._size_counts[size]
        if count == 1:
            del self._size_counts[size]
        else:
            self._size_counts[size] = count - 1

    def _touch(self, item: WorkingItem, at: float) -> None:
        # Re-key the item in every index whose order depends on access.
        old: RecencyEntry = recency_entry(item)
        self._by_recency.remove(old)
        level = self._by_importance[item.importance]
        level.remove(old)
        item.last_accessed = max(item.last_accessed, at)
        item.access_count += 1
        if self._policy.tracks_access:
            self._push(item)
        new = recency_entry(item)
        self._by_recency.add(new)
        level.add(new)


_HeapEntry = tuple[SortKey, int, WorkingItem]
