"""Time expressions inside a recall query: "last May", "two weeks ago", "on 3 May 2023".

Hybrid recall (:func:`htm_core.recall.search`) asks :func:`query_timeframe` for the first
time expression in the query and, when there is one, runs both arms again inside that
window. A false positive costs recall, so only real time phrases count ("this may sound
odd" is not May, "in 2000 words" not a year). The rules, and the same vocabulary as
:mod:`htm_core.timeframe`: docs/concepts.md ("Time").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

from .clock import to_aware

__all__ = ["QueryTime", "query_timeframe"]

_MONTHS = {name: i + 1 for i, names in enumerate([
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
    ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sept", "sep"),
    ("october", "oct"), ("november", "nov"), ("december", "dec")]) for name in names}
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "few": 3, "couple of": 2,
            "several": 4}
_NUMBER_RE = r"\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of|several"
_UNIT_DAYS = {"hour": 1 / 24, "day": 1, "week": 7, "month": 30, "year": 365}
_YEAR_RE = r"(?:19|20)\d{2}(?![.:/]\d)"  # not a version such as 2024.1
_WEEKDAYS = {name: i for i, name in enumerate(
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
_WEEKDAY_RE = "|".join(_WEEKDAYS)


def _date_re(tag: str) -> str:
    """One day of the calendar, its groups named with ``tag``: "1 February, 2023", "the 3rd of
    May", "May 7th 2023", "December 1,2023", "Sunday, 25 May 2023", "2023-05-07"."""
    ordinal = r"(?:st|nd|rd|th)?"
    return (rf"(?:(?:{_WEEKDAY_RE}),?\s+)?(?:the\s+)?"
            rf"(?:(?P<d1{tag}>\d{{1,2}}){ordinal}(?:\s+of)?\s+(?P<m1{tag}>{_MONTH_RE})\b\.?"
            rf"|(?P<m2{tag}>{_MONTH_RE})\.?\s+(?P<d2{tag}>\d{{1,2}}){ordinal}\b)"
            rf"(?:,?\s*(?P<y{tag}>{_YEAR_RE})\b)?"
            rf"|(?P<iy{tag}>(?:19|20)\d{{2}})-(?P<im{tag}>\d{{2}})-(?P<id{tag}>\d{{2}})\b")


#: What may come before a day and makes the window a span named from it: "the day before",
#: "two weeks before", "the Sunday before", "the week of", "last week, as mentioned on".
_ANCHORED = (rf"(?:(?:the|last)\s+)?(?:(?P<n>{_NUMBER_RE})\s+)?(?P<unit>day|week|weekend|month)s?"
             rf"\s+(?P<dir>before|after|prior\s+to)\s+"
             rf"|(?:the\s+)?(?:last\s+)?(?P<wd>{_WEEKDAY_RE})\s+(?P<wdir>before|after)\s+"
             rf"|(?:the\s+)?(?P<of>week|weekend)\s+of\s+"
             rf"|(?P<since>since)\s+"
             rf"|last\s+(?P<last>week|weekend|{_WEEKDAY_RE}),?\s*"
             rf"(?:as\s+(?:mentioned|said)\s+)?on\s+")

#: Words that mean a month or season, but also something else ("this may sound odd").
_AMBIGUOUS = {"may", "march", "mar", "spring", "fall"}
#: Words that can follow a time phrase but not the modal "may" or the verb "march".
_FOLLOWERS = frozenset("""
    and or but nor so yet then when while where whereas because though although if
    with without at on in to for from before after during since until till by about around
    did do does was were had have has i we you he she they it ago again too also there
    the a an my your his her our their
    """.split())
_DETERMINER_BEFORE = re.compile(
    r"\b(?:the|a|an|my|your|his|her|our|their|its|that|whose|every|each|this)\s+$", re.I)
