"""Days, weeks and months in a user's time zone: the periods digests are made for.

A day is a calendar day of the zone; a week is an ISO week (Monday to Sunday); a month is
the ISO weeks whose Thursday falls in that calendar month, so every day is in exactly one
week and every week in exactly one month (ISO 8601 puts a week in the year of its
Thursday the same way). A month therefore starts on the Monday of its first week: in UTC,
``2026-11`` runs from Monday 2 November to Monday 30 November 2026. The rules, with
examples, are in docs/consolidation.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .._values import check_created_at
from ..errors import InvalidBudgetError, TimeframeError

__all__ = ["PERIOD_KINDS", "Period", "children", "parent", "parse_period", "period_of",
           "periods_between", "zone_of"]

#: The kinds of period, smallest first; each is made of the one before it.
PERIOD_KINDS = ("day", "week", "month")
#: :func:`periods_between` lists at most this many periods.
MAX_PERIODS = 100_000

_LABEL = {"day": re.compile(r"^(\d{4})-(\d{2})-(\d{2})$", re.ASCII),
          "week": re.compile(r"^(\d{4})-W(\d{2})$", re.ASCII),
          "month": re.compile(r"^(\d{4})-(\d{2})$", re.ASCII)}
_FIXED = re.compile(r"^UTC([+-])(\d{2}):(\d{2})$", re.ASCII)
_FORMS = "a day 2026-11-28, an ISO week 2026-W48 or a month 2026-11"
#: The names of UTC (and of GMT, the same rules): one zone, one name, one digest key.
_UTC_NAMES = frozenset({"UTC", "Z", "UCT", "UNIVERSAL", "ZULU", "GMT", "GMT0", "GMT+0", "GMT-0",
                        "GREENWICH", "ETC/UTC", "ETC/UCT", "ETC/UNIVERSAL", "ETC/ZULU", "ETC/GMT",
                        "ETC/GMT0", "ETC/GMT+0", "ETC/GMT-0", "ETC/GREENWICH"})


def zone_of(tz: tzinfo | str | None) -> tuple[str, tzinfo]:
    """``(name, tzinfo)`` of a time zone: an IANA name or ``ZoneInfo``, ``"UTC"`` or
    :data:`datetime.timezone.utc` (the default), or a fixed offset (a ``timezone`` or
    ``"UTC+05:30"``). Every name of UTC (``Etc/UTC``, ``utc``, ``Z``, ``GMT``, ...) is
    ``"UTC"``.

    >>> zone_of("Europe/Paris")[0], zone_of(timezone(timedelta(hours=-3)))[0]
    ('Europe/Paris', 'UTC-03:00')
    """
    key = tz.key if isinstance(tz, ZoneInfo) else tz
    if tz is None or tz is timezone.utc or (isinstance(key, str) and key.upper() in _UTC_NAMES):
        return "UTC", timezone.utc
    if isinstance(tz, ZoneInfo) and tz.key:
        return tz.key, tz
    if isinstance(tz, timezone):
        offset = tz.utcoffset(None)
        sign, minutes = ("-" if offset < timedelta(0) else "+"), abs(offset) // timedelta(minutes=1)
        return (f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}" if minutes else "UTC"), tz
    if isinstance(tz, str):
        fixed = _FIXED.match(tz)
        if fixed:
            offset = timedelta(hours=int(fixed.group(2)), minutes=int(fixed.group(3)))
            if offset < timedelta(hours=24):
                return zone_of(timezone(-offset if fixed.group(1) == "-" else offset))
        try:
            return zone_of(ZoneInfo(tz))
        except (ZoneInfoNotFoundError, ValueError):
            pass
    raise TimeframeError(
        f"time zone {tz!r} is not known; give an IANA name such as 'Europe/Paris', a "
        "zoneinfo.ZoneInfo, 'UTC', or a fixed offset such as 'UTC+05:30'")


def _month_start(year: int, month: int) -> date:
    """The Monday of the first ISO week whose Thursday is in that month."""
    first = date(year, month, 1)
    thursday = first + timedelta(days=(3 - first.weekday()) % 7)
    return thursday - timedelta(days=3)


def _days(kind: str, label: str) -> tuple[date, date]:
    """The first day of the period and the day after its last (``ValueError`` if none)."""
    match = _LABEL[kind].match(label)
    if match is None:
        raise ValueError(label)
    year, number = int(match.group(1)), int(match.group(2))
    if not 2 <= year <= 9998:
        raise ValueError(label)
    if kind == "day":
        first = date(year, number, int(match.group(3)))
        return first, first + timedelta(days=1)
    if kind == "week":
        first = date.fromisocalendar(year, number, 1)
        return first, first + timedelta(days=7)
    after = (year + 1, 1) if number == 12 else (year, number + 1)
    return _month_start(year, number), _month_start(*after)


def _midnight(day: date, zone: tzinfo) -> datetime:
    """The instant (UTC) the day begins in ``zone``."""
    return datetime.combine(day, time(), tzinfo=zone).astimezone(timezone.utc)


@dataclass(frozen=True)
class Period:
    """A day, ISO week or month of a time zone: ``Period("week", "2026-W48", "Europe/Paris")``.

    ``start`` (inclusive) and ``end`` (exclusive) are aware UTC datetimes; ``label`` is
    ``2026-11-28``, ``2026-W48`` or ``2026-11``; ``tz`` the zone's name (see :func:`zone_of`).
    Two periods are equal when kind, label and zone are.

    >>> p = Period("day", "2026-11-28", "Asia/Tokyo")
    >>> p.start.isoformat(), p.key
    ('2026-11-27T15:00:00+00:00', 'day:2026-11-28@Asia/Tokyo')
    """

    kind: str
    label: str
    tz: str = "UTC"
    start: datetime = field(init=False, compare=False, repr=False)
    end: datetime = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in PERIOD_KINDS:
            raise TimeframeError(f"a period's kind must be one of {', '.join(PERIOD_KINDS)}, "
                                 f"got {self.kind!r}")
        name, zone = zone_of(self.tz)
        try:
            if not isinstance(self.label, str):
                raise TypeError(self.label)
            first, after = _days(self.kind, self.label)
            start, end = _midnight(first, zone), _midnight(after, zone)
        except (ValueError, OverflowError, TypeError):
            raise TimeframeError(
                f"{self.label!r} is not a {self.kind} label; write {_FORMS}, with a year from "
                "0002 to 9998") from None
        object.__setattr__(self, "tz", name)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)

    @property
    def zone(self) -> tzinfo:
        """The period's time zone as a ``tzinfo``."""
        return zone_of(self.tz)[1]

    @property
    def key(self) -> str:
        """A stable fragment for a digest's key: ``week:2026-W48`` (``@zone`` unless UTC)."""
        return f"{self.kind}:{self.label}" + ("" if self.tz == "UTC" else f"@{self.tz}")

    def __contains__(self, when: object) -> bool:
        """Whether the instant ``when`` (a datetime; naive means UTC) is in the period."""
        if not isinstance(when, datetime):
            return False
        return self.start <= (when if when.tzinfo else when.replace(tzinfo=timezone.utc)) < self.end


