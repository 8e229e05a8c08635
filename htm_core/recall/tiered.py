"""Tiered recall: down the digests, month -> week -> day, to the memories beneath.

:func:`tiered_search` scores the scope's month digests, opens the best few, scores their
week digests, opens the best few, scores their day digests and ranks the memories of the
best days (their ``sources``); each result carries its ``path`` (the month, week and day
digest keys). Memories newer than the newest day digest are searched by hybrid recall, so
the tiers never hide a recent memory. Digests and memories are scored alike on htm's 0..1
relevance scale; a time phrase keeps the periods it overlaps. Cost: every month digest,
then a fixed fan-out of weeks and days, plus the memories of the days opened; never the
whole store. docs/concepts.md ("Tiers over time") draws the tree and states the cost.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import numpy as np

from ..models import Memory
from ..querytime import QueryTime, query_timeframe
from ..scoring import evidence_of
from ..store.base import LongTermStore, SearchFilters
from ..tags import tag_filter
from .config import RetrievalConfig
from .ranked import RankedId

__all__ = ["DIGEST_TAG", "TieredOptions", "TieredResult", "digest_info", "digest_span",
           "is_digest", "once", "scope_digests", "tiered_search", "week_of"]

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_MONTH = r"(" + "|".join(m[:3] + r"(?:" + m[3:] + r")?" for m in _MONTHS) + r")\.?"
_WEEK_OF = re.compile(
    r"\b(?:in |during )?(?:the )?week of (?:(?:mon(?:day)?|the) )?(?:(\d{1,2})(?:st|nd|rd|th)?"
    r"(?: of)? " + _MONTH + r"|" + _MONTH + r" (\d{1,2})(?:st|nd|rd|th)?)(?:,? (\d{4}))?\b",
    re.IGNORECASE)

#: The tag every digest carries (docs/consolidation.md).
DIGEST_TAG = "digest"
#: How many digests of one scope and kind are read at most.
_MAX_LISTED = 10_000


@dataclass(frozen=True, kw_only=True)
class TieredOptions:
    """How wide tiered recall looks: the best ``months`` month digests are opened, then
    the best ``weeks`` of their weeks, then the best ``days`` of those weeks' days (more
    days, up to ``max_days``, while the memories found are fewer than the limit)."""

    months: int = 2
    weeks: int = 3
    days: int = 4
    max_days: int = 12


@dataclass
class TieredResult:
    """What :func:`tiered_search` found and what it read on the way.

    ``ranked`` best first; ``paths`` maps a memory id to its (month, week, day) digest
    keys (absent: found by the hybrid search of the unconsolidated memories);
    ``scored`` the digests scored, as (key, relevance), by level; ``opened`` the day
    digests whose memories were ranked; ``turns`` how many memories were scored under
    them; ``since`` where the unconsolidated part began (None: no day digest, the whole
    range was searched by hybrid recall)."""

    ranked: list[RankedId] = field(default_factory=list)
    paths: dict[int, tuple[str, ...]] = field(default_factory=dict)
    scored: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    opened: list[str] = field(default_factory=list)
    turns: int = 0
    since: datetime | None = None


def week_of(query: str, now: datetime) -> QueryTime | None:
    """"the week of 3 March" (or "March 3rd", with a year or the latest such day before
    ``now``): the ISO week holding that day, in ``now``'s zone; None when the query does
    not name one.

    >>> week_of("What happened in the week of 3 March?",
    ...         datetime(2025, 6, 3, tzinfo=timezone.utc)).start.date().isoformat()
    '2025-03-03'
    """
    found = _WEEK_OF.search(query)
    if found is None:
        return None
    day_text, month_text = found.group(1) or found.group(4), found.group(2) or found.group(3)
    month = next(n for n, m in enumerate(_MONTHS, start=1) if m.startswith(month_text[:3].lower()))
    year = int(found.group(5)) if found.group(5) else now.year
    try:
        day = date(year, month, int(day_text))
        if not found.group(5) and day > now.date():
            day = date(year - 1, month, int(day_text))
    except ValueError:
        return None
    monday = datetime.combine(day - timedelta(days=day.weekday()), time(), tzinfo=now.tzinfo)
    return QueryTime(start=monday, end=monday + timedelta(days=7), phrase=found.group(0))


def once(make: Callable[[], Sequence[float]]) -> Callable[[], Sequence[float]]:
    """``make`` called at most once: the query vector, shared by every step."""
    got: list[Sequence[float]] = []

    def vector() -> Sequence[float]:
        if not got:
            got.append(make())
        return got[0]

    return vector


def digest_info(memory: Memory) -> dict[str, Any] | None:
    """A digest's ``metadata["digest"]`` (its period, kind, sources...), or None for a
    memory that is not a digest."""
    info = memory.metadata.get("digest") if isinstance(memory.metadata, dict) else None
    return info if isinstance(info, dict) and "kind" in info else None


def is_digest(memory: Memory) -> bool:
    """Whether ``memory`` is a digest (:func:`digest_info` is not None)."""
    return digest_info(memory) is not None


def _utc(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def digest_span(memory: Memory) -> tuple[datetime, datetime] | None:
    """A digest's period as (start, end), aware UTC datetimes; None for another memory."""
    return _span(memory)