_NEXT_WORD = re.compile(r"\s*([A-Za-z]+)")

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    # The day patterns come first: a phrase they share with another (the "February, 2023"
    # of "on 1 February, 2023") is read as the day.
    ("range", re.compile(rf"\b(?:between|from)\s+(?:{_date_re('a')})\s+"
                         rf"(?:and|to|until|till|through)\s+(?:{_date_re('b')})", re.I)),
    ("day", re.compile(rf"\b(?:on\s+)?(?:{_ANCHORED})?(?:on\s+)?(?:{_date_re('')})", re.I)),
    ("rolling", re.compile(rf"\b(?:(?:in|over|during)\s+)?(?:the\s+)?"
                           rf"(?:last|past|previous)\s+"
                           rf"({_NUMBER_RE})\s+(hour|day|week|month|year)s\b|"
                           r"\b(?:(?:in|over|during)\s+)?(?:the\s+(?:last|past)|past)\s+"
                           r"(week|month|year)\b(?!\s+of\b)", re.I)),
    ("month_year", re.compile(rf"\b(?:(?:in|during|of|on)\s+)?(?:(early|mid|late)\s+)?"
                              rf"({_MONTH_RE})\.?,?\s+({_YEAR_RE})\b", re.I)),
    ("rel_month", re.compile(rf"\b(last|this|in|during|early|mid|late|since)\s+({_MONTH_RE})\b"
                             r"(?!\s*\d)", re.I)),
    ("ago", re.compile(rf"\b({_NUMBER_RE})\s+(day|week|month|year)s?\s+ago\b", re.I)),
    ("season", re.compile(r"\b(last|this|in|during)\s+(spring|summer|autumn|fall|winter)\b",
                          re.I)),
    ("year", re.compile(rf"\b(?:(?:in|during)|(?:spring|summer|autumn|fall|winter|end|start|"
                        rf"beginning|middle|rest)\s+of)\s+({_YEAR_RE})\b", re.I)),
    ("named", re.compile(r"\b(yesterday|today|last weekend|this weekend|last week|this week|"
                         r"last month|this month|last year|this year|"
                         r"previous week|previous month|previous year)\b", re.I)),
    ("weekday", re.compile(rf"\blast\s+({_WEEKDAY_RE})\b", re.I)),
]
_DAY_KINDS = frozenset({"day", "range"})
#: What every day phrase holds (a number beside a month's name, or an ISO date): the day
#: patterns, slower than the others, are tried only on a query where this is found.
_DAY_CORE = re.compile(rf"\d(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTH_RE})\b"
                       rf"|\b(?:{_MONTH_RE})\.?\s+\d|\d{{4}}-\d\d-\d\d", re.I)

#: Words one of which every match of a pattern holds, as a whole word (a cue, a month or a
#: season); a year is the other way in. See :func:`_may_hold_time`.
_CUES = frozenset({"last", "past", "previous", "this", "ago", "yesterday", "today", *_SEASONS,
                   *_MONTHS})
_LETTERS = re.compile(r"[a-z]+")
_YEAR_DIGITS = re.compile(r"(?:19|20)\d{2}")


def _may_hold_time(query: str) -> bool:
    """False when no pattern can match ``query``, found in a quick scan (most queries hold
    no time phrase, and trying each pattern costs several times more).

    Every pattern holds a cue word, a month or a season between word boundaries, or a
    year's digits; between word boundaries means between characters that are not letters,
    so such a word is one of the query's runs of letters. Only ASCII is judged here (with
    ``re.I``, a pattern also matches some other letters, such as the long s).
    """
    if not query.isascii():
        return True
    return not _CUES.isdisjoint(_LETTERS.findall(query.lower())) or \
        _YEAR_DIGITS.search(query) is not None


@dataclass(frozen=True)
class QueryTime:
    """A time expression found in a query: the window it means and the words it used."""

    start: datetime
    end: datetime
    phrase: str


