"""The working memory: the hot, token-budgeted tier that is always ready for a prompt."""

from __future__ import annotations

import math
import threading
import time
from bisect import insort
from collections.abc import Callable, Iterable, Iterator
from heapq import heapify, heappop, heappush, heapreplace
from typing import Any

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
from .context import SEPARATOR, RecencyEntry, check_strategy, live_entries, order_items
from .eviction import (
    EvictionPolicy,
    FrequencyPolicy,
    HybridPolicy,
    ImportancePolicy,
    LRUPolicy,
    WorkingItem,
    get_policy,
)

__all__ = ["DEFAULT_SAFETY_MARGIN", "SEPARATOR", "WorkingMemory"]

DEFAULT_SAFETY_MARGIN = 0.10

#: Dead recency entries tolerated beyond the live ones before the indexes are compacted.
_DEAD_SLACK = 2048


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
        # The built-in policies' keys are tuples of one length, so heap entries can be flat
        # (fewer comparisons); any other key is kept whole as the entry's first element.
        self._flat = type(self._policy) in _FLAT_KEYS
        self._clock: Clock = clock or local_now
        # The default clock reads the system time; ``time.time`` reads the same clock
        # without building a datetime first.
        self._timestamp = time.time if self._clock is local_now else _timestamps(self._clock)
        self._margin = check_margin(safety_margin)
        self._lock = threading.RLock()
        self._items: dict[str, WorkingItem] = {}
        self._tokens = 0
        self._seq = 0
        self._evictions = 0
        # Eviction order is a binary heap of ``(*sort_key, seq, item)`` tuples with lazy
        # deletion: an entry is live while it is the one recorded for its key in
        # ``_entries``; stale entries (removed, replaced or re-keyed items) are dropped when
        # they reach the top, and the heap is rebuilt when they outnumber live ones.
        self._heap: list[_HeapEntry] = []
        self._entries: dict[str, _HeapEntry] = {}
        # Recency indexes (see :mod:`htm_core.working.context`): plain lists of
        # ``[last_accessed, seq, item]`` entries in ascending order, one over every item
        # and one per importance level, sharing each item's entry. Items usually arrive
        # newest, so an insertion is an append. A removed or re-keyed item's entry is
        # killed in place (its item set to None, which both lists see) rather than taken
        # out; readers skip dead entries, and the lists are compacted when dead entries
        # outnumber live ones, so removal costs O(1) amortised.
        self._recency: dict[str, RecencyEntry] = {}
        self._by_recency: list[RecencyEntry] = []
        self._by_importance: dict[float, list[RecencyEntry]] = {}
        self._dead = 0
        # ``_size_counts`` with a lazy min-heap gives the smallest resident token count.
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
        seq: int | None = None,
        access_seq: int | None = None,
    ) -> list[WorkingItem]:
        """Put an item in, evicting by policy until it fits; return what was evicted.

        Adding a key that is already resident replaces that item (and counts as an
        access). ``created_at`` / ``last_accessed`` are POSIX timestamps; they default
        to now. ``seq`` / ``access_seq`` (the item's entry and latest-access order) are
        for restoring a saved working memory: they must be unique among the resident
        items' numbers; by default the item is the newest entry and access.
        """
        # This is the hot path, so the helpers are inlined. A plain float importance in
        # range and a plain non-negative int token count are what the checks would return
        # unchanged; anything else goes through the checks.
        key = check_key(key)
        content = check_content(content)
        if type(tokens) is not int or tokens < 0:
            tokens = check_tokens(tokens)
        if type(importance) is not float or not 0.0 <= importance <= 10.0:
            importance = check_importance(importance)
        if tokens > self._max_tokens:
            raise self._too_large(key, tokens)
        with self._lock:
            return self._put(key, content, tokens, importance, created_at, last_accessed,
                             access_count, seq, access_seq)

    def add_checked(self, rows: Iterable[tuple[str, str, int, float, float, int]], *,
                    last_accessed: float | None = None
                    ) -> list[list[WorkingItem] | MemoryTooLargeError]:
        """:meth:`add` of each row ``(key, content, tokens, importance, created_at,
        access_count)`` in turn, for values already checked (memories the store holds),
        under one hold of the lock: per row, what it evicted, or the error :meth:`add`
        would raise for a row larger than the whole budget (that row is left out)."""
        out: list[list[WorkingItem] | MemoryTooLargeError] = []
        limit = self._max_tokens
        with self._lock:
            put = self._put
            for key, content, tokens, importance, created_at, access_count in rows:
                out.append(self._too_large(key, tokens) if tokens > limit else put(
                    key, content, tokens, importance, created_at, last_accessed, access_count,
                    None, None))
        return out

    def _too_large(self, key: str, tokens: int) -> MemoryTooLargeError:
        return MemoryTooLargeError(
            f"item {key!r} has {tokens} tokens, more than the whole working-memory "
            f"budget of {self._max_tokens}; it can live in long-term memory only")

    def _put(self, key: str, content: str, tokens: int, importance: float,
             created_at: float | None, last_accessed: float | None, access_count: int,
             seq: int | None, access_seq: int | None) -> list[WorkingItem]:
        """:meth:`add`'s work once the item is checked and known to fit the budget (call
        with the lock held)."""
        now = self._timestamp()
        old = self._items.get(key)
        if old is not None:
            self._unlink(old)
            access_count = max(access_count, old.access_count + 1)
            created_at = old.created_at if created_at is None else created_at
        seq, access_seq = self._numbers(seq, access_seq)
        item = _item(key, content, tokens, importance,
                     now if created_at is None else float(created_at), now,
                     now if last_accessed is None else float(last_accessed), access_count,
                     seq, access_seq)
        order = self._policy.sort_key(item)
        entry: _HeapEntry = (*order, seq, item) if self._flat else (order, seq, item)
        evicted = self._make_room(entry, tokens)
        self._entries[key] = entry
        self._items[key] = item
        self._tokens += tokens
        self._index(item)
        sizes = self._size_counts
        same = sizes.get(tokens)
        if same is None:
            sizes[tokens] = 1
            self._new_size(tokens)
        else:
            sizes[tokens] = same + 1
        return evicted

    def _numbers(self, seq: int | None, access_seq: int | None) -> tuple[int, int]:
        """An item's entry and access numbers: the ones saved with it, else the next."""
        if (seq is not None or access_seq is not None) and (
                self._dead or len(self._heap) != len(self._entries)):
            # Saved numbers may equal those of stale index entries (an item put back as
            # it was): drop the stale entries first so that no comparison ties.
            self._compact()
            self._rebuild_heap()
        if seq is None:
            self._seq = seq = self._seq + 1
        else:
            self._seq = max(self._seq, seq)
        if access_seq is None:
            access_seq = seq
        else:
            self._seq = max(self._seq, access_seq)
        return seq, access_seq

    def _make_room(self, entry: _HeapEntry, tokens: int) -> list[WorkingItem]:
        """Evict, first in the policy's order, until ``tokens`` more fit, and put
        ``entry`` on the heap (into the last victim's place); return the evicted items."""
        heap, entries, items = self._heap, self._entries, self._items
        evicted: list[WorkingItem] = []
        free = self._max_tokens - tokens
        resident = self._tokens
        if resident <= free:
            heappush(heap, entry)
            if len(heap) > 2 * len(entries) + 1024:
                self._rebuild_heap()
            return evicted
        recency, sizes = self._recency, self._size_counts
        while True:
            top = heap[0]  # the first live entry is the victim
            victim: WorkingItem = top[-1]
            gone = victim.key
            if entries.get(gone) is top:
                del items[gone]
                del entries[gone]
                recency.pop(gone)[2] = None
                size = victim.token_count
                resident -= size
                count = sizes[size]
                if count == 1:
                    del sizes[size]
                else:
                    sizes[size] = count - 1
                evicted.append(victim)
                if resident <= free:
                    heapreplace(heap, entry)  # the victim's place goes to the new item
                    break
            heappop(heap)
        self._tokens = resident
        self._evictions += len(evicted)
        self._dead += 2 * len(evicted)
        if self._dead > 2 * len(recency) + _DEAD_SLACK:
            self._compact()
        return evicted

    def get(self, key: str) -> WorkingItem | None:
        """The item under ``key`` (None if absent); counts as an access."""
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._touch(item, self._timestamp())
            return item

    def touch(self, key: str, *, at: float | None = None) -> bool:
        """Record an access to ``key`` if resident; return whether it was."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return False
            self._touch(item, self._timestamp() if at is None else at)
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
            self._recency.clear()
            self._by_recency.clear()
            self._by_importance.clear()
            self._dead = 0
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
                now=self._timestamp(),
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

    def _eviction_order(self) -> list[WorkingItem]:
        return [entry[-1] for entry in sorted(self._entries.values())]

    def _entry(self, item: WorkingItem) -> _HeapEntry:
        key = self._policy.sort_key(item)
        return (*key, item.seq, item) if self._flat else (key, item.seq, item)

    def _push(self, item: WorkingItem) -> None:
        entry = self._entry(item)
        self._entries[item.key] = entry
        heappush(self._heap, entry)
        if len(self._heap) > 2 * len(self._entries) + 1024:
            self._rebuild_heap()

    def _rebuild_heap(self) -> None:
        self._heap = list(self._entries.values())
        heapify(self._heap)

    def _smallest(self) -> int:
        counts = self._size_counts
        heap = self._size_heap
        while heap and heap[0] not in counts:
            heappop(heap)
        return heap[0] if heap else 0

    def _new_size(self, size: int) -> None:
        # A size that left and came back may still be in the lazy heap; rebuild it before
        # such duplicates can pile up.
        heappush(self._size_heap, size)
        if len(self._size_heap) > 2 * len(self._size_counts) + 64:
            self._size_heap = sorted(self._size_counts)

    def _index(self, item: WorkingItem) -> None:
        """Enter ``item`` into the recency indexes under its current ``last_accessed``."""
        entry: RecencyEntry = [item.last_accessed, item.access_seq, item]
        self._recency[item.key] = entry
        ordered = self._by_recency
        if ordered and entry < ordered[-1]:
            insort(ordered, entry)
        else:
            ordered.append(entry)
        level = self._by_importance.get(item.importance)
        if level is None:
            self._by_importance[item.importance] = [entry]
        elif entry < level[-1]:
            insort(level, entry)
        else:
            level.append(entry)

    def _kill(self, key: str) -> None:
        """Mark the recency entry of ``key`` dead; compact the indexes if enough are."""
        self._recency.pop(key)[2] = None
        self._dead += 2
        if self._dead > 2 * len(self._recency) + _DEAD_SLACK:
            self._compact()

    def _compact(self) -> None:
        self._by_recency = live_entries(self._by_recency)
        levels: dict[float, list[RecencyEntry]] = {}
        for importance, entries in self._by_importance.items():
            kept = live_entries(entries)
            if kept:
                levels[importance] = kept
        self._by_importance = levels
        self._dead = 0

    def _unlink(self, item: WorkingItem) -> None:
        key = item.key
        del self._items[key]
        del self._entries[key]
        self._tokens -= item.token_count
        self._kill(key)
        size = item.token_count
        count = self._size_counts[size]
        if count == 1:
            del self._size_counts[size]
        else:
            self._size_counts[size] = count - 1

    def _touch(self, item: WorkingItem, at: float) -> None:
        # Every access makes the item the most recent one, also when the clock has not
        # moved (a frozen or coarse clock): the recency order is (last_accessed,
        # access_seq), and access_seq is drawn fresh. A clock behind the item's last
        # access (another process's) never moves last_accessed back.
        item.access_count += 1
        if at > item.last_accessed:
            item.last_accessed = at
        self._seq = item.access_seq = self._seq + 1
        self._kill(item.key)
        self._index(item)
        if self._policy.tracks_access:
            self._push(item)


def _timestamps(clock: Clock) -> Callable[[], float]:
    """A function reading ``clock`` as POSIX seconds."""

    def now() -> float:
        when = clock()
        return when.timestamp() if when.tzinfo is not None else to_timestamp(when)

    return now


def _item(key: str, content: str, token_count: int, importance: float, created_at: float,
          added_at: float, last_accessed: float, access_count: int, seq: int,
          access_seq: int) -> WorkingItem:
    """``WorkingItem(key=key, ...)`` with an empty ``metadata``, set field by field: the
    dataclass's keyword-only ``__init__`` is about a sixth of an add (a test checks that
    both make the same item)."""
    item: WorkingItem = _new_item(WorkingItem)
    item.key = key
    item.content = content
    item.token_count = token_count
    item.importance = importance
    item.created_at = created_at
    item.added_at = added_at
    item.last_accessed = last_accessed
    item.access_count = access_count
    item.seq = seq
    item.access_seq = access_seq
    item.metadata = {}
    return item


_new_item = WorkingItem.__new__

_HeapEntry = tuple[Any, ...]
"""``(*policy.sort_key(item), item.seq, item)`` for the built-in policies, ``(sort_key, seq,
item)`` for others; ``seq`` is unique, so comparisons stop before the item."""

_FLAT_KEYS = frozenset({FrequencyPolicy, HybridPolicy, ImportancePolicy, LRUPolicy})