def _label(kind: str, day: date) -> str:
    if kind == "day":
        return day.isoformat()
    year, week, _ = day.isocalendar()
    if kind == "week":
        return f"{year}-W{week:02d}"
    thursday = day + timedelta(days=3 - day.weekday())
    return f"{thursday.year}-{thursday.month:02d}"


def _kind(kind: Any) -> str:
    if kind not in PERIOD_KINDS:
        raise TimeframeError(f"period kind must be one of {', '.join(PERIOD_KINDS)}, got {kind!r}")
    return str(kind)


def period_of(when: datetime | date, kind: str = "day", tz: tzinfo | str | None = None) -> Period:
    """The period of kind ``kind`` holding ``when`` in the zone ``tz`` (default UTC).

    ``when`` is an instant (a naive datetime is read as UTC, as htm reads ``created_at``)
    or a ``date``, a calendar day of the zone.

    >>> period_of(datetime(2026, 11, 30, 9, tzinfo=timezone.utc), "month").label
    '2026-12'
    """
    name, zone = zone_of(tz)
    kind = _kind(kind)
    if isinstance(when, datetime):
        day = check_created_at(when).astimezone(zone).date()
    elif isinstance(when, date):
        day = when
    else:
        raise TimeframeError(f"give a datetime or a date to find its period, got {when!r}")
    return Period(kind, _label(kind, day), name)


def parse_period(text: str, tz: tzinfo | str | None = None) -> Period:
    """The period a label (``2026-11-28``, ``2026-W48``, ``2026-11``) or a :attr:`Period.key`
    names; a key's ``@zone`` wins over ``tz``. Case is ignored (``2026-w48``, ``WEEK:``).

    >>> parse_period("week:2026-W48@Europe/Paris") == Period("week", "2026-W48", "Europe/Paris")
    True
    """
    if not isinstance(text, str):
        raise TimeframeError(f"a period label must be a string ({_FORMS}), got {text!r}")
    kind, colon, rest = text.strip().partition(":")
    label, at, zone = (rest if colon else kind).partition("@")
    label, tz = label.strip().replace("w", "W"), zone.strip() if at else tz
    if colon:
        return Period(_kind(kind.strip().lower()), label, zone_of(tz)[0])
    for kind in PERIOD_KINDS:
        if _LABEL[kind].match(label):
            return Period(kind, label, zone_of(tz)[0])
    raise TimeframeError(f"{text!r} is not a period label; write {_FORMS}")


def _each_day(first: date, after: date) -> Iterator[date]:
    for offset in range((after - first).days):
        yield first + timedelta(days=offset)


def children(period: Period) -> tuple[Period, ...]:
    """A week's seven days or a month's four or five weeks, in order; a day has none."""
    if period.kind == "day":
        return ()
    first, after = _days(period.kind, period.label)
    step = 1 if period.kind == "week" else 7
    kind = PERIOD_KINDS[PERIOD_KINDS.index(period.kind) - 1]
    return tuple(Period(kind, _label(kind, day), period.tz)
                 for day in _each_day(first, after) if (day - first).days % step == 0)


def parent(period: Period) -> Period | None:
    """The week holding a day, the month holding a week; ``None`` for a month."""
    if period.kind == "month":
        return None
    kind = PERIOD_KINDS[PERIOD_KINDS.index(period.kind) + 1]
    return period_of(_days(period.kind, period.label)[0], kind, period.tz)


def periods_between(start: datetime, end: datetime, kind: str = "day",
                    tz: tzinfo | str | None = None) -> list[Period]:
    """The periods of ``kind`` (in ``tz``) that overlap ``[start, end)``, in order."""
    kind = _kind(kind)
    begin, stop = check_created_at(start), check_created_at(end)
    if stop < begin:
        raise TimeframeError(f"end {end.isoformat()} is before start {start.isoformat()}; "
                             "swap them")
    out: list[Period] = []
    current = period_of(begin, kind, tz)
    while current.start < stop and begin < stop:
        if len(out) == MAX_PERIODS:
            raise InvalidBudgetError(f"more than {MAX_PERIODS} {kind}s between {start} and "
                                     f"{end}; ask for a shorter range or a longer kind")
        out.append(current)
        current = period_of(_days(kind, current.label)[1], kind, current.tz)
    return out