def query_timeframe(query: str, now: datetime) -> QueryTime | None:
    """The first time expression in ``query``, resolved against ``now``, or None.

    Understands days ("on 1 February, 2023", "the 3rd of May", "May 7th 2023", "2023-05-07")
    and spans named from them ("the Sunday before 25 May 2023", "the week of ...", "between
    August 11 and August 15 2023"), month names with a year ("June 2023"), relative months
    ("last May", "in March", "early July"), "N days/weeks/months ago", seasons ("last
    summer"), "in 2023", "yesterday", "last Friday", "last weekend", "last/previous
    week/month/year", "this ...", and rolling windows ending now ("the last 3 days", "the
    past week").

    >>> from datetime import timezone
    >>> now = datetime(2024, 3, 10, 12, tzinfo=timezone.utc)
    >>> t = query_timeframe("What did Ana do last May?", now)
    >>> t.start.date().isoformat(), t.end.date().isoformat(), t.phrase
    ('2023-05-01', '2023-06-01', 'last May')
    >>> t = query_timeframe("What did Ana find on 1 February, 2023?", now)
    >>> t.start.date().isoformat(), t.end.date().isoformat(), t.phrase
    ('2023-02-01', '2023-02-02', 'on 1 February, 2023')
    >>> query_timeframe("This may sound odd, but what is my cat's name?", now) is None
    True
    """
    if not _may_hold_time(query):
        return None
    now = to_aware(now)
    found: list[tuple[int, str, re.Match[str]]] = []
    dated = _DAY_CORE.search(query) is not None
    for kind, pattern in _PATTERNS:
        if kind in _DAY_KINDS and not dated:
            continue
        m = next((m for m in pattern.finditer(query) if _is_time_phrase(kind, m, query)), None)
        if m is not None:
            found.append((m.start(), kind, m))
    read_to = 0  # a phrase that means no window (31 February) hides the phrases inside it
    for _, kind, m in sorted(found, key=lambda f: f[0]):
        if m.start() < read_to:
            continue
        try:
            window = _resolve(kind, m, now)
        except (ValueError, OverflowError):  # a date before year 1 or after 9999
            window = None
        if window is not None:
            return QueryTime(window[0], window[1], m.group(0))
        read_to = m.end()
    return None


def _is_time_phrase(kind: str, m: re.Match[str], query: str) -> bool:
    """Whether the match ``m`` of pattern ``kind`` is a time phrase in its sentence."""
    first = m.group(0).split()[0].lower()
    if first in ("last", "past", "previous", "this") and \
            _DETERMINER_BEFORE.search(query, 0, m.start()):
        return False  # "the last year of school", "my last fall"
    rest = query[m.end():]
    if kind in _DAY_KINDS:
        return _is_day_phrase(m, rest)
    if kind in ("rel_month", "season"):
        word = m.group(2)
        if word.lower() in _AMBIGUOUS and not (kind == "rel_month" and word[0].isupper()):
            return _ends_phrase(rest)
    if kind in ("year", "month_year"):
        following = _NEXT_WORD.match(rest)
        word = following.group(1) if following is not None else ""
        # "in 2000 words": a lower-case word right after the number makes it a count.
        if word.islower() and word not in _FOLLOWERS:
            return False
    return True


def _is_day_phrase(m: re.Match[str], rest: str) -> bool:
    """Whether a day match is a date: one with a year always is; without one, "2 March
    tickets" is a count and "they march 3 miles" a verb, so a lower-case word may not follow
    the day, and "may", "march" and "mar" in lower case need "on", "the", "of" or an ordinal."""
    tag = "b" if m.re.groupindex.get("yb") else ""
    if m.group("y" + tag) or m.group("iy" + tag):
        return True
    following = _NEXT_WORD.match(rest)
    word = following.group(1) if following is not None else ""
    if word.islower() and word not in _FOLLOWERS:
        return False
    month = m.group("m1" + tag) or m.group("m2" + tag)
    return not (month.islower() and month in _AMBIGUOUS) or \
        _VOUCHED_DAY.search(m.group(0)) is not None


_VOUCHED_DAY = re.compile(r"^(?:on|the)\b|\d(?:st|nd|rd|th)\b|\bof\b", re.I)