def _span(memory: Memory) -> tuple[datetime, datetime] | None:
    info = digest_info(memory)
    start, end = (_utc(info.get("start")), _utc(info.get("end"))) if info else (None, None)
    return (start, end) if start is not None and end is not None else None


def _overlaps(memory: Memory, start: datetime | None, end: datetime | None) -> bool:
    span = _span(memory)
    if span is None:
        return False
    return (start is None or span[1] > start) and (end is None or span[0] < end)


def _cosine(a: Sequence[float] | None, b: Sequence[float] | None) -> float | None:
    if a is None or b is None or len(a) == 0 or len(a) != len(b):
        return None
    u, v = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norm = float(np.linalg.norm(u) * np.linalg.norm(v))
    return float(u @ v) / norm if norm else None


def _source_ids(memory: Memory) -> list[int]:
    info = digest_info(memory) or {}
    return [s["id"] for s in info.get("sources", ())
            if isinstance(s, dict) and isinstance(s.get("id"), int)]


class _Scorer:
    """Scores texts against the query (without its time phrase) on the 0..1 scale."""

    def __init__(self, text: str, vector: Callable[[], Sequence[float]]) -> None:
        self.text = text
        self._vector = vector

    def cosine(self, memory: Memory) -> float | None:
        return _cosine(self._vector(), memory.embedding)

    def __call__(self, memory: Memory) -> float:
        return evidence_of(self.text, memory.content, self.cosine(memory))


def scope_digests(store: LongTermStore, tags: tuple[str, ...], kind: str, *,
                  newest: bool = False) -> list[Memory]:
    """The digests of ``kind`` of the scope ``tags`` (keys ``<tag>:digest:<kind>:``; the
    robot's, ``digest:<kind>:``, when no tags), newest first (only the newest with
    ``newest``)."""
    keep = tag_filter(tags) if tags else None
    out: list[Memory] = []
    for prefix in [f"{t}:digest:" for t in tags] if tags else ["digest:"]:
        out += store.list_memories(SearchFilters(), key_prefix=f"{prefix}{kind}:",
                                   order="created_at", descending=True,
                                   limit=1 if newest else _MAX_LISTED)
    return [m for m in out if (keep is None or keep(m.tags))
            and (digest_info(m) or {}).get("kind") == kind]


def _best(candidates: Iterable[Memory], k: int, score: _Scorer,
          window: tuple[datetime | None, datetime | None],
          asked: tuple[datetime, datetime] | None, scored: list[tuple[str, float]]
          ) -> list[tuple[Memory, float]]:
    """The ``k`` best of ``candidates`` inside ``window`` (those overlapping the query's
    own time, ``asked``, when some do), best first, newest first on a tie."""
    inside = [m for m in candidates if _overlaps(m, *window)]
    if asked is not None:
        inside = [m for m in inside if _overlaps(m, *asked)] or inside
    ranked = sorted(((m, score(m)) for m in inside),
                    key=lambda pair: (-pair[1], -pair[0].created_at.timestamp()))
    scored.extend((m.key, s) for m, s in ranked)
    return ranked[:k]


def _down(store: LongTermStore, parents: list[tuple[Memory, float]],
          path_of: dict[int, tuple[str, ...]]) -> list[Memory]:
    """The digests ``parents`` were made from; ``path_of`` gets each one's path (its
    parent's path and its own key)."""
    up: dict[int, tuple[str, ...]] = {}
    for parent, _ in parents:
        for mid in _source_ids(parent):
            up.setdefault(mid, path_of.get(parent.id, (parent.key,)))
    found = [m for m in store.get_many(sorted(up), include_embedding=True) if is_digest(m)]
    for m in found:
        path_of[m.id] = (*up[m.id], m.key)
    return found


