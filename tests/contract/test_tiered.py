"""Tiered recall and the tiered context over day, week and month digests, on both backends.

The digests are written by hand in the agreed shape (benchmarks/_digests.py), so these
tests pin the navigation, not how a digest's text is chosen.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

from benchmarks._digests import write_digests
from htm_core import HTM, FrozenClock
from htm_core.errors import UnknownStrategyError
from htm_core.explain import explain_recall

pytestmark = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)

START = datetime(2024, 3, 4, 10, 0, tzinfo=timezone.utc)  # a Monday
TOPICS = ["garden tomatoes", "piano lessons", "kitchen tiles", "bicycle repair",
          "tax forms", "venue for the wedding", "thesis chapter"]


def _history(htm: HTM, clock: FrozenClock, users: tuple[str, ...] = ("ada", "Ada")) -> None:
    """Eight weeks of notes for each user: one topic a week, a few notes a day."""
    for user in users:
        tag = f"chat:user:{user}"
        for week in range(8):
            topic = TOPICS[week % len(TOPICS)]
            for day in range(0, 7, 2):
                at = START + timedelta(days=7 * week + day)
                htm.add(f"{user} talked about {topic} on day {day} of week {week}",
                        key=f"{tag}:w{week}d{day}", tags=[tag], created_at=at)
    clock.set(START + timedelta(days=60))


def test_tiered_recall_goes_down_the_digests_to_the_turns(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm = htm_factory()
    _history(htm, clock)
    write_digests(htm, tag="chat:user:ada")
    hits = htm.recall("venue for the wedding", strategy="tiered", tags="chat:user:ada", limit=4)
    assert hits and all("venue for the wedding" in h.memory.content for h in hits)
    assert all(h.memory.content.startswith("ada ") for h in hits)  # never Ada's
    month, week, day = hits[0].path
    assert month.startswith("chat:user:ada:digest:month:")
    assert week.startswith("chat:user:ada:digest:week:")
    assert day == f"chat:user:ada:digest:day:{hits[0].memory.created_at.date().isoformat()}"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # the other strategies carry no path
    assert all(h.path == () for h in htm.recall("venue", tags="chat:user:ada"))


def test_tiered_recall_searches_what_no_digest_holds_yet(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm = htm_factory()
    _history(htm, clock, users=("ada",))
    write_digests(htm, tag="chat:user:ada")
    today = htm.add("ada booked the harbour venue for the wedding today", key="chat:user:ada:t",
                    tags=["chat:user:ada"], created_at=clock())
    hits = htm.recall("harbour venue", strategy="tiered", tags="chat:user:ada", limit=5)
    assert hits[0].memory.key == today.key and hits[0].path == ()
    assert hits[0].ranks == {"recent": 1}


def test_tiered_recall_without_digests_is_hybrid_over_everything(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm = htm_factory()
    _history(htm, clock, users=("ada",))
    tiered = htm.recall("kitchen tiles", strategy="tiered", limit=5)
    assert {h.memory.key for h in tiered} == {h.memory.key for h in
                                             htm.recall("kitchen tiles", limit=5)}
    assert all(h.path == () for h in tiered)


def test_tiered_recall_never_returns_a_digest_and_keeps_the_filters(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm = htm_factory()
    _history(htm, clock, users=("ada",))
    fact = htm.add("ada's thesis chapter is on soil", key="chat:user:ada:fact", kind="fact",
                   tags=["chat:user:ada"], created_at=START + timedelta(days=2, hours=1))
    write_digests(htm, tag="chat:user:ada")
    hits = htm.recall("thesis chapter", strategy="tiered", tags="chat:user:ada", limit=30,
                      timeframe=(START, START + timedelta(days=14)))
    assert hits and all("digest" not in h.memory.metadata for h in hits)
    assert all(START <= h.memory.created_at < START + timedelta(days=14) for h in hits)
    facts = htm.recall("thesis chapter", strategy="tiered", tags="chat:user:ada",
                       kinds=["fact"])
    assert [h.memory.key for h in facts] == [fact.key] and len(facts[0].path) == 3


def test_tiered_recall_keeps_the_source_and_confidence_filters(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    """Beneath the days it opens, tiered recall keeps only memories from the exact sources
    at the least confidence asked for (``user``, not ``User``; none without a confidence)."""
    htm = htm_factory()
    _history(htm, clock, users=("ada",))
    day = START + timedelta(days=2)
    said = htm.add("ada's thesis chapter is on soil", key="chat:user:ada:said",
                   source="user", confidence=0.9, tags=["chat:user:ada"],
                   created_at=day + timedelta(hours=1))
    htm.add("ada's thesis chapter is on clay", key="chat:user:ada:guess", source="user",
            kind="episodic", tags=["chat:user:ada"], created_at=day + timedelta(hours=2))
    htm.add("ada's thesis chapter is on sand", key="chat:user:ada:told", source="User",
            confidence=1.0, tags=["chat:user:ada"], created_at=day + timedelta(hours=3))
    write_digests(htm, tag="chat:user:ada")
    hits = htm.recall("thesis chapter", strategy="tiered", tags="chat:user:ada",
                      sources="user", min_confidence=0.5)
    assert [h.memory.key for h in hits] == [said.key] and len(hits[0].path) == 3
    told = htm.recall("thesis chapter", strategy="tiered", tags="chat:user:ada",
                      sources=["User"])
    assert [h.memory.key for h in told] == ["chat:user:ada:told"]


def test_explain_recall_shows_the_path(htm_factory: Callable[..., HTM],
                                       clock: FrozenClock) -> None:
    htm = htm_factory()
    _history(htm, clock, users=("ada",))
    write_digests(htm, tag="chat:user:ada")
    why = explain_recall(htm, "bicycle repair", strategy="tiered", tags="chat:user:ada")
    assert why.fused and len(why.fused[0].path) == 3
    assert why.tiers is not None and why.tiers.opened
    assert set(why.tiers.scored) == {"month", "week", "day"}


def test_unknown_context_strategy_names_tiered(htm_factory: Callable[..., HTM]) -> None:
    with pytest.raises(UnknownStrategyError, match="tiered"):
        htm_factory().create_context(strategy="newest")


def test_tiered_context_holds_hot_memories_then_labelled_digests(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm = htm_factory(working_memory_tokens=50)  # working memory holds little
    _history(htm, clock, users=("ada",))
    write_digests(htm, tag="chat:user:ada", before=clock() - timedelta(days=1))
    hot = htm.add("ada says the harbour venue is booked", key="chat:user:ada:hot",
                  tags=["chat:user:ada"], created_at=clock())
    ctx = htm.create_context(strategy="tiered", max_tokens=1500, tags="chat:user:ada")
    assert ctx.memories[0].key == hot.key
    digests = [m for m in ctx.memories if "digest" in getattr(m, "metadata", {})]
    kinds = [m.metadata["digest"]["kind"] for m in digests]
    assert "month" in kinds  # older periods are represented
    assert kinds == sorted(kinds, key=["day", "week", "month"].index)
    assert "[month " in ctx.text and ctx.tokens <= ctx.budget
    assert ctx.tokens == htm._counter.count(ctx.text)
    for a, b in itertools.combinations(digests, 2):  # no period shown twice
        assert not (a.metadata["digest"]["start"] < b.metadata["digest"]["end"]
                    and b.metadata["digest"]["start"] < a.metadata["digest"]["end"])


def test_tiered_context_fits_any_budget(htm_factory: Callable[..., HTM],
                                        clock: FrozenClock) -> None:
    htm = htm_factory()
    _history(htm, clock, users=("ada",))
    write_digests(htm, tag="chat:user:ada")
    for budget in (1, 20, 80, 300, 5000):
        ctx = htm.create_context(strategy="tiered", max_tokens=budget, tags="chat:user:ada")
        assert ctx.tokens <= ctx.budget
        assert ctx.tokens == (htm._counter.count(ctx.text) if ctx.text else 0)


def test_tiered_recall_over_consolidated_digests(htm_factory: Callable[..., HTM],
                                                 clock: FrozenClock) -> None:
    """The same navigation over what ``HTM.consolidate`` writes, for users ``Ada`` and
    ``ada``; a forgotten source is never returned, its digests rebuilt without it."""
    htm = htm_factory()
    _history(htm, clock)
    for user in ("ada", "Ada"):
        for month in ("2024-03", "2024-04"):
            htm.consolidate("month", at=month, user_id=user)
    hits = htm.recall("kitchen tiles", strategy="tiered", tags="chat:user:ada", limit=3)
    assert hits and all(h.memory.key.startswith("chat:user:ada:w") for h in hits)
    assert hits[0].path[0].startswith("chat:user:ada:digest:month:")
    assert hits[0].path[2].startswith("chat:user:ada:digest:day:")
    gone = hits[0].memory.key
    htm.forget(gone, confirm=True)
    again = htm.recall("kitchen tiles", strategy="tiered", tags="chat:user:ada", limit=3)
    assert again and gone not in {h.memory.key for h in again}


def test_tiered_recall_reads_the_week_of_a_day(htm_factory: Callable[..., HTM],
                                               clock: FrozenClock) -> None:
    """"the week of 11 March" keeps the digests of that ISO week (Monday 11 to Sunday 17)."""
    htm = htm_factory()
    _history(htm, clock, users=("ada",))
    write_digests(htm, tag="chat:user:ada")
    hits = htm.recall("What did ada talk about in the week of 11 March?", strategy="tiered",
                      tags="chat:user:ada", limit=4)
    assert hits and all("week 1" in h.memory.content for h in hits)
    assert {h.path[1] for h in hits} == {"chat:user:ada:digest:week:2024-W11"}


def test_tiered_context_shortens_a_digest_too_long_for_the_room(
        htm_factory: Callable[..., HTM], clock: FrozenClock) -> None:
    htm = htm_factory(working_memory_tokens=30)
    _history(htm, clock, users=("ada",))
    clock.set(START + timedelta(days=90))  # nothing is hot but a little working memory
    write_digests(htm, tag="chat:user:ada", words=400)
    ctx = htm.create_context(strategy="tiered", max_tokens=150, tags="chat:user:ada")
    assert ctx.tokens <= ctx.budget
    shortened = [p for p in ctx.text.split("\n\n") if p.endswith(" …")]
    assert shortened and all(p.startswith(("[week ", "[month ")) for p in shortened)
