"""Time expressions in recall queries (htm_core.querytime): a corpus of sentences that
must not produce a window (modal "may", "march" the verb, "second", numbers that are not
years, "spring" the noun, "the last year of school") and of sentences that must, with the
window each means against a fixed clock. Pure functions: no store involved."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from htm_core.querytime import QueryTime, query_timeframe
from htm_core.recall import QueryTime as RecallQueryTime
from htm_core.recall import query_timeframe as recall_query_timeframe

UTC = timezone.utc
NOW = datetime(2024, 6, 19, 15, 30, tzinfo=UTC)  # a Wednesday

#: Sentences with no time expression: hybrid recall must not narrow them to a window.
NOT_TIME = [
    "This may sound odd, but what is my cat's name?",
    "this may sound odd, but what is my cat's name?",
    'Give me a list of 2000 words about dogs.',
    'Write it in 2000 words or fewer.',
    'May I ask what Ana adopted?',
    "What is the name of Ana's dog?",
    'It may rain later; should I take an umbrella?',
    'You may want to check the oven.',
    'That may be the best pizza in town.',
    'This may take a while.',
    'This may well be true.',
    'This may not work at all.',
    'They may march together tomorrow at noon?',
    'We march in march formation at the parade.',
    'The band will march in step.',
    'Protesters plan to march on the capital.',
    'This march across the desert was brutal.',
    'The last march of the regiment was in the rain.',
    'Wait a second, where are my keys?',
    'The previous year of school was the hardest.',
    'My previous week at the old job was calm.',
    'She finished second in the race.',
    'Can I get a second opinion on the design?',
    'The second chapter was boring.',
    'I was in second place.',
    'Leave a second copy on my desk.',
    'He keeps a spring in his step.',
    'The rice paper in spring rolls tears easily.',
    'We drank water from a spring in the hills.',
    'The spring in this mattress is broken.',
    'Bottled in spring water from the Alps.',
    'I bought a new spring for the garage door.',
    'Did you see the spring collection?',
    'Be careful not to fall on the ice.',
    'A sharp fall in prices hurt the market.',
    'Keep the fall risk low for grandma.',
    'My last fall left a bruise on my knee.',
    'That was the last year of school for Ana.',
    'The last week of the trip was rainy.',
    'It was the last month of her contract.',
    'His last summer job was at a cafe.',
    'What did the last speaker say?',
    'At last, the package arrived!',
    'Did she come in last?',
    'Room 2023 is on the third floor.',
    'The model has 2048 dimensions.',
    'We walked 2000 steps in 1999 seconds.',
    'She scored 1995 points in the game.',
    'In 1984 pages, the novel tells a whole life.',
    "My PIN is 2019, don't tell anyone.",
    'The Lisbon trip cost 2000 euros.',
    'Order 2024 units of the part.',
    'I have read 1984 twice.',
    'In 2000 ms the request timed out.',
    'The price is in 1999 dollars.',
    'What changed in 2024.1 of the app?',
    'What was in the 2000 mg pill?',
    'Jan from accounting sent the report.',
    'April said she would call.',
    "June's sister is a nurse.",
    "Is August Wilson's play on tonight?",
    'Dec is short for December.',
    'We have two weeks of vacation left.',
    'A few weeks of practice made the difference.',
    "Several days' worth of food is in the car.",
    'The meeting lasts an hour.',
    'Is 1999 a prime number?',
    'How do you say hello in Spanish?',
]

#: (sentence, the phrase found, start, end) against NOW; "now" is the end of a window
#: that includes NOW; a bare date is that day's midnight in UTC.
TIME = [
    ('What did Ana do last May?', 'last May', "2024-05-01", "2024-06-01"),
    ('What did we do last may?', 'last may', "2024-05-01", "2024-06-01"),
    ('Last May I adopted a dog, remember?', 'Last May', "2024-05-01", "2024-06-01"),
    ('Where did I travel last June?', 'last June', "2023-06-01", "2023-07-01"),
    ('What happened last July?', 'last July', "2023-07-01", "2023-08-01"),
    ('anything in March?', 'in March', "2024-03-01", "2024-04-01"),
    ('In March we painted the kitchen.', 'In March', "2024-03-01", "2024-04-01"),
    ('What did Kenji cook in july?', 'in july', "2023-07-01", "2023-08-01"),
    ('What happened in June?', 'in June', "2024-06-01", "2024-07-01"),
    ('What did we plan this March?', 'this March', "2024-03-01", "2024-04-01"),
    ('Which books did I read during April?', 'during April', "2024-04-01", "2024-05-01"),
    ('What did Bo bake in early May?', 'early May', "2024-05-01", "2024-06-01"),
    ('Who visited in mid may?', 'mid may', "2024-05-01", "2024-06-01"),
    ('Where was Zoe in late May, when the storm hit?', 'late May', "2024-05-01", "2024-06-01"),
    ('What have I been learning since March?', 'since March', "2024-03-01", "now"),
    ('What did I buy since april?', 'since april', "2024-04-01", "now"),
    ('What happened in June 2023?', 'in June 2023', "2023-06-01", "2023-07-01"),
    ('what happened in june 2023', 'in june 2023', "2023-06-01", "2023-07-01"),
    ('Where did we go in Sept. 2022?', 'in Sept. 2022', "2022-09-01", "2022-10-01"),
    ('Who got married in December, 2021?', 'in December, 2021', "2021-12-01", "2022-01-01"),
    ('Any news from Feb 2024?', 'Feb 2024', "2024-02-01", "2024-03-01"),
    ('What was Noah doing in May 2023 and why?', 'in May 2023', "2023-05-01", "2023-06-01"),
    ('What did I say about it two weeks ago?', 'two weeks ago', "2024-05-31T09:30", "2024-06-10T21:30"),
    ('the dinner two weeks ago', 'two weeks ago', "2024-05-31T09:30", "2024-06-10T21:30"),
    ('What did we talk about 3 days ago?', '3 days ago', "2024-06-14T15:30", "2024-06-18T15:30"),
    ('Who called a few days ago?', 'few days ago', "2024-06-14T15:30", "2024-06-18T15:30"),
    ('Where did we eat a month ago?', 'a month ago', "2024-04-28T03:30", "2024-06-12T03:30"),
    ('What was I doing a year ago?', 'a year ago', "2022-09-19T21:30", "2024-03-20T09:30"),
    ('What did Ana buy six months ago?', 'six months ago', "2023-11-30T03:30", "2024-01-14T03:30"),
    ('Did I run a week ago?', 'a week ago', "2024-06-07T09:30", "2024-06-17T21:30"),
    ('What did we do last summer?', 'last summer', "2023-06-01", "2023-09-01"),
    ('trip last summer', 'last summer', "2023-06-01", "2023-09-01"),
    ('Where are we going this summer?', 'this summer', "2024-06-01", "2024-09-01"),
    ('What did Theo plant last spring?', 'last spring', "2024-03-01", "2024-06-01"),
    ('What did Ana do last winter?', 'last winter', "2023-12-01", "2024-03-01"),
    ('Which games did we play last fall?', 'last fall', "2023-09-01", "2023-12-01"),
    ('What did you knit last autumn?', 'last autumn', "2023-09-01", "2023-12-01"),
    ('How was the garden in spring?', 'in spring', "2024-03-01", "2024-06-01"),
    ('What did Mateo plant this spring?', 'this spring', "2024-03-01", "2024-06-01"),
    ('What did we do during winter?', 'during winter', "2023-12-01", "2024-03-01"),
    ('What did we do in 2023?', 'in 2023', "2023-01-01", "2024-01-01"),
    ('what did we do in 2022', 'in 2022', "2022-01-01", "2023-01-01"),
    ("In 2019 we moved to Lisbon, didn't we?", 'In 2019', "2019-01-01", "2020-01-01"),
    ('What happened during 2020?', 'during 2020', "2020-01-01", "2021-01-01"),
    ('What was planned for the end of 2022?', 'end of 2022', "2022-01-01", "2023-01-01"),
    ('In 2000 the company moved to Berlin.', 'In 2000', "2000-01-01", "2001-01-01"),
    ('What did I eat yesterday?', 'yesterday', "2024-06-18", "2024-06-19"),
    ('the talk yesterday', 'yesterday', "2024-06-18", "2024-06-19"),
    ('What meetings do I have today?', 'today', "2024-06-19", "2024-06-20"),
    ('What did I do last weekend?', 'last weekend', "2024-06-14", "2024-06-17"),
    ('Any plans this weekend?', 'this weekend', "2024-06-14", "2024-06-17"),
    ('What did Ana say last week?', 'last week', "2024-06-10", "2024-06-17"),
    ('What happened this week?', 'this week', "2024-06-17", "2024-06-24"),
    ('What was Bo up to last month?', 'last month', "2024-05-01", "2024-06-01"),
    ('What did I spend this month?', 'this month', "2024-06-01", "2024-07-01"),
    ('Which trips did we take last year?', 'last year', "2023-01-01", "2024-01-01"),
    ('What have I learned this year?', 'this year', "2024-01-01", "2025-01-01"),
    ('What did I write in the last 3 days?', 'in the last 3 days', "2024-06-16T15:30", "now"),
    ('What did we discuss in the past week?', 'in the past week', "2024-06-12T15:30", "now"),
    ('Anything new over the past 24 hours?', 'over the past 24 hours', "2024-06-18T15:30", "now"),
    ('Which bugs did we fix in the last two weeks?', 'in the last two weeks', "2024-06-05T15:30", "now"),
    ('What did I read in the past 6 months?', 'in the past 6 months', "2023-12-22T15:30", "now"),
    ('What did we cook in the past year?', 'in the past year', "2023-06-20T15:30", "now"),
    ('Who did I meet past week at the fair?', 'past week', "2024-06-12T15:30", "now"),
    ('What did I promise the last 10 days?', 'the last 10 days', "2024-06-09T15:30", "now"),
    ('What did Ana say previous week?', 'previous week', "2024-06-10", "2024-06-17"),
    ('Which bills came previous month?', 'previous month', "2024-05-01", "2024-06-01"),
    ('Which trips did we take previous year?', 'previous year', "2023-01-01", "2024-01-01"),
    ('What did I fix in the previous 3 days?', 'in the previous 3 days', "2024-06-16T15:30",
     "now"),
]


def _when(text: str) -> datetime:
    if text == "now":
        return NOW + timedelta(microseconds=1)
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_the_corpus_is_large_enough() -> None:
    assert len(NOT_TIME) >= 60 and len(TIME) >= 60
    assert len(set(NOT_TIME)) == len(NOT_TIME) and len({t[0] for t in TIME}) == len(TIME)


@pytest.mark.parametrize("sentence", NOT_TIME)
def test_no_window_without_a_time_phrase(sentence: str) -> None:
    assert query_timeframe(sentence, NOW) is None


@pytest.mark.parametrize(("sentence", "phrase", "start", "end"), TIME)
def test_time_phrases_resolve_to_their_window(sentence: str, phrase: str, start: str,
                                              end: str) -> None:
    found = query_timeframe(sentence, NOW)
    assert found is not None
    assert found.phrase == phrase and phrase in sentence
    assert (found.start, found.end) == (_when(start), _when(end))


def test_a_false_alarm_before_a_real_phrase_does_not_hide_it() -> None:
    found = query_timeframe("This may sound odd, but what did we do last May?", NOW)
    assert found is not None and found.phrase == "last May"


@pytest.mark.parametrize(("today", "start", "end"), [
    (datetime(2025, 1, 20, tzinfo=UTC), "2023-12-01", "2024-03-01"),  # in this winter
    (datetime(2024, 12, 2, tzinfo=UTC), "2023-12-01", "2024-03-01"),
    (datetime(2025, 3, 1, tzinfo=UTC), "2024-12-01", "2025-03-01"),  # the day it ended
    (datetime(2024, 11, 30, tzinfo=UTC), "2023-12-01", "2024-03-01"),
])
def test_last_winter_is_the_winter_before_the_current_one(today: datetime, start: str,
                                                          end: str) -> None:
    found = query_timeframe("What did we do last winter?", today)
    assert found is not None
    assert (found.start, found.end) == (_when(start), _when(end))


def test_last_summer_during_summer_is_the_year_before() -> None:
    found = query_timeframe("last summer", datetime(2024, 7, 10, tzinfo=UTC))
    assert found is not None and found.start == _when("2023-06-01")
    found = query_timeframe("last summer", datetime(2024, 10, 10, tzinfo=UTC))
    assert found is not None and found.start == _when("2024-06-01")


def test_windows_are_in_the_clocks_zone_across_daylight_saving() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    now = datetime(2024, 11, 5, 9, tzinfo=berlin)  # winter time (+01:00)
    found = query_timeframe("What did we do in July?", now)
    assert found is not None
    assert found.start == datetime(2024, 7, 1, tzinfo=berlin)
    assert found.start.utcoffset() == timedelta(hours=2)  # July is summer time
    assert found.start.astimezone(UTC) == datetime(2024, 6, 30, 22, tzinfo=UTC)
    rolling = query_timeframe("anything in the past 24 hours?",
                              datetime(2024, 10, 27, 12, tzinfo=berlin))  # clocks went back
    assert rolling is not None
    assert rolling.end.astimezone(UTC) - rolling.start.astimezone(UTC) == timedelta(
        hours=24, microseconds=1)


def test_absurd_numbers_give_no_window_rather_than_an_error() -> None:
    assert query_timeframe("what happened 999 years ago", datetime(900, 1, 1, tzinfo=UTC)) \
        is None


def test_recall_exports_the_names() -> None:
    assert RecallQueryTime is QueryTime and recall_query_timeframe is query_timeframe


@pytest.mark.parametrize("module", ["htm_core.querytime", "htm_core.timeframe", "htm_core.clock"])
def test_the_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def test_the_quick_scan_never_changes_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``query_timeframe`` skips the patterns when a quick scan finds no word a time phrase
    could hold; every sentence of this file, and thousands made of time words, fillers,
    digits, punctuation and odd letters, gets the same window as with every pattern tried."""
    import random

    from htm_core import querytime

    pieces = ["last", "past", "this", "the", "in", "during", "early", "mid", "late", "since",
              "may", "May", "March", "mar", "sept", "Sept.", "june", "spring", "fall", "Fall",
              "summer", "of", "end", "2023", "1999", "2000", "2024.1", "3", "two", "a", "few",
              "days", "day", "weeks", "month", "months", "year", "ago", "yesterday", "today",
              "weekend", "week", "words", "and", "we", "did", "my", "Ana", "dog", "laſt",
              "ＭＡＹ", "２０２３", "_last", "last_week", "x2023", "lastweek", "?", ",", ".", "!",
              "'s", "—", "on", "3rd", "21st", "31", "February,", "Sunday", "friday", "before",
              "after", "between", "to", "2023-05-07", "2023-02-30", "1,2023"]
    rng = random.Random(21)
    made = [" ".join(rng.choice(pieces) for _ in range(rng.randint(1, 7))) for _ in range(3000)]
    sentences = [*NOT_TIME, *(t[0] for t in TIME), *NO_DAY, *(t[0] for t in DAYS), *made]
    quick = [query_timeframe(s, NOW) for s in sentences]
    skipped = sum(not querytime._may_hold_time(s) for s in sentences)
    monkeypatch.setattr(querytime, "_may_hold_time", lambda query: True)
    full = [query_timeframe(s, NOW) for s in sentences]
    assert quick == full
    assert sum(w is not None for w in full) > 500  # the sentences do hold time phrases
    assert skipped > 100  # and the scan leaves many out