def tiered_search(store: LongTermStore, *, query: str, query_vector: Callable[[], Sequence[float]],
                  limit: int, filters: SearchFilters, config: RetrievalConfig,
                  now: datetime, hybrid: Callable[[SearchFilters], list[RankedId]],
                  options: TieredOptions | None = None) -> TieredResult:
    """Navigate the digests for ``query`` and rank the memories beneath the best days,
    with the unconsolidated memories ranked by ``hybrid(filters)``; see the module doc."""
    options = options or TieredOptions()
    asked = (week_of(query, now) or query_timeframe(query, now)) if config.time_boost else None
    score = _Scorer(query.replace(asked.phrase, " ") if asked else query, query_vector)
    window = (filters.start, filters.end)
    when = (asked.start, asked.end) if asked else None
    result = TieredResult(scored={"month": [], "week": [], "day": []})
    path_of: dict[int, tuple[str, ...]] = {}
    months = _with_vectors(store, scope_digests(store, filters.tags, "month"))
    best = _best(months, options.months, score, window, when, result.scored["month"])
    weeks = _down(store, best, path_of)
    best = _best(weeks, options.weeks, score, window, when, result.scored["week"])
    days = _down(store, best, path_of)
    best = _best(days, options.max_days, score, window, when, result.scored["day"])
    turns = _open_days(store, best, options, limit, filters, result, score)
    newest = scope_digests(store, filters.tags, "day", newest=True)
    span = _span(newest[0]) if newest else None
    result.since = span[1] if span else None
    found = [(m, s, day_score) for m, s, day_score, _ in turns]
    result.paths = {m.id: path_of.get(day.id, (day.key,)) for m, _, _, day in turns}
    if result.since is not None or not turns:
        ids = [r.id for r in _recent(filters, result.since, hybrid) if r.id not in result.paths]
        found += [(m, score(m), -1.0) for m in store.get_many(ids, include_embedding=True)
                  if not is_digest(m)]
    found.sort(key=lambda t: (-t[1], -t[2], -t[0].created_at.timestamp(), t[0].id))
    result.ranked = [RankedId(m.id, s, {"tiered" if m.id in result.paths else "recent": n},
                              score.cosine(m))
                     for n, (m, s, _) in enumerate(found[:limit], start=1)]
    return result


def _with_vectors(store: LongTermStore, memories: list[Memory]) -> list[Memory]:
    return store.get_many([m.id for m in memories], include_embedding=True)


def _open_days(store: LongTermStore, days: list[tuple[Memory, float]], options: TieredOptions,
               limit: int, filters: SearchFilters, result: TieredResult, score: _Scorer
               ) -> list[tuple[Memory, float, float, Memory]]:
    """The memories beneath the best days, scored: (memory, relevance, the day's
    relevance, day digest); days are opened best first, ``options.days`` of them and more
    (to ``options.max_days``) while fewer than ``limit`` memories were found."""
    keep = tag_filter(filters.tags) if filters.tags else None
    out: list[tuple[Memory, float, float, Memory]] = []
    for n, (day, day_score) in enumerate(days):
        if n >= options.days and len(out) >= limit:
            break
        result.opened.append(day.key)
        for m in store.get_many(_source_ids(day), include_embedding=True):
            if _passes(m, filters, keep):
                out.append((m, score(m), day_score, day))
    result.turns = len(out)
    return out


def _passes(memory: Memory, filters: SearchFilters,
            keep: Callable[[Iterable[str]], bool] | None) -> bool:
    """Whether a memory beneath a day passes the recall's filters (and is no digest)."""
    return not (is_digest(memory) or (filters.robot is not None and memory.robot != filters.robot)
                or (keep is not None and not keep(memory.tags))
                or not filters.admits(memory.kind, memory.source, memory.confidence)
                or (filters.start is not None and memory.created_at < filters.start)
                or (filters.end is not None and memory.created_at >= filters.end))


def _recent(filters: SearchFilters, since: datetime | None,
            hybrid: Callable[[SearchFilters], list[RankedId]]) -> list[RankedId]:
    """``hybrid`` over what came after ``since`` (everything in ``filters`` when None)."""
    if since is not None and filters.end is not None and filters.end <= since:
        return []
    start = since if filters.start is None or (since is not None and since > filters.start) \
        else filters.start
    return hybrid(replace(filters, start=start))
