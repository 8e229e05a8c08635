"""Timeframe parsing against an injectable clock, in the clock's time zone."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from htm_core.errors import TimeframeError
from htm_core.timeframe import parse_timeframe

UTC = timezone.utc
NOW = datetime(2024, 5, 15, 10, 30, tzinfo=UTC)  # a Wednesday


def clock() -> datetime:
    return NOW


def d(*args: int, tz=UTC) -> datetime:
    return datetime(*args, tzinfo=tz)


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        (None, (None, None)),
        ("today", (d(2024, 5, 15), d(2024, 5, 16))),
        ("Yesterday", (d(2024, 5, 14), d(2024, 5, 15))),
        ("this week", (d(2024, 5, 13), d(2024, 5, 20))),
        ("last week", (d(2024, 5, 6), d(2024, 5, 13))),
        ("this month", (d(2024, 5, 1), d(2024, 6, 1))),
        ("last month", (d(2024, 4, 1), d(2024, 5, 1))),
        ("this year", (d(2024, 1, 1), d(2025, 1, 1))),
        ("last year", (d(2023, 1, 1), d(2024, 1, 1))),
        ("last 3 days", (d(2024, 5, 12, 10, 30), None)),
        ("past 2 weeks", (d(2024, 5, 1, 10, 30), None)),
        ("last 5 hours", (d(2024, 5, 15, 5, 30), None)),
        ("last 2 months", (d(2024, 3, 15, 10, 30), None)),
        ("last 1 year", (d(2023, 5, 15, 10, 30), None)),
        ("May 2023", (d(2023, 5, 1), d(2023, 6, 1))),
        ("dec 2023", (d(2023, 12, 1), d(2024, 1, 1))),
        ("2023-05", (d(2023, 5, 1), d(2023, 6, 1))),
        ("2022", (d(2022, 1, 1), d(2023, 1, 1))),
        ("2023-05-07", (d(2023, 5, 7), d(2023, 5, 8))),
        ("2023-05-01..2023-06-01", (d(2023, 5, 1), d(2023, 6, 1))),
        ("2023-05-01..", (d(2023, 5, 1), None)),
        ("2023-05-01T08:00:00+02:00..2023-05-02", (datetime(2023, 5, 1, 8, tzinfo=timezone(
            timedelta(hours=2))), d(2023, 5, 2))),
    ],
)
def test_phrases(phrase, expected):
    assert parse_timeframe(phrase, clock=clock) == expected


def test_timedelta_pairs_and_dates():
    assert parse_timeframe(timedelta(hours=2), clock=clock) == (d(2024, 5, 15, 8, 30), None)
    start, end = parse_timeframe((datetime(2024, 1, 1), date(2024, 2, 1)), clock=clock)
    assert start == d(2024, 1, 1) and end == d(2024, 2, 1)  # naive taken in the clock's zone


def test_computed_in_the_clocks_time_zone():
    tokyo = timezone(timedelta(hours=9))
    start, end = parse_timeframe("today", clock=lambda: NOW.astimezone(tokyo))
    assert start == d(2024, 5, 15, tz=tokyo) and end == d(2024, 5, 16, tz=tokyo)
    assert start.astimezone(UTC) == d(2024, 5, 14, 15)


def test_month_arithmetic_clamps_day():
    end_of_march = lambda: d(2024, 3, 31, 12)  # noqa: E731
    assert parse_timeframe("last 1 months", clock=end_of_march)[0] == d(2024, 2, 29, 12)


@pytest.mark.parametrize(
    "bad",
    ["", "last fortnight", "someday", "last 0 days", "Smarch 2023", "2023-13", "2023-02-30",
     "2023-06-01..2023-05-01", "x..y", 42, (1, 2, 3), timedelta(0), (NOW, NOW - timedelta(1))],
)
def test_bad_timeframes_name_the_accepted_forms(bad):
    with pytest.raises(TimeframeError) as info:
        parse_timeframe(bad, clock=clock)
    message = str(info.value)
    assert "timeframe" in message
