"""``create_context(strategy="tiered")``: hot memories first, then digests of older periods.

Hot is today's and yesterday's memories (newest first) and working memory, within
:data:`HOT_SHARE` of the budget while digests wait. Then the scope's digests, each labelled
with its period, newest first: days of this and last week (a third of the room at most),
weeks before the oldest day shown (half of what is left), months before the oldest week
shown, so no period is told twice; a digest too long for its room gives its first
sentences. What the digests leave goes back to the hot memories; every piece is counted by
the instance's token counter. See docs/concepts.md ("Tiers over time").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from .consolidation import period_of, split_sentences
from .errors import UnknownStrategyError
from .models import Memory
from .recall.tiered import digest_info, digest_span, is_digest, scope_digests
from .store import LongTermStore, SearchFilters
from .working.context import SEPARATOR, STRATEGIES

__all__ = ["CONTEXT_STRATEGIES", "HOT_SHARE", "check_context_strategy", "hot_memories",
           "hot_since", "older_digests", "tiered_fit"]

#: ``create_context``'s strategies: working memory's, and ``tiered``.
CONTEXT_STRATEGIES = (*STRATEGIES, "tiered")

#: The share of the budget hot memories may take before the digests have theirs.
HOT_SHARE = 0.25
#: How many of today's and yesterday's memories are read at most.
MAX_HOT = 500


def check_context_strategy(strategy: str) -> str:
    """``strategy`` if ``create_context`` knows it, else :class:`UnknownStrategyError`."""
    if strategy not in CONTEXT_STRATEGIES:
        raise UnknownStrategyError(f"unknown context strategy {strategy!r}; use one of "
                                   f"{', '.join(CONTEXT_STRATEGIES)}")
    return strategy


def hot_since(now: datetime) -> datetime:
    """The start of yesterday in the clock's zone: what is newer is hot."""
    return (now - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)


def label(memory: Memory) -> str:
    """A digest's text behind its period: ``[week 2026-W47] ...``."""
    info = digest_info(memory) or {}
    return f"[{info.get('kind', 'digest')} {info.get('label', '')}] {memory.content}"


def hot_memories(store: LongTermStore, now: datetime, tags: tuple[str, ...],
                 resident: Sequence[Memory]) -> list[Memory]:
    """Today's and yesterday's memories of the scope, newest first, then working memory."""
    recent = store.list_memories(SearchFilters(start=hot_since(now), tags=tags),
                                 order="created_at", descending=True, limit=MAX_HOT)
    return [m for m in [*recent, *resident] if not is_digest(m)]


def older_digests(store: LongTermStore, now: datetime, tags: tuple[str, ...]
                  ) -> tuple[list[Memory], list[Memory], list[Memory]]:
    """The scope's day, week and month digests that end before yesterday, newest first;
    the days only those of this and last week."""
    edge = hot_since(now)
    first_day = period_of(edge - timedelta(days=7), "week", period_of(now, "day").tz).start

    def before(kind: str) -> list[Memory]:
        return [m for m in scope_digests(store, tags, kind)
                if (span := digest_span(m)) is not None and span[1] <= edge]

    days = [m for m in before("day") if (digest_span(m) or (edge, edge))[0] >= first_day]
    return days, before("week"), before("month")


class _Budget:
    """Pieces taken in order while their counted tokens fit; ``used`` counts them."""

    def __init__(self, budget: int, count: Callable[[str], int]) -> None:
        self.left, self._count = budget, count
        self._separator = count(SEPARATOR)
        self.taken: set[str] = set()

    def take(self, memory: Memory, text: str, room: int | None = None) -> int:
        """Take ``text`` if it fits ``room`` (default: what is left); its cost, or 0."""
        cost = self._count(text) + (self._separator if self.taken else 0)
        if memory.key in self.taken or cost > min(self.left, self.left if room is None
                                                 else room):
            return 0
        self.left -= cost
        self.taken.add(memory.key)
        return cost

    def shortened(self, memory: Memory, room: int) -> str | None:
        """A digest's label and as much of its text as fits ``room``: whole sentences, and
        the first words of the next one, ending ``…``; None when not even a word fits."""
        head = label(memory)[: -len(memory.content) or None]
        kept: list[str] = []

        def fits(words: list[str]) -> bool:
            return self._count(head + " ".join(words) + " …") + self._separator <= room

        for sentence in split_sentences(memory.content):
            if fits([*kept, sentence]):
                kept.append(sentence)
                continue
            words, low, high = sentence.split(), 0, len(sentence.split())
            while low < high:  # the most words that fit, by halving
                mid = (low + high + 1) // 2
                low, high = (mid, high) if fits([*kept, " ".join(words[:mid])]) else (low, mid - 1)
            take = low
            if take:
                kept.append(" ".join(words[:take]))
            break
        return head + " ".join(kept) + " …" if kept else None


def _digests(budget: _Budget, days: list[Memory], weeks: list[Memory],
             months: list[Memory], edge: datetime) -> list[tuple[Memory, str]]:
    """Days newest first (a third of the room at most), then the weeks of the month holding
    the oldest day taken, before it (half of what is left), then the months before the
    oldest week taken; a digest too long for its room gives its first sentences."""
    out: list[tuple[Memory, str]] = []
    for level, share in ((days, 3), (weeks, 2), (months, 1)):
        room = budget.left // share
        if level is weeks:
            tz = (digest_info(weeks[0]) or {}).get("tz", "UTC") if weeks else "UTC"
            month_start = period_of(edge - timedelta(seconds=1), "month", tz).start
        for m in level:
            span = digest_span(m)
            if span is None or span[1] > edge or (level is weeks and span[0] < month_start):
                continue
            text: str | None = label(m)
            spent = budget.take(m, label(m), room)
            if not spent:
                text = budget.shortened(m, min(room, budget.left))
                spent = budget.take(m, text, room) if text is not None else 0
            if not spent or text is None:
                break
            room -= spent
            out.append((m, text))
            edge = span[0]
    return out


def tiered_fit(lead: Sequence[Memory], hot: Sequence[Memory],
               digests: tuple[list[Memory], list[Memory], list[Memory]], budget: int,
               count: Callable[[str], int], now: datetime) -> tuple[list[Memory], str, int]:
    """The memories, text and token count of a tiered context (module doc): ``lead``
    (summaries, recalled memories) and ``hot`` first, then the labelled digests."""
    fitting = _Budget(budget, count)
    room = int(budget * HOT_SHARE)
    first = []
    for m in [*lead, *hot]:
        spent = fitting.take(m, m.content, room)
        if spent:
            first.append(m)
            room -= spent
    told = _digests(fitting, *digests, edge=hot_since(now))
    more = [m for m in [*lead, *hot] if m.key not in fitting.taken
            and fitting.take(m, m.content)]
    chosen = [*first, *more]
    hot_order: dict[str, int] = {}
    for n, m in enumerate([*lead, *hot]):
        hot_order.setdefault(m.key, n)
    chosen.sort(key=lambda m: hot_order[m.key])
    pieces = [m.content for m in chosen] + [text for _, text in told]
    text = SEPARATOR.join(pieces)
    tokens = count(text) if text else 0
    while pieces and tokens > budget:  # token merges at the seams: drop from the end
        pieces.pop()
        (told if told else chosen).pop()
        text = SEPARATOR.join(pieces)
        tokens = count(text) if text else 0
    return [*chosen, *(m for m, _ in told)], text, tokens
