"""Turn a timeframe into a ``(start, end)`` pair of aware datetimes (end exclusive).

:func:`parse_timeframe` takes ``None``, a ``(start, end)`` pair, a ``timedelta``, a calendar
phrase (``"yesterday"``, ``"last week"``: whole days in the clock's time zone), a rolling
phrase ending now (``"last 7 days"``, ``"the past week"``), a month, year or date
(``"May 2023"``, ``"2023-05-01"``) or an ISO range (``"2023-05-01..2023-06-01"``); anything
else, or a window outside the years 1 to 9999, is a :class:`~htm_core.errors.TimeframeError`
naming the forms. The rules for users: docs/concepts.md ("Time").
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from typing import Any

from .clock import Clock, local_now, to_aware
from .errors import TimeframeError

__all__ = ["ACCEPTED_FORMS", "Timeframe", "parse_timeframe", "rolling_window", "through_now"]

Timeframe = tuple[datetime | None, datetime | None]

ACCEPTED_FORMS = (
    "None, a (start, end) pair of datetimes, a timedelta, 'today', 'yesterday', "
    "'this week|month|year', 'last week|month|year' (calendar; 'previous' works as 'last'), "
    "'last N hours|days|weeks|months|years', 'past week|month|year' (rolling, ending now; "
    "'past' and 'previous' work as 'last'), "
    "'May 2023', '2023-05', '2023', '2023-05-01', '2023-05-01..2023-06-01' (years 1 to 9999)"
)

_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
_LAST_N = re.compile(r"^(?:the )?(?:last|past) (\d+) (hour|day|week|month|year)s?$")
#: "past week", "the past week", "the last week": one unit back from now, as a query says it.
_PAST_ONE = re.compile(r"^(?:(?:the )?past|the last)()? (hour|day|week|month|year)$")
#: "previous" is "last" in every form ("previous week", "the previous 3 days").
_PREVIOUS = re.compile(r"^(?:the )?previous ")
_INSTANT = timedelta(microseconds=1)
_MONTH_YEAR = re.compile(r"^([a-z]+)\.?\s+(\d{4})$")


def parse_timeframe(timeframe: Any, *, clock: Clock | None = None) -> Timeframe:
    """Parse ``timeframe`` relative to ``clock()``; the forms: docs/concepts.md ("Time").

    >>> from datetime import timezone
    >>> now = lambda: datetime(2024, 5, 15, 10, tzinfo=timezone.utc)
    >>> start, end = parse_timeframe("May 2023", clock=now)
    >>> start.isoformat(), end.isoformat()
    ('2023-05-01T00:00:00+00:00', '2023-06-01T00:00:00+00:00')
    """
    now = to_aware((clock or local_now)())
    if timeframe is None:
        return (None, None)
    try:
        window = _parse(timeframe, now)
        if window is not None:
            window = (_held(window[0]), _held(window[1]))
    except TimeframeError:
        raise
    except (ValueError, OverflowError):  # a date before year 1 or after 9999
        raise TimeframeError(f"timeframe {timeframe!r} is out of range; give dates between the "
                             f"years 1 and 9999, in one of: {ACCEPTED_FORMS}") from None
    if window is None:
        raise TimeframeError(
            f"cannot understand timeframe {timeframe!r}; use one of: {ACCEPTED_FORMS}")
    return window


def rolling_window(now: datetime, length: timedelta) -> tuple[datetime, datetime]:
    """The window of ``length`` elapsed time that ends with ``now`` (included).

    >>> from zoneinfo import ZoneInfo
    >>> now = datetime(2024, 3, 10, 12, tzinfo=ZoneInfo("America/New_York"))  # DST began
    >>> start, end = rolling_window(now, timedelta(hours=24))
    >>> start.isoformat()  # 24 real hours back: 11:00, not 12:00, the day before
    '2024-03-09T11:00:00-05:00'
    """
    utc = now.astimezone(timezone.utc)
    return (utc - length).astimezone(now.tzinfo), through_now(now)


def through_now(now: datetime) -> datetime:
    """The (exclusive) end of a window that includes ``now`` and nothing after it."""
    return (now.astimezone(timezone.utc) + _INSTANT).astimezone(now.tzinfo)


def _parse(timeframe: Any, now: datetime) -> Timeframe | None:
    tz = now.tzinfo
    if isinstance(timeframe, timedelta):
        if timeframe <= timedelta(0):
            raise TimeframeError(f"a timedelta timeframe must be positive, got {timeframe}")
        return rolling_window(now, timeframe)
    if isinstance(timeframe, (tuple, list)) and len(timeframe) == 2:
        start, end = (_aware(v, tz) for v in timeframe)
        if start is not None and end is not None and _utc(start) > _utc(end):
            raise TimeframeError(f"timeframe starts ({start}) after it ends ({end})")
        return (start, end)
    if isinstance(timeframe, str):
        return _parse_phrase(timeframe.strip().lower(), now)
    return None


def _utc(when: datetime) -> datetime:
    """``when`` in UTC; a local time of year 1 or 9999 whose UTC instant falls outside
    what ``datetime`` holds becomes its first or last UTC instant (no memory is older or
    newer, so the window keeps what it selects)."""
    try:
        return when.astimezone(timezone.utc)
    except OverflowError:
        return (datetime.min if when.year == 1 else datetime.max).replace(tzinfo=timezone.utc)


def _held(bound: datetime | None) -> datetime | None:
    """``bound`` as it is, or in UTC when only that fits (see :func:`_utc`); raises
    ``ValueError`` or ``OverflowError`` for what no store can hold."""
    if bound is None:
        return None
    utc = _utc(bound)
    utc.timestamp()
    return bound if utc == bound else utc


def _aware(value: Any, tz: tzinfo | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=tz)
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=tz)
    if isinstance(value, str):
        parsed = _parse_iso(value.strip(), tz)
        if parsed is not None:
            return parsed
    raise TimeframeError(f"timeframe bound {value!r} is not a datetime; use one of: {ACCEPTED_FORMS}")


def _midnight(d: date, tz: tzinfo | None) -> datetime:
    return datetime.combine(d, time(), tzinfo=tz)


def _add_months(d: date, months: int) -> date:
    index = d.year * 12 + d.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _shift_months(when: datetime, months: int) -> datetime:
    first = _add_months(when.date().replace(day=1), months)
    last_day = (_add_months(first, 1) - timedelta(days=1)).day
    return when.replace(year=first.year, month=first.month, day=min(when.day, last_day))


def _parse_iso(text: str, tz: tzinfo | None) -> datetime | None:
    try:
        value = datetime.fromisoformat(text.upper())  # "t" and "z" as typed in lower case
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=tz)


def _relative_phrase(text: str, now: datetime) -> Timeframe | None:
    """``today``, ``yesterday``, ``this|last week|month|year`` and the rolling phrases."""
    tz = now.tzinfo
    today = now.date()
    if text == "today":
        return (_midnight(today, tz), _midnight(today + timedelta(days=1), tz))
    if text == "yesterday":
        return (_midnight(today - timedelta(days=1), tz), _midnight(today, tz))
    if text in ("this week", "last week"):
        monday = today - timedelta(days=today.weekday())
        if text == "last week":
            return (_midnight(monday - timedelta(days=7), tz), _midnight(monday, tz))
        return (_midnight(monday, tz), _midnight(monday + timedelta(days=7), tz))
    if text in ("this month", "last month"):
        first = today.replace(day=1)
        if text == "last month":
            return (_midnight(_add_months(first, -1), tz), _midnight(first, tz))
        return (_midnight(first, tz), _midnight(_add_months(first, 1), tz))
    if text in ("this year", "last year"):
        year = today.year - (text == "last year")
        return (_midnight(date(year, 1, 1), tz), _midnight(date(year + 1, 1, 1), tz))
    m = _LAST_N.match(text) or _PAST_ONE.match(text)
    if m:
        n, unit = int(m.group(1) or 1), m.group(2)
        if n <= 0:
            raise TimeframeError(f"a timeframe of {n} {unit}s covers no time; give a count "
                                 f"of 1 or more, as in 'last 3 {unit}s'")
        if unit in ("month", "year"):
            return (_shift_months(now, -n * (12 if unit == "year" else 1)), through_now(now))
        return rolling_window(now, timedelta(**{f"{unit}s": n}))
    return None


def _parse_phrase(text: str, now: datetime) -> Timeframe | None:
    tz = now.tzinfo
    text = _PREVIOUS.sub("last ", re.sub(r"\s+", " ", text))
    window = _relative_phrase(text, now)
    if window is not None:
        return window
    m = _MONTH_YEAR.match(text)
    if m and m.group(1) in _MONTHS:
        first = date(int(m.group(2)), _MONTHS[m.group(1)], 1)
        return (_midnight(first, tz), _midnight(_add_months(first, 1), tz))
    if re.fullmatch(r"\d{4}", text):
        year = int(text)
        return (_midnight(date(year, 1, 1), tz), _midnight(date(year + 1, 1, 1), tz))
    if re.fullmatch(r"\d{4}-\d{2}", text):
        if not 1 <= int(text[5:]) <= 12:
            return None
        month = date(int(text[:4]), int(text[5:]), 1)
        return (_midnight(month, tz), _midnight(_add_months(month, 1), tz))
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            day = date.fromisoformat(text)
        except ValueError:
            return None
        return (_midnight(day, tz), _midnight(day + timedelta(days=1), tz))
    if ".." in text:
        left, _, right = text.partition("..")
        start = _parse_iso(left.strip(), tz) if left.strip() else None
        end = _parse_iso(right.strip(), tz) if right.strip() else None
        if (left.strip() and start is None) or (right.strip() and end is None):
            return None
        if start is not None and end is not None and _utc(start) > _utc(end):
            raise TimeframeError(f"timeframe {text!r} starts after it ends")
        return (start, end)
    return None