@pytest.mark.parametrize("phrase", ["previous week", "previous month", "previous year",
                                    "past week", "the last week", "the previous 3 days",
                                    "past 24 hours"])
def test_a_phrase_both_readers_know_means_one_window(phrase: str) -> None:
    """A time phrase in a query and the same words as ``timeframe=`` give the same window."""
    from htm_core.timeframe import parse_timeframe

    found = query_timeframe(f"What happened {phrase}?", NOW)
    assert found is not None and found.phrase.endswith(phrase)
    assert (found.start, found.end) == parse_timeframe(phrase, clock=lambda: NOW)


#: Day phrases, in every common English form, against NOW (Wednesday 19 June 2024):
#: (sentence, the phrase found, start, end). A day without a year is the latest such day up
#: to NOW; a span named before a day runs through that day.
DAYS = [
    ('What did Gina find for her store on 1 February, 2023?', 'on 1 February, 2023',
     "2023-02-01", "2023-02-02"),
    ('What happened on 1 February 2023?', 'on 1 February 2023', "2023-02-01", "2023-02-02"),
    ('What did Tim read on 8th December, 2023?', 'on 8th December, 2023', "2023-12-08",
     "2023-12-09"),
    ('What did we cook on the 3rd of May?', 'on the 3rd of May', "2024-05-03", "2024-05-04"),
    ('Who called on the 3rd of May, 2022?', 'on the 3rd of May, 2022', "2022-05-03",
     "2022-05-04"),
    ('What did Bo say on 21st of Sept. 2022?', 'on 21st of Sept. 2022', "2022-09-21",
     "2022-09-22"),
    ('What did Mel paint on October 13, 2023?', 'on October 13, 2023', "2023-10-13",
     "2023-10-14"),
    ('What did we do on May 7th 2023?', 'on May 7th 2023', "2023-05-07", "2023-05-08"),
    ('Where was the photo from December 1,2023 taken?', 'December 1,2023', "2023-12-01",
     "2023-12-02"),
    ('What did Ana buy on Jan 5?', 'on Jan 5', "2024-01-05", "2024-01-06"),
    ('What did Ana buy on June 19?', 'on June 19', "2024-06-19", "2024-06-20"),
    ('What did Ana buy on June 20?', 'on June 20', "2023-06-20", "2023-06-21"),  # not yet
    ('What did we do on may 3?', 'on may 3', "2024-05-03", "2024-05-04"),
    ('What did we do on the 2nd of march?', 'on the 2nd of march', "2024-03-02", "2024-03-03"),
    ('Where were we on 29 February?', 'on 29 February', "2024-02-29", "2024-03-01"),
    ('What happened on 2023-05-07?', 'on 2023-05-07', "2023-05-07", "2023-05-08"),
    ('What did we do on Sunday, 21 May 2023?', 'on Sunday, 21 May 2023', "2023-05-21",
     "2023-05-22"),
    ('What did we do on Thursday May 25th?', 'on Thursday May 25th', "2024-05-25",
     "2024-05-26"),
    ('What happened on Sunday before 25 May 2023?', 'on Sunday before 25 May 2023',
     "2023-05-21", "2023-05-26"),
    ('What was shown on the Sunday before October 25, 2022?',
     'on the Sunday before October 25, 2022', "2022-10-23", "2022-10-26"),
    ('Who came the Friday after 3 May 2024?', 'the Friday after 3 May 2024', "2024-05-10",
     "2024-05-11"),
    ('What did we eat the day before 3 May 2023?', 'the day before 3 May 2023', "2023-05-02",
     "2023-05-04"),
    ('What did we eat the day after May 3, 2023?', 'the day after May 3, 2023', "2023-05-04",
     "2023-05-05"),
    ('What did John do the week before August 3, 2023 involving his kids?',
     'the week before August 3, 2023', "2023-07-27", "2023-08-04"),
    ('What pet did she get two weeks before August 11, 2023?',
     'two weeks before August 11, 2023', "2023-07-28", "2023-08-12"),
    ('What did we plan 3 days after 1 March 2023?', '3 days after 1 March 2023', "2023-03-02",
     "2023-03-05"),
    ('Who visited in the week of 5 June 2024?', 'the week of 5 June 2024', "2024-06-03",
     "2024-06-10"),
    ('Who visited the weekend of 5 June 2024?', 'the weekend of 5 June 2024', "2024-06-07",
     "2024-06-10"),
    ('What did Maria do last weekend before April 10, 2023?',
     'last weekend before April 10, 2023', "2023-04-07", "2023-04-11"),
    ('What was the issue last week,as mentioned on November 6, 2023?',
     'last week,as mentioned on November 6, 2023', "2023-10-30", "2023-11-07"),
    ('What did Joanna finish last Friday on 23 January, 2022?',
     'last Friday on 23 January, 2022', "2022-01-21", "2022-01-24"),
    ('Where was John between August 11 and August 15 2023?',
     'between August 11 and August 15 2023', "2023-08-11", "2023-08-16"),
    ('Where were we from 30 December 2022 to 2 January 2023?',
     'from 30 December 2022 to 2 January 2023', "2022-12-30", "2023-01-03"),
    ('Where were we from December 30 to January 2?', 'from December 30 to January 2',
     "2023-12-30", "2024-01-03"),
    ('What have I fixed since 3 May?', 'since 3 May', "2024-05-03", "now"),
    ('What did I cook last Friday?', 'last Friday', "2024-06-14", "2024-06-15"),
    ('What did I cook last Wednesday?', 'last Wednesday', "2024-06-12", "2024-06-13"),
    ('How many games had Nate won by July 10, 2022?', 'July 10, 2022', "2022-07-10",
     "2022-07-11"),
    ('What did Ana say on the evening of 7 July, 2023 about it?', '7 July, 2023', "2023-07-07",
     "2023-07-08"),
]

