"""Periods: labels, time zones, the day -> week -> month hierarchy and its edge cases."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htm_core.consolidation.periods import (
    Period,
    children,
    parent,
    parse_period,
    period_of,
    periods_between,
    zone_of,
)
from htm_core.errors import InvalidBudgetError, TimeframeError, ValidationError

UTC = timezone.utc


def test_labels_and_bounds_in_utc() -> None:
    day = period_of(datetime(2026, 11, 28, 23, 59, tzinfo=UTC))
    assert (day.label, day.start, day.end) == (
        "2026-11-28", datetime(2026, 11, 28, tzinfo=UTC), datetime(2026, 11, 29, tzinfo=UTC))
    week = period_of(date(2026, 11, 28), "week")
    assert (week.label, week.start.date(), week.end.date()) == (
        "2026-W48", date(2026, 11, 23), date(2026, 11, 30))
    month = period_of(date(2026, 11, 28), "month")
    assert (month.label, month.start.date(), month.end.date()) == (
        "2026-11", date(2026, 11, 2), date(2026, 11, 30))
    assert all(p.start.tzinfo is UTC and p.end.tzinfo is UTC for p in (day, week, month))


def test_a_users_day_is_in_their_time_zone() -> None:
    instant = datetime(2026, 11, 28, 16, tzinfo=UTC)  # 01:00 on the 29th in Tokyo
    tokyo = period_of(instant, "day", "Asia/Tokyo")
    assert tokyo.label == "2026-11-29"
    assert tokyo.start == datetime(2026, 11, 28, 15, tzinfo=UTC)
    assert instant in tokyo and instant not in Period("day", "2026-11-29")
    assert tokyo != Period("day", "2026-11-29")  # the same label in another zone
    assert tokyo.key == "day:2026-11-29@Asia/Tokyo"
    assert period_of(instant, "day", ZoneInfo("Asia/Tokyo")) == tokyo
    assert period_of(instant, "day", timezone(timedelta(hours=9))).key == "day:2026-11-29@UTC+09:00"


def test_daylight_saving_days_are_23_and_25_hours() -> None:
    spring = Period("day", "2026-03-29", "Europe/Paris")
    autumn = Period("day", "2026-10-25", "Europe/Paris")
    assert spring.end - spring.start == timedelta(hours=23)
    assert autumn.end - autumn.start == timedelta(hours=25)
    week = parse_period("2026-W13", "Europe/Paris")
    days = children(week)
    assert [a.end == b.start for a, b in pairwise(days)] == [True] * 6
    assert (days[0].start, days[-1].end) == (week.start, week.end)


@pytest.mark.parametrize("tz", ["UTC", "America/Sao_Paulo", "Pacific/Kiritimati", "UTC-09:30"])
def test_every_day_is_in_one_week_and_every_week_in_one_month(tz: str) -> None:
    """Three years of days, year ends and 53-week years included: the hierarchy tiles."""
    days = [date(2025, 12, 1) + timedelta(days=n) for n in range(3 * 366)]
    for d in days:
        day = period_of(d, "day", tz)
        week = parent(day)
        assert week is not None and day in children(week)
        month = parent(week)
        assert month is not None and week in children(month)
        assert month == period_of(d, "month", tz) and parent(month) is None
        assert month.start <= day.start and day.end <= month.end
    months = periods_between(datetime(2026, 1, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC),
                             "month", tz)
    weeks = [w for m in months for w in children(m)]
    assert all(a.end == b.start for a, b in pairwise(weeks))
    assert all(len(children(m)) in (4, 5) for m in months)


def test_a_week_that_straddles_two_months_belongs_to_the_month_of_its_thursday() -> None:
    w49 = parse_period("2026-W49")  # Monday 30 November to Sunday 6 December
    assert parent(w49) == parse_period("2026-12")
    assert period_of(date(2026, 11, 30), "month").label == "2026-12"
    w53 = parse_period("2026-W53")  # 28 December 2026 to 3 January 2027
    assert parent(w53) == parse_period("2026-12")
    assert period_of(date(2027, 1, 2), "month").label == "2026-12"
    assert period_of(date(2024, 12, 31), "week").label == "2025-W01"
    assert period_of(date(2024, 12, 31), "month").label == "2025-01"


def test_parse_round_trips_labels_and_keys() -> None:
    for p in (Period("day", "2026-02-28"), Period("week", "2026-W01", "Europe/Paris"),
              Period("month", "2026-12", "UTC-03:30")):
        assert parse_period(p.label, p.tz) == p
        assert parse_period(p.key) == p
    assert parse_period(" 2026-11 ").kind == "month"
    week = Period("week", "2026-W48")
    assert parse_period("2026-w48") == parse_period("WEEK: 2026-w48 ") == week
    assert parse_period("2026-w48").key == week.key == "week:2026-W48"
    assert parse_period("week:2026-W48@Asia/Tokyo", "Europe/Paris").tz == "Asia/Tokyo"


@pytest.mark.parametrize("bad", ["2026-13", "2026-02-30", "2025-W53", "2026-W00", "26-11",
                                 "2026/11/28", "２０２６-11", "", "day:2026-11", "year:2026",
                                 "0001-01", "9999-12-31", "2026-11@Mars/Olympus"])
def test_bad_labels_say_what_to_write(bad: str) -> None:
    with pytest.raises(TimeframeError) as info:
        parse_period(bad)
    assert isinstance(info.value, ValidationError)
    assert "2026-W48" in str(info.value) or "time zone" in str(info.value) or \
        "must be one of" in str(info.value)


def test_bad_zones_kinds_and_ranges() -> None:
    for zone in ("Mars/Olympus", "utc+5", "UTC+24:00", "../etc/passwd"):
        with pytest.raises(TimeframeError, match="IANA name"):
            zone_of(zone)
    with pytest.raises(TimeframeError, match="day, week, month"):
        period_of(date(2026, 1, 1), "year")
    with pytest.raises(TimeframeError, match="swap them"):
        periods_between(datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(InvalidBudgetError, match="shorter range"):
        periods_between(datetime(1000, 1, 1, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC))
    with pytest.raises(TimeframeError, match="datetime or a date"):
        period_of("2026-11-28", "day")  # type: ignore[arg-type]


def test_periods_between_is_half_open_and_ordered() -> None:
    start, end = datetime(2026, 11, 27, 12, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC)
    assert [p.label for p in periods_between(start, end)] == [
        "2026-11-27", "2026-11-28", "2026-11-29"]
    assert periods_between(start, start) == []
    naive = datetime(2026, 11, 28, 12)  # read as UTC, as htm reads created_at
    assert [p.label for p in periods_between(naive, naive + timedelta(hours=1))] == ["2026-11-28"]
    assert naive in Period("day", "2026-11-28")


ZONES = ["UTC", "Europe/Paris", "America/Santiago", "Asia/Kathmandu", "Pacific/Chatham",
         "Australia/Lord_Howe", "America/St_Johns", "UTC+14:00", "UTC-12:00"]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(instant=st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2100, 1, 1),
                            timezones=st.just(UTC)),
       tz=st.sampled_from(ZONES))
def test_an_instant_is_in_its_day_its_week_and_its_month(instant: datetime, tz: str) -> None:
    day, week, month = (period_of(instant, kind, tz) for kind in ("day", "week", "month"))
    assert instant in day and instant in week and instant in month
    assert parent(day) == week and parent(week) == month
    assert month.start <= week.start <= day.start < day.end <= week.end <= month.end
    assert parse_period(day.key) == day and parse_period(month.label, tz) == month
    local = instant.astimezone(zone_of(tz)[1])
    assert day.label == local.date().isoformat()


@pytest.mark.parametrize("alias", ["Etc/UTC", "utc", "Z", "GMT", "Etc/GMT+0", "Zulu",
                                   ZoneInfo("Etc/UTC"), ZoneInfo("UTC"), "UTC+00:00",
                                   timezone(timedelta(0))])
def test_every_name_of_utc_is_one_zone(alias: object) -> None:
    """Two names of one zone would give one period two digest keys."""
    assert zone_of(alias)[0] == "UTC"  # type: ignore[arg-type]
    day = Period("day", "2026-11-28", alias)  # type: ignore[arg-type]
    assert day == Period("day", "2026-11-28") and day.key == "day:2026-11-28"
