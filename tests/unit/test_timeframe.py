"""Timeframe parsing against an injectable clock, in the clock's time zone: calendar
phrases from local midnight to local midnight (daylight saving included), rolling windows
of exact length ending now, ISO times with ``Z``, and out-of-range input refused with
``TimeframeError``."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from htm_core import clock as clock_module
from htm_core.clock import FrozenClock, local_now, local_zone, to_aware
from htm_core.errors import TimeframeError
from htm_core.timeframe import parse_timeframe

UTC = timezone.utc
NOW = datetime(2024, 5, 15, 10, 30, tzinfo=UTC)  # a Wednesday
JUST_AFTER_NOW = NOW + timedelta(microseconds=1)  # a rolling window's end: now included


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
        ("last 3 days", (d(2024, 5, 12, 10, 30), JUST_AFTER_NOW)),
        ("past 2 weeks", (d(2024, 5, 1, 10, 30), JUST_AFTER_NOW)),
        ("last 5 hours", (d(2024, 5, 15, 5, 30), JUST_AFTER_NOW)),
        ("last 2 months", (d(2024, 3, 15, 10, 30), JUST_AFTER_NOW)),
        ("last 1 year", (d(2023, 5, 15, 10, 30), JUST_AFTER_NOW)),
        ("May 2023", (d(2023, 5, 1), d(2023, 6, 1))),
        ("dec 2023", (d(2023, 12, 1), d(2024, 1, 1))),
        ("2023-05", (d(2023, 5, 1), d(2023, 6, 1))),
        ("2022", (d(2022, 1, 1), d(2023, 1, 1))),
        ("2023-05-07", (d(2023, 5, 7), d(2023, 5, 8))),
        ("2023-05-01..2023-06-01", (d(2023, 5, 1), d(2023, 6, 1))),
        ("2023-05-01..", (d(2023, 5, 1), None)),
        ("the last 7 days", (d(2024, 5, 8, 10, 30), JUST_AFTER_NOW)),
        ("past 24 hours", (d(2024, 5, 14, 10, 30), JUST_AFTER_NOW)),
        ("2023-05-01T08:00:00+02:00..2023-05-02", (datetime(2023, 5, 1, 8, tzinfo=timezone(
            timedelta(hours=2))), d(2023, 5, 2))),
    ],
)
def test_phrases(phrase, expected):
    assert parse_timeframe(phrase, clock=clock) == expected


def test_timedelta_pairs_and_dates():
    assert parse_timeframe(timedelta(hours=2), clock=clock) == (d(2024, 5, 15, 8, 30),
                                                                JUST_AFTER_NOW)
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


# -- ISO times ending in Z ---------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("2024-01-15T10:00:00Z..2024-01-16T00:00:00Z", (d(2024, 1, 15, 10), d(2024, 1, 16))),
    ("2024-01-15t10:00z..", (d(2024, 1, 15, 10), None)),
    ("..2024-01-15T10:00:00.5Z", (None, datetime(2024, 1, 15, 10, 0, 0, 500000, tzinfo=UTC))),
    (("2024-01-15T10:00:00Z", "2024-01-15T12:00:00+02:00"), (d(2024, 1, 15, 10),
                                                             d(2024, 1, 15, 10))),
])
def test_iso_times_ending_in_z_are_utc(text, expected):
    tokyo = lambda: NOW.astimezone(timezone(timedelta(hours=9)))  # noqa: E731
    assert parse_timeframe(text, clock=tokyo) == expected


# -- every documented phrase at month, year and daylight-saving boundaries ----------------

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def local(zone, *args: int) -> datetime:
    return datetime(*args, tzinfo=zone)


CALENDAR_CASES = [
    # Europe/Berlin, 31 March 2024: clocks went forward at 02:00 (a 23-hour day)
    (local(BERLIN, 2024, 3, 31, 12), "today", (3, 31), (4, 1), 23),
    (local(BERLIN, 2024, 3, 31, 12), "yesterday", (3, 30), (3, 31), 24),
    (local(BERLIN, 2024, 3, 31, 12), "this week", (3, 25), (4, 1), 7 * 24 - 1),
    (local(BERLIN, 2024, 4, 2, 12), "last week", (3, 25), (4, 1), 7 * 24 - 1),
    (local(BERLIN, 2024, 3, 31, 12), "this month", (3, 1), (4, 1), 31 * 24 - 1),
    (local(BERLIN, 2024, 4, 10, 12), "last month", (3, 1), (4, 1), 31 * 24 - 1),
    (local(BERLIN, 2024, 4, 10, 12), "2024-03-31", (3, 31), (4, 1), 23),
    (local(BERLIN, 2024, 4, 10, 12), "March 2024", (3, 1), (4, 1), 31 * 24 - 1),
    (local(BERLIN, 2024, 4, 10, 12), "2024-03", (3, 1), (4, 1), 31 * 24 - 1),
    # America/New_York, 3 November 2024: clocks went back at 02:00 (a 25-hour day)
    (local(NEW_YORK, 2024, 11, 3, 23), "today", (11, 3), (11, 4), 25),
    (local(NEW_YORK, 2024, 11, 4, 0, 30), "yesterday", (11, 3), (11, 4), 25),
    (local(NEW_YORK, 2024, 11, 6, 9), "this week", (11, 4), (11, 11), 7 * 24),
    (local(NEW_YORK, 2024, 11, 6, 9), "last week", (10, 28), (11, 4), 7 * 24 + 1),
    (local(NEW_YORK, 2024, 12, 1, 9), "last month", (11, 1), (12, 1), 30 * 24 + 1),
    (local(NEW_YORK, 2024, 11, 30, 9), "this month", (11, 1), (12, 1), 30 * 24 + 1),
    (local(NEW_YORK, 2024, 12, 1, 9), "Nov 2024", (11, 1), (12, 1), 30 * 24 + 1),
    (local(NEW_YORK, 2024, 12, 1, 9), "2024-11-03", (11, 3), (11, 4), 25),
]


@pytest.mark.parametrize(("now", "phrase", "first", "last", "hours"), CALENDAR_CASES)
def test_calendar_phrases_run_midnight_to_midnight_local_across_dst(now, phrase, first, last,
                                                                     hours):
    zone = now.tzinfo
    start, end = parse_timeframe(phrase, clock=FrozenClock(now))
    assert start == local(zone, 2024, *first) and end == local(zone, 2024, *last)
    assert (start.hour, start.minute, end.hour, end.minute) == (0, 0, 0, 0)
    assert start.utcoffset() == local(zone, 2024, *first).utcoffset()
    assert end.astimezone(UTC) - start.astimezone(UTC) == timedelta(hours=hours)


@pytest.mark.parametrize(("now", "phrase", "expected"), [
    # New Year's morning in New York (winter time, -05:00)
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "yesterday", ((2024, 12, 31), (2025, 1, 1))),
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "today", ((2025, 1, 1), (2025, 1, 2))),
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "this week", ((2024, 12, 30), (2025, 1, 6))),
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "last week", ((2024, 12, 23), (2024, 12, 30))),
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "this month", ((2025, 1, 1), (2025, 2, 1))),
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "last month", ((2024, 12, 1), (2025, 1, 1))),
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "this year", ((2025, 1, 1), (2026, 1, 1))),
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "last year", ((2024, 1, 1), (2025, 1, 1))),
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "2024", ((2024, 1, 1), (2025, 1, 1))),
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "dec 2024", ((2024, 12, 1), (2025, 1, 1))),
    # the first of a month, at midnight, in Berlin summer time
    (local(BERLIN, 2024, 7, 1), "yesterday", ((2024, 6, 30), (2024, 7, 1))),
    (local(BERLIN, 2024, 7, 1), "last month", ((2024, 6, 1), (2024, 7, 1))),
    (local(BERLIN, 2024, 3, 1, 8), "yesterday", ((2024, 2, 29), (2024, 3, 1))),
    (local(BERLIN, 2024, 3, 1, 8), "last month", ((2024, 2, 1), (2024, 3, 1))),
])
def test_calendar_phrases_at_month_and_year_boundaries(now, phrase, expected):
    zone = now.tzinfo
    assert parse_timeframe(phrase, clock=FrozenClock(now)) == tuple(
        local(zone, *ymd) for ymd in expected)


@pytest.mark.parametrize(("now", "phrase", "length"), [
    (local(NEW_YORK, 2024, 3, 10, 12), "last 24 hours", timedelta(hours=24)),  # DST began
    (local(NEW_YORK, 2024, 3, 10, 12), "past 1 days", timedelta(days=1)),
    (local(NEW_YORK, 2024, 11, 3, 12), "last 24 hours", timedelta(hours=24)),  # DST ended
    (local(NEW_YORK, 2024, 11, 3, 12), "the last 7 days", timedelta(days=7)),
    (local(BERLIN, 2024, 3, 31, 12), "last 2 weeks", timedelta(weeks=2)),
    (local(BERLIN, 2024, 10, 27, 12), timedelta(hours=30), timedelta(hours=30)),
    (local(NEW_YORK, 2025, 1, 1, 0, 30), "last 3 hours", timedelta(hours=3)),
])
def test_rolling_windows_are_exact_durations_ending_now(now, phrase, length):
    start, end = parse_timeframe(phrase, clock=FrozenClock(now))
    assert end.astimezone(UTC) - start.astimezone(UTC) == length + timedelta(microseconds=1)
    assert end > now and end - timedelta(microseconds=1) == now  # now in, the future out


def test_rolling_months_start_at_the_same_local_time() -> None:
    now = local(BERLIN, 2024, 4, 15, 9)  # summer time; a month back was winter time
    start, end = parse_timeframe("last 2 months", clock=FrozenClock(now))
    assert start == local(BERLIN, 2024, 2, 15, 9) and start.utcoffset() == timedelta(hours=1)
    assert end.astimezone(UTC) == now.astimezone(UTC) + timedelta(microseconds=1)


# -- the default clock carries the machine's zone ------------------------------------------


def test_default_clock_uses_the_local_zone_with_its_rules(berlin_machine) -> None:
    assert local_zone() == BERLIN and local_now().tzinfo == BERLIN
    winter = parse_timeframe("2024-01-15")  # the default clock, whatever today is
    summer = parse_timeframe("2024-07-15")
    assert winter[0].astimezone(UTC) == d(2024, 1, 14, 23)
    assert summer[0].astimezone(UTC) == d(2024, 7, 14, 22)
    assert to_aware(datetime(2024, 7, 15, 10)).astimezone(UTC) == d(2024, 7, 15, 8)
    assert to_aware(datetime(2024, 1, 15, 10)).astimezone(UTC) == d(2024, 1, 15, 9)


@pytest.mark.parametrize(("tz_env", "localtime", "expected"), [
    ("America/New_York", "", "America/New_York"),
    (":Europe/Berlin", "/usr/share/zoneinfo/Asia/Tokyo", "Europe/Berlin"),
    ("/usr/share/zoneinfo/Europe/Berlin", "", "Europe/Berlin"),
    (None, "/usr/share/zoneinfo/Asia/Tokyo", "Asia/Tokyo"),
    ("", "/usr/share/zoneinfo/Asia/Tokyo", "Asia/Tokyo"),
    ("CET-1CEST", "/usr/share/zoneinfo/Asia/Tokyo", None),  # POSIX rules: the fixed offset
    (None, "/etc/localtime", None),
])
def test_local_zone_sources(tz_env, localtime, expected) -> None:
    zone = clock_module._named_zone(tz_env, localtime)
    assert (zone.key if zone is not None else None) == expected


def test_frozen_clock_advances_by_elapsed_time_across_dst() -> None:
    clock = FrozenClock(datetime(2024, 11, 3, 0, 30), tz=NEW_YORK)
    later = clock.advance(hours=2)
    assert later.astimezone(UTC) - d(2024, 11, 3, 4, 30) == timedelta(hours=2)
    assert (later.hour, later.minute, later.utcoffset()) == (1, 30, timedelta(hours=-5))
    shown = FrozenClock(d(2024, 7, 1, 12), tz=BERLIN)()
    assert shown.tzinfo == BERLIN and shown.hour == 14


# -- out of range ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [
    "0000", "9999", "0000-05", "9999-12", "0000-01-01", "9999-12-31", "May 0000", "dec 9999",
    "last 99999999 days", "last 100000 years", "last 9999999999999999999999 hours",
    "last 99999999999 months", "0000-01-01..2024-01-01", "..10000-01-01",
    timedelta(days=999_999_999),
])
def test_out_of_range_input_is_a_timeframe_error(bad):
    tokyo = lambda: NOW.astimezone(timezone(timedelta(hours=9)))  # noqa: E731
    with pytest.raises(TimeframeError, match="timeframe"):
        parse_timeframe(bad, clock=tokyo)


@pytest.mark.parametrize("edge", [(datetime.min, None), ("0001-01-01", None), "0001-01-01"])
def test_year_1_works_east_of_utc(edge) -> None:  # type: ignore[no-untyped-def]
    """The local midnight of 1 January of the year 1 in Tokyo is in the year 0 in UTC: the
    bound becomes the first instant a store holds (tests/reliability/test_faults_names.py)."""
    tokyo = lambda: NOW.astimezone(timezone(timedelta(hours=9)))  # noqa: E731
    start, _ = parse_timeframe(edge, clock=tokyo)
    assert start == datetime.min.replace(tzinfo=timezone.utc)


def test_the_edges_of_the_range_still_work() -> None:
    assert parse_timeframe("9998", clock=clock) == (d(9998, 1, 1), d(9999, 1, 1))
    assert parse_timeframe("0001", clock=clock) == (d(1, 1, 1), d(2, 1, 1))


def test_iso_ranges_and_rolling_years_at_boundaries() -> None:
    berlin_now = FrozenClock(local(BERLIN, 2024, 4, 10, 12))
    start, end = parse_timeframe("2024-03-31..2024-04-01", clock=berlin_now)
    assert end.astimezone(UTC) - start.astimezone(UTC) == timedelta(hours=23)
    start, end = parse_timeframe("2024-03-30T12:00..2024-03-31T12:00", clock=berlin_now)
    assert end.astimezone(UTC) - start.astimezone(UTC) == timedelta(hours=23)
    leap_day = FrozenClock(local(NEW_YORK, 2024, 2, 29, 9))
    start, end = parse_timeframe("last 1 years", clock=leap_day)
    assert start == local(NEW_YORK, 2023, 2, 28, 9)
    new_year = FrozenClock(local(NEW_YORK, 2025, 1, 1, 0, 30))
    start, _ = parse_timeframe("last 1 months", clock=new_year)
    assert start == local(NEW_YORK, 2024, 12, 1, 0, 30)
    start, _ = parse_timeframe("last 1 days", clock=new_year)
    assert start == local(NEW_YORK, 2024, 12, 31, 0, 30)


# -- "past" and "previous" ------------------------------------------------------------------

LAST_FORMS = ["last week", "last month", "last year", "last 3 days", "last 5 hours",
              "last 2 weeks", "last 2 months", "last 1 year", "the last 7 days"]
BERLIN_SPRING = datetime(2024, 3, 31, 12, tzinfo=ZoneInfo("Europe/Berlin"))  # DST began


@pytest.mark.parametrize("now", [NOW, BERLIN_SPRING])
@pytest.mark.parametrize("phrase", LAST_FORMS)
def test_previous_means_last_in_every_form(now: datetime, phrase: str) -> None:
    expected = parse_timeframe(phrase, clock=lambda: now)
    synonym = phrase.replace("last", "previous")
    for spelled in (synonym, synonym.upper(), synonym.replace(" ", "  "),
                    synonym.title()):
        assert parse_timeframe(spelled, clock=lambda: now) == expected, spelled


@pytest.mark.parametrize("now", [NOW, BERLIN_SPRING])
@pytest.mark.parametrize("phrase", [p for p in LAST_FORMS if any(c.isdigit() for c in p)])
def test_past_with_a_count_means_last(now: datetime, phrase: str) -> None:
    expected = parse_timeframe(phrase, clock=lambda: now)
    assert parse_timeframe(phrase.replace("last", "past"), clock=lambda: now) == expected


@pytest.mark.parametrize(("phrase", "same_as"), [
    ("past week", "last 7 days"), ("the past week", "last 7 days"),
    ("the last week", "last 7 days"), ("Past Month", "last 1 month"),
    ("past year", "last 1 year"), ("past day", "last 24 hours"), ("past hour", "last 1 hour"),
])
def test_past_without_a_count_is_one_unit_back_from_now(phrase: str, same_as: str) -> None:
    """As in a query ("what did we discuss in the past week?"): a rolling window."""
    assert parse_timeframe(phrase, clock=clock) == parse_timeframe(same_as, clock=clock)
    assert parse_timeframe(phrase, clock=clock)[1] == JUST_AFTER_NOW


def test_past_week_in_a_timeframe_and_in_a_query_is_one_window() -> None:
    from htm_core.querytime import query_timeframe

    found = query_timeframe("What did we discuss in the past week?", NOW)
    assert found is not None
    assert parse_timeframe("past week", clock=clock) == (found.start, found.end)


@pytest.mark.parametrize("bad", [
    "past", "previous", "the past", "past weeks", "previous weeks", "past fortnight",
    "previous fortnight", "next week", "previously", "previous weekend", "previous May",
    "past week of May", "previous 2023", "previous 2023-05", "past -3 days", "pastweek",
    "previous 3", "past 3 decades",
])
def test_past_and_previous_forms_that_mean_nothing_are_refused(bad: str) -> None:
    with pytest.raises(TimeframeError) as info:
        parse_timeframe(bad, clock=clock)
    message = str(info.value)
    assert f"cannot understand timeframe {bad!r}" in message
    assert "'past' and 'previous' work as 'last'" in message


@pytest.mark.parametrize("bad", ["past 0 days", "previous 0 weeks", "the last 0 hours",
                                 "last 0 months"])
def test_a_count_of_zero_says_to_give_one_or_more(bad: str) -> None:
    with pytest.raises(TimeframeError, match="covers no time; give a count of 1 or more"):
        parse_timeframe(bad, clock=clock)