#: Dates that do not exist and odd inputs: no window at all, never an error, and never the
#: month of the date instead.
NO_DAY = [
    'What happened on 31 February 2023?',
    'What happened on 31 February?',
    'What did we do on February 30, 2024 and after?',
    'What happened on 0 May 2023?',
    'What happened on May 32, 2023?',
    'What happened on 2023-02-30?',
    'What happened on 2023-13-01?',
    'Where were we between 7 May 2023 and 2 May 2023?',
    'I bought 2 March tickets for the show.',
    'The soldiers march 3 miles a day.',
    'Those 2 may work, the rest will not.',
    'Chapter 12 May cover the basics.',
    'Add 3 Jun cards to the deck.',
    'It happened the 4 may be true.',
    'My last Friday at the old job was fun.',
    'We met on Friday the thirteenth.',
]


@pytest.mark.parametrize(("sentence", "phrase", "start", "end"), DAYS)
def test_day_phrases_resolve_to_the_day_or_the_span_they_name(sentence: str, phrase: str,
                                                               start: str, end: str) -> None:
    found = query_timeframe(sentence, NOW)
    assert found is not None
    assert found.phrase == phrase and phrase in sentence
    assert (found.start, found.end) == (_when(start), _when(end))


@pytest.mark.parametrize("sentence", NO_DAY)
def test_impossible_or_odd_days_give_no_window(sentence: str) -> None:
    assert query_timeframe(sentence, NOW) is None


