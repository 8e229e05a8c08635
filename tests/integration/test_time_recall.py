"""Time in recall on both backends: ordinary words in a query are not read as
dates, rolling timeframes end at now, naive times follow the local zone's daylight-saving
rules, and the neighbor step only brings in memories that gained a real bonus."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone

import pytest

from htm_core import HTM, FrozenClock, RetrievalConfig
from htm_core.recall import RankedId, reciprocal_rank_fusion

UTC = timezone.utc
NOW = datetime(2024, 6, 19, 15, 30, tzinfo=UTC)

FILLER = ["Bo: the weather in the park was odd today", "Bo: we tried a new noodle place",
          "Bo: my train was late again", "Bo: the neighbors are painting their fence",
          "Bo: I watched a documentary about whales", "Bo: the office coffee ran out",
          "Bo: my sister called about the wedding", "Bo: I fixed the squeaky door"]


def _fill(htm: HTM, when: Callable[[int], datetime]) -> None:
    for i, text in enumerate(FILLER):
        htm.add(text, created_at=when(i))


@pytest.mark.parametrize(("query", "answer", "decoys"), [
    ("this may sound odd, but what is my cat's name?", "Ana: our cat's name is Miso",
     lambda i: datetime(2024, 5, 2 + 3 * i, 9, tzinfo=UTC)),  # memories from May
    ("who needs a list of 2000 words?", "Kenji: my teacher needs a list of 2000 words",
     lambda i: datetime(2000, 1 + i, 10, 9, tzinfo=UTC)),  # memories from the year 2000
])
def test_ordinary_words_do_not_boost_a_month_or_year(htm_factory: Callable[..., HTM], query: str,
                                                    answer: str,
                                                    decoys: Callable[[int], datetime]) -> None:
    htm = htm_factory(clock=FrozenClock(NOW))
    htm.add(answer, created_at=datetime(2024, 2, 1, 9, tzinfo=UTC))
    _fill(htm, decoys)
    hits = htm.recall(query, limit=3)
    assert hits[0].memory.content == answer
    assert not any(arm.endswith("@time") for hit in hits for arm in hit.ranks)


@pytest.mark.parametrize("timeframe", ["last 7 days", "the last 7 days", "past 24 hours",
                                       timedelta(days=2)])
def test_rolling_timeframes_end_at_now(htm_factory: Callable[..., HTM], timeframe: object) -> None:
    clock = FrozenClock(NOW)
    htm = htm_factory(clock=clock)
    htm.add("Ana: the tomato seedlings sprouted", created_at=NOW - timedelta(hours=20))
    htm.add("Ana: the tomato harvest will be huge", created_at=NOW + timedelta(days=1))
    htm.add("Ana: tomato soup tonight", created_at=NOW)
    htm.add("Ana: tomato plants bought", created_at=NOW - timedelta(days=9))
    found = {h.memory.content for h in htm.recall("tomato", timeframe=timeframe)}
    assert found == {"Ana: the tomato seedlings sprouted", "Ana: tomato soup tonight"}


def test_calendar_and_rolling_phrases_differ(htm_factory: Callable[..., HTM]) -> None:
    """On a Wednesday, a memory from Monday is in "the last 7 days" but not "last week"."""
    htm = htm_factory(clock=FrozenClock(NOW))
    htm.add("Ana: bought a violin", created_at=NOW - timedelta(days=2))
    htm.add("Ana: violin lesson booked", created_at=NOW - timedelta(days=6))
    assert {h.memory.content for h in htm.recall("violin", timeframe="last week")} == {
        "Ana: violin lesson booked"}
    assert len(htm.recall("violin", timeframe="the last 7 days")) == 2


def test_naive_times_and_dates_follow_the_local_zone_all_year(
        htm_factory: Callable[..., HTM], berlin_machine: None) -> None:
    htm = htm_factory(clock=None)  # the default clock: now, in the machine's zone
    summer = htm.add("Ana: summer picnic", created_at=datetime(2024, 7, 15, 10))
    winter = htm.add("Ana: winter picnic", created_at=datetime(2024, 1, 15, 10))
    assert summer.created_at == datetime(2024, 7, 15, 8, tzinfo=UTC)
    assert winter.created_at == datetime(2024, 1, 15, 9, tzinfo=UTC)
    htm.add("Ana: midnight picnic", created_at=datetime(2024, 7, 14, 22, 30, tzinfo=UTC))
    htm.add("Ana: late picnic", created_at=datetime(2024, 7, 14, 21, 30, tzinfo=UTC))
    day = {h.memory.content for h in htm.recall("picnic", timeframe="2024-07-15")}
    assert day == {"Ana: summer picnic", "Ana: midnight picnic"}  # 00:30 local is that day


def _text_led(arms: Mapping[str, Sequence[int]], k: int) -> list[RankedId]:
    """A fusion that keeps the full-text arm only: a short candidate list."""
    return reciprocal_rank_fusion({"fulltext": arms["fulltext"]}, k)


def test_neighbors_enter_only_with_a_real_bonus(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(clock=FrozenClock(NOW),
                      retrieval=RetrievalConfig(fusion=_text_led, neighbors=1))
    day = NOW - timedelta(days=3)
    htm.add("Ana: we adopted a beagle puppy", created_at=day)
    htm.add("Bo: what's his name?", created_at=day + timedelta(seconds=30))
    later = day + timedelta(days=1)
    htm.add("Bo: the weather turned", created_at=later)
    htm.add("Bo: a beagle barked all night", created_at=later + timedelta(seconds=30))
    htm.add("Bo: I need lunch", created_at=later + timedelta(seconds=60))
    hits = htm.recall("beagle puppy", limit=10)
    contents = [h.memory.content for h in hits]
    assert contents == ["Ana: we adopted a beagle puppy", "Bo: what's his name?",
                        "Bo: a beagle barked all night"]
    # A neighbor that entered ranks above the weakest real hit (Hit.score is relevance on
    # the 0..1 scale: never below the score of a hit ranked after it).
    weakest = max(i for i, h in enumerate(hits) if "fulltext" in h.ranks)
    assert all(i < weakest for i, h in enumerate(hits) if "neighbor" in h.ranks)
    assert all(h.score >= hits[weakest].score for h in hits if "neighbor" in h.ranks)


@pytest.mark.parametrize("query", ["What did Ana pick up on 3 May 2024?",
                                   "What did Ana pick up on the 3rd of May?",
                                   "What did Ana pick up on Friday, May 3rd?"])
def test_a_day_in_the_query_lifts_that_day_not_its_month(htm_factory: Callable[..., HTM],
                                                         query: str) -> None:
    """The memory from the day named rises above memories of other days of the same month
    that share more of the query's words (read as the month, the window held them all)."""
    htm = htm_factory(clock=FrozenClock(NOW))
    answer = htm.add("Ana: collected the new bike from the shop",
                     created_at=datetime(2024, 5, 3, 18, tzinfo=UTC))
    for day, text in [(10, "Ana: I will pick up the bike helmet soon"),
                      (20, "Ana: pick up the kids, then pick up the bike"),
                      (27, "Ana: remind me to pick up bread")]:
        htm.add(text, created_at=datetime(2024, 5, day, 9, tzinfo=UTC))
    _fill(htm, lambda i: datetime(2024, 5, 5 + 3 * i, 12, tzinfo=UTC))
    hits = htm.recall(query, limit=3)
    assert hits[0].memory.id == answer.id
    assert "vector@time" in hits[0].ranks
    assert all("vector@time" not in hit.ranks for hit in hits[1:])