def _ends_phrase(rest: str) -> bool:
    """Whether ``rest`` (the text after a month or season) can follow a time phrase."""
    stripped = rest.lstrip()
    if not stripped or not stripped[0].isalpha():
        return True  # the end, punctuation or "'s"
    word = _NEXT_WORD.match(rest)
    return word is not None and word.group(1).lower() in _FOLLOWERS


def _midnight(d: date, tz: tzinfo | None) -> datetime:
    return datetime.combine(d, time(), tzinfo=tz)


def _month_window(year: int, month: int, tz: tzinfo | None) -> tuple[datetime, datetime]:
    nxt = date(year + month // 12, month % 12 + 1, 1)
    return _midnight(date(year, month, 1), tz), _midnight(nxt, tz)


def _count(word: str) -> int:
    word = re.sub(r"\s+", " ", word.lower())
    return int(word) if word.isdigit() else _NUMBERS.get(word, 1)


def _resolve(kind: str, m: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    from .timeframe import parse_timeframe, rolling_window, through_now

    tz = now.tzinfo
    today = now.date()
    if kind in _DAY_KINDS:
        start, end = _day_span(m, now) if kind == "day" else _range_span(m, today)
        return _midnight(start, tz), end if isinstance(end, datetime) else _midnight(end, tz)
    if kind == "weekday":
        day = _weekday_before(today, _WEEKDAYS[m.group(1).lower()])
        return _midnight(day, tz), _midnight(day + _DAY, tz)
    if kind == "rolling":
        n, unit = (_count(m.group(1)), m.group(2)) if m.group(2) else (1, m.group(3))
        if n <= 0:
            return None
        return rolling_window(now, timedelta(days=n * _UNIT_DAYS[unit.lower()]))
    if kind == "month_year":
        return _month_window(int(m.group(3)), _MONTHS[m.group(2).lower()], tz)
    if kind == "rel_month":
        word, month = m.group(1).lower(), _MONTHS[m.group(2).lower()]
        if word == "this":
            year = today.year
        elif word == "last":
            year = today.year if month < today.month else today.year - 1
        else:
            year = today.year if month <= today.month else today.year - 1
        start, end = _month_window(year, month, tz)
        return (start, through_now(now)) if word == "since" else (start, end)
    if kind == "ago":
        word = m.group(1).lower()
        days = _UNIT_DAYS[m.group(2).lower()]
        center = now - timedelta(days=_count(word) * days)
        half = timedelta(days=max(2, days * (1 if word in ("few", "several") else 0.75)))
        return center - half, min(now, center + half)
    if kind == "season":
        word, first = m.group(1).lower(), _SEASONS[m.group(2).lower()]
        # The latest season of that name to have begun by today ...
        year = today.year if date(today.year, first, 1) <= today else today.year - 1
        begins, ends = _season(year, first)
        if word == "last" and today < ends:
            begins, ends = _season(year - 1, first)  # ... or, for "last", the one before it.
        return _midnight(begins, tz), _midnight(ends, tz)
    if kind == "year":
        year = int(m.group(1))
        return _midnight(date(year, 1, 1), tz), _midnight(date(year + 1, 1, 1), tz)
    phrase = m.group(1).lower()
    if phrase in ("last weekend", "this weekend"):
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)
        if phrase == "last weekend" and saturday + timedelta(days=2) > today:
            saturday -= timedelta(days=7)
        return _midnight(saturday - timedelta(days=1), tz), _midnight(saturday + timedelta(days=2), tz)
    low, high = parse_timeframe(phrase, clock=lambda: now)
    if low is None or high is None:
        return None
    return low, high


def _season(year: int, first: int) -> tuple[date, date]:
    """The three months from ``first`` of ``year`` (winter runs into the next year)."""
    end_month = first + 3
    return date(year, first, 1), date(year + (end_month > 12), (end_month - 1) % 12 + 1, 1)


_DAY = timedelta(days=1)
_SPAN_DAYS = {"day": 1, "week": 7, "month": 30}


def _day(m: re.Match[str], tag: str, today: date, year: int | None = None) -> date:
    """The day the groups ``tag`` of ``m`` name; without a year in them, in ``year`` or else
    the latest such day up to ``today``. ValueError when there is no such day (31 February)."""
    if m.group("iy" + tag):
        return date(int(m.group("iy" + tag)), int(m.group("im" + tag)), int(m.group("id" + tag)))
    month = _MONTHS[(m.group("m1" + tag) or m.group("m2" + tag)).lower()]
    number = int(m.group("d1" + tag) or m.group("d2" + tag))
    if m.group("y" + tag):
        return date(int(m.group("y" + tag)), month, number)
    if year is not None:
        return date(year, month, number)
    for back in range(9):  # 29 February comes back within eight years
        try:
            day = date(today.year - back, month, number)
        except ValueError:
            continue
        if day <= today:
            return day
    raise ValueError(f"no day {number} in month {month}")


def _weekday_before(day: date, weekday: int) -> date:
    """The last ``weekday`` (0 = Monday) before ``day``."""
    return day - timedelta(days=(day.weekday() - weekday - 1) % 7 + 1)


def _weekend_before(day: date) -> date:
    """The Friday that begins the last weekend (Friday to Sunday) over before ``day``."""
    saturday = day - timedelta(days=(day.weekday() - 5) % 7)
    if saturday + 2 * _DAY > day:
        saturday -= 7 * _DAY
    return saturday - _DAY


def _day_span(m: re.Match[str], now: datetime) -> tuple[date, date | datetime]:
    """The days a day phrase means, ``[start, end)``: the day itself, or the span named from
    it. A span before the day runs to the end of that day (what was said on 25 October about
    the Sunday before it is dated 25 October); "since" runs to now."""
    day = _day(m, "", now.date())
    after = day + _DAY
    if m.group("unit"):
        unit, back = m.group("unit").lower(), m.group("dir").lower() != "after"
        count = _count(m.group("n")) if m.group("n") else 1
        if unit == "weekend":
            friday = _weekend_before(day) - 7 * (count - 1) * _DAY if back else \
                day + timedelta(days=(4 - day.weekday()) % 7 or 7)
            return (friday, after) if back else (max(friday, after), friday + 3 * _DAY)
        length = timedelta(days=count * _SPAN_DAYS[unit])
        return (day - length, after) if back else (after, after + length)
    if m.group("wd"):
        weekday = _WEEKDAYS[m.group("wd").lower()]
        if m.group("wdir").lower() == "before":
            return _weekday_before(day, weekday), after
        first = day + timedelta(days=(weekday - day.weekday() - 1) % 7 + 1)
        return first, first + _DAY
    if m.group("of"):
        if m.group("of").lower() == "week":
            monday = day - timedelta(days=day.weekday())
            return monday, monday + 7 * _DAY
        weekday = day.weekday()  # the weekend nearest the day: Monday and Tuesday look back
        saturday = day + timedelta(days=5 - weekday if weekday >= 2 else -weekday - 2)
        return saturday - _DAY, saturday + 2 * _DAY
    if m.group("since"):
        from .timeframe import through_now

        return day, through_now(now)
    if m.group("last"):
        last = m.group("last").lower()
        if last == "week":
            return day - timedelta(days=day.weekday() + 7), after
        if last == "weekend":
            return _weekend_before(day), after
        return _weekday_before(day, _WEEKDAYS[last]), after
    return day, after


def _range_span(m: re.Match[str], today: date) -> tuple[date, date]:
    """The days from the first day of a range through the second; a first day without a
    year takes the second's ("between August 11 and August 15 2023")."""
    last = _day(m, "b", today)
    first = _day(m, "a", today, None if m.group("ya") or m.group("iya") else last.year)
    if first > last and not (m.group("ya") or m.group("iya")):
        first = _day(m, "a", today, last.year - 1)
    if first > last:
        raise ValueError("a range that ends before it begins")
    return first, last + _DAY
