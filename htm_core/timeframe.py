"""Turn a timeframe into a ``(start, end)`` pair of aware datetimes (end exclusive).

Accepted forms (phrases are case-insensitive and computed in the clock's time zone):

- ``None``: no limit
- a ``(start, end)`` pair of datetimes (either may be None); naive ones are taken in the
  clock's time zone
- a ``timedelta``: the last that long, up to now
- ``"today"``, ``"yesterday"``
- ``"this week"``, ``"last week"``, ``"this month"``, ``"last month"``, ``"this year"``,
  ``"last year"`` (weeks start on Monday)
- ``"last N days"``, ``"last N weeks"``, ``"last N months"``, ``"last N years"``,
  ``"last N hours"`` (a rolling window ending now; ``"past"`` works as ``"last"``)
- a month name and year, ``"May 2023"`` or ``"2023-05"``; a year, ``"2023"``; a date,
  ``"2023-05-01"``
- an ISO range ``"2023-05-01..2023-06-01"`` (dates or datetimes; end exclusive)

Anything else raises :class:`~htm_core.errors.TimeframeError` naming these forms.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Any

from .clock import Clock, local_now
from .errors import TimeframeError

__all__ = ["ACCEPTED_FORMS", "Timeframe", "parse_timeframe"]

Timeframe = tuple[datetime | None, datetime | None]

ACCEPTED_FORMS = (
    "None, a (start, end) pair of datetimes, a timedelta, 'today', 'yesterday', "
    "'this week|month|year', 'last week|month|year', 'last N hours|days|weeks|months|years', "
    "'May 2023', '2023-05', '2023', '2023-05-01', '2023-05-01..2023-06-01'"
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
_LAST_N = re.compile(r"^(?:last|past)\s+(\d+)\s+(hour|day|week|month|year)s?$")
_MONTH_YEAR = re.compile(r"^([a-z]+)\.?\s+(\d{4})$")


def parse_timeframe(timeframe: Any, *, clock: Clock | None = None) -> Timeframe:
    """Parse ``timeframe`` relative to ``clock()``; see the module docstring for forms.

    >>> from datetime import timezone
    >>> now = lambda: datetime(2024, 5, 15, 10, tzinfo=timezone.utc)
    >>> start, end = parse_timeframe("May 2023", clock=now)
    >>> start.isoformat(), end.isoformat()
    ('2023-05-01T00:00:00+00:00', '2023-06-01T00:00:00+00:00')
    """
    now = (clock or local_now)()
    if now.tzinfo is None:
        now = now.astimezone()
    tz = now.tzinfo
    if timeframe is None:
        return (None, None)
    if isinstance(timeframe, timedelta):
        if timeframe <= timedelta(0):
            raise TimeframeError(f"a timedelta timeframe must be positive, got {timeframe}")
        return (now - timeframe, None)
    if isinstance(timeframe, (tuple, list)) and len(timeframe) == 2:
        start, end = (_aware(v, tz) for v in timeframe)
        if start is not None and end is not None and start > end:
            raise TimeframeError(f"timeframe starts ({start}) after it ends ({end})")
        return (start, end)
    if isinstance(timeframe, str):
        result = _parse_phrase(timeframe.strip().lower(), now)
        if result is not None:
            return result
    raise TimeframeError(f"cannot understand timeframe {timeframe!r}; use one of: {ACCEPTED_FORMS}")


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
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=tz)


def _parse_phrase(text: str, now: datetime) -> Timeframe | None:
    tz = now.tzinfo
    today = now.date()
    text = re.sub(r"\s+", " ", text)
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
    m = _LAST_N.match(text)
    if m:
        n, unit = int(m.group(1)), m.group(2)
        if n <= 0:
            return None
        if unit in ("month", "year"):
            return (_shift_months(now, -n * (12 if unit == "year" else 1)), None)
        return (now - timedelta(**{f"{unit}s": n}), None)
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
        if start is not None and end is not None and start > end:
            raise TimeframeError(f"timeframe {text!r} starts after it ends")
        return (start, end)
    return None