def test_a_day_phrase_hides_no_later_time_phrase() -> None:
    found = query_timeframe("Is 31 February real, and what did we do last May?", NOW)
    assert found is not None and found.phrase == "last May"


def test_a_day_is_read_in_the_clocks_zone() -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    found = query_timeframe("What did we do on 3 May 2023?", datetime(2024, 1, 1, tzinfo=tokyo))
    assert found is not None
    assert (found.start, found.end) == (datetime(2023, 5, 3, tzinfo=tokyo),
                                        datetime(2023, 5, 4, tzinfo=tokyo))


def test_a_day_without_a_year_is_the_latest_one_up_to_now() -> None:
    """29 February without a year, on a date of a year that has none, is the last leap day."""
    found = query_timeframe("Where were we on 29 February?", datetime(2023, 6, 1, tzinfo=UTC))
    assert found is not None and found.start == _when("2020-02-29")
    found = query_timeframe("What did we do on 3 May?", datetime(2024, 5, 3, 8, tzinfo=UTC))
    assert found is not None and found.start == _when("2024-05-03")  # today counts
    found = query_timeframe("What did we do on 3 May?", datetime(2024, 5, 2, 8, tzinfo=UTC))
    assert found is not None and found.start == _when("2023-05-03")


def test_the_time_phrase_leaves_the_words_of_a_day_query() -> None:
    """Recall searches the query less its time phrase: the whole day phrase goes, not its
    month alone ("on 1" would be left as a search word)."""
    found = query_timeframe("What did Gina find on 1 February, 2023?", NOW)
    assert found is not None
    assert "What did Gina find on 1 February, 2023?".replace(found.phrase, " ").split() == \
        ["What", "did", "Gina", "find", "?"]
