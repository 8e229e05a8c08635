"""Digests through ``HTM.consolidate`` on every backend: the day -> week -> month tree, one
digest per scope and period (idempotent, versioned), scopes of colliding user ids kept
apart, forgetting a source (its text gone from every digest and every version), bad input
refused with nothing written, and the model strategies with LangChain's fake chat models."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from htm_core import HTM
from htm_core.consolidation import parse_period, strategy_named
from htm_core.consolidation.service import DIGEST_TAG, is_digest
from htm_core.enrich.errors import InvalidModelOutputError
from htm_core.enrich.llm import LLMUsage
from htm_core.errors import (
    InvalidBudgetError,
    TimeframeError,
    UnknownStrategyError,
    ValidationError,
)
from htm_core.models import Memory
from htm_core.scope import ChatScope

# The ``clock`` fixture stands at Wednesday 2024-05-15 12:00 UTC (ISO week 2024-W20), so
# the last complete day is 2024-05-14 and the last complete week 2024-W19 (6-12 May).
WEEK = [date(2024, 5, 6) + timedelta(days=n) for n in range(7)]


def at(day: date, hour: int = 10) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=timezone.utc)


def fill_week(htm: HTM, scope: ChatScope | None = None, who: str = "Ada") -> list[Memory]:
    """Two notes a day in 2024-W19 (each naming the day), in ``scope``."""
    items = []
    for n, day in enumerate(WEEK):
        for hour, text in ((9, f"{who} planned step {n} of the Atlas launch on {day}."),
                           (15, f"{who} reviewed budget item {n * 7} with Kenji.")):
            key = f"{who}-{day}-{hour}"
            tags: list[str] = []
            if scope is not None:
                key, tags = scope.own_key(key), scope.stored_tags(None)
            items.append({"content": text, "key": key, "tags": tags,
                          "created_at": at(day, hour)})
    return htm.add_many(items)


def every_text(htm: HTM) -> list[str]:
    """The text of every digest and of every version of every digest."""
    out = []
    for digest in htm.digests(limit=1000):
        out.extend(v.content for v in htm.versions(digest.key))
        out.extend(m.content for n in range(1, 6)
                   if (m := htm.get(digest.key, version=n)) is not None)
    return out


def plain(htm: HTM) -> list[Memory]:
    page = htm.list(limit=10_000, include_forgotten=True)
    return [m for m in page.memories if not is_digest(m)]


def test_week_is_made_of_its_days(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    sources = fill_week(htm)
    made = htm.consolidate("week")
    days, week = made[:-1], made[-1]
    assert [d.key for d in days] == [f"digest:day:{d}" for d in WEEK]
    assert week.key == "digest:week:2024-W19"
    info = week.metadata["digest"]
    assert info["kind"] == "week" and info["label"] == "2024-W19" and info["scope"] == "robot"
    assert info["start"] == "2024-05-06T00:00:00+00:00"
    assert info["end"] == "2024-05-13T00:00:00+00:00"
    # the week's sources are exactly its day digests, and so are its children
    assert [(s["id"], s["key"]) for s in info["sources"]] == [(d.id, d.key) for d in days]
    assert info["children"] == [d.key for d in days]
    assert week.created_at == datetime(2024, 5, 6, tzinfo=timezone.utc)
    assert DIGEST_TAG in week.tags and week.kind == "digest"
    assert {m.key for m in htm.list(kinds="digest", limit=100).memories} == {m.key for m in made}
    assert {h.memory.kind for h in htm.recall("Atlas launch", kinds=["digest"])} == {"digest"}
    assert not [h for h in htm.recall("Atlas launch", kinds=["episodic"], limit=50)
                if is_digest(h.memory)]
    for day, digest in zip(WEEK, days, strict=True):
        own = {m.id for m in sources if m.created_at.date() == day}
        assert {s["id"] for s in digest.metadata["digest"]["sources"]} <= own
        assert f"step {WEEK.index(day)} " in digest.content
        assert digest.created_at == at(day, 0)
    # sources untouched
    assert [(m.id, m.content, m.version) for m in plain(htm)] == \
        [(m.id, m.content, m.version) for m in sources]


def test_month_is_made_of_its_weeks(htm_factory: Callable[..., HTM], clock: Any) -> None:
    htm = htm_factory()
    fill_week(htm)
    htm.add("Kenji booked the venue in Porto.", key="porto", created_at=at(date(2024, 5, 21)))
    clock.advance(days=30)  # 2024-06-14: the last complete month is 2024-05
    made = htm.consolidate("month")
    month = made[-1]
    assert month.key == "digest:month:2024-05"
    weeks = [m for m in made if m.metadata["digest"]["kind"] == "week"]
    assert [w.key for w in weeks] == ["digest:week:2024-W19", "digest:week:2024-W21"]
    assert [s["key"] for s in month.metadata["digest"]["sources"]] == [w.key for w in weeks]
    assert "Porto" in month.content and "Atlas" in month.content
    assert [d.key for d in htm.digests("week")] == ["digest:week:2024-W21",
                                                    "digest:week:2024-W19"]  # newest first
    assert [d.key for d in htm.digests(limit=2)] == ["digest:day:2024-05-21",
                                                     "digest:week:2024-W21"]
    assert htm.digests(user_id="ada") == []
    assert month.created_at == parse_period("2024-05").start


def test_rerun_writes_nothing_and_new_sources_make_versions(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    fill_week(htm)
    first = htm.consolidate("week")
    ops = len(htm.operations(limit=1000))
    again = htm.consolidate("week")
    assert [(m.id, m.version, m.content) for m in again] == \
        [(m.id, m.version, m.content) for m in first]
    assert len(htm.operations(limit=1000)) == ops  # nothing written
    htm.add("Priya found bug 4521 in the Atlas installer.", key="late",
            created_at=at(WEEK[2], 18))
    later = htm.consolidate("week")
    by_key = {m.key: m for m in later}
    changed = by_key[f"digest:day:{WEEK[2]}"]
    assert changed.version == 2 and "4521" in changed.content
    assert by_key["digest:week:2024-W19"].version == 2
    assert by_key["digest:week:2024-W19"].id == first[-1].id  # one digest, a new version
    assert all(by_key[m.key].version == 1 for m in first[:-1] if m.key != changed.key)
    assert len(htm.digests(limit=1000)) == 8
    assert "4521" not in htm.versions(changed.key)[0].content


def test_users_with_colliding_ids_keep_their_own_digests(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    users = {"Ada": "Zephyr", "ada": "Quokka", "a:da": "Marmot"}
    for user, word in users.items():
        fill_week(htm, ChatScope.of(user_id=user), who=word)
    session = ChatScope.of(user_id="ada", session_id="s1")
    htm.add("Quokka sessions talk about the Lisbon offsite.", key=session.own_key("lisbon"),
            tags=session.stored_tags(None), created_at=at(WEEK[0], 11))
    keys = set()
    for user, word in users.items():
        made = htm.consolidate("week", user_id=user)
        scope = ChatScope.of(user_id=user)
        assert made[-1].key == f"{scope.tag}:digest:week:2024-W19"
        for digest in made:
            keys.add(digest.key)
            assert word in digest.content
            assert not any(w in digest.content for w in users.values() if w != word)
            assert scope.sees(digest.tags) and DIGEST_TAG in digest.tags
        assert [d.key for d in htm.digests("week", user_id=user)] == [made[-1].key]
    assert len(keys) == 3 * 8
    own = htm.consolidate("day", at=WEEK[0], scope=session)[-1]
    assert own.key == "chat:user:ada:session:s1:digest:day:2024-05-06"
    assert "Lisbon" in own.content and "Quokka planned" not in own.content
    assert "Lisbon" in htm.consolidate("day", at=WEEK[0], user_id="ada")[-1].content
    robot = htm.consolidate("day", at=WEEK[0])[-1]
    assert robot.key == "digest:day:2024-05-06"
    assert all(w in robot.content for w in users.values())


def test_forgetting_a_source_rebuilds_every_digest_without_it(
        htm_factory: Callable[..., HTM], clock: Any) -> None:
    htm = htm_factory()
    fill_week(htm)
    htm.add("Zanzibar is the codename of the secret merger.", key="secret",
            created_at=at(WEEK[3], 12))
    clock.advance(days=30)
    htm.consolidate("day", at=WEEK[3])
    htm.add("Kenji moved the review to Friday 9am.", key="later", created_at=at(WEEK[3], 20))
    htm.consolidate("month", at="2024-05")
    day_key = f"digest:day:{WEEK[3]}"
    assert len(htm.versions(day_key)) == 2
    assert sum("Zanzibar" in t for t in every_text(htm)) >= 4  # day (2 versions), week, month
    htm.forget("secret", confirm=True)
    assert not any("Zanzibar" in t for t in every_text(htm))
    hits = htm.recall("Zanzibar codename merger", include_history=True, min_score=0,
                      limit=100, kinds="digest")
    assert [h for h in hits if is_digest(h.memory)]  # digests are searched, history too
    assert not [h for h in hits if "Zanzibar" in h.memory.content]
    day = htm.get(day_key)
    assert day is not None and "Kenji moved the review" in day.content
    assert [s["key"] for s in day.metadata["digest"]["sources"]].count("secret") == 0
    week = htm.get("digest:week:2024-W19")
    month = htm.get("digest:month:2024-05")
    assert week is not None and month is not None
    assert day.id in [s["id"] for s in week.metadata["digest"]["sources"]]
    assert week.id in [s["id"] for s in month.metadata["digest"]["sources"]]
    assert htm.get("secret", include_forgotten=True) is not None  # the source is kept
    # restoring the source brings it back at the next consolidate (a new version)
    htm.restore("secret")
    assert not any("Zanzibar" in t for t in every_text(htm))
    htm.consolidate("month", at="2024-05")
    assert "Zanzibar" in htm.get(day_key).content  # type: ignore[union-attr]
    assert "Zanzibar" in htm.get("digest:month:2024-05").content  # type: ignore[union-attr]


def test_a_source_forgotten_elsewhere_is_dropped_at_the_next_consolidate(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    fill_week(htm)
    htm.add("Zanzibar is the codename.", key="secret", created_at=at(WEEK[1], 12))
    htm.consolidate("week")
    # forgotten in the store directly, as a process without digests would
    htm.store.forget("secret", robot=htm.robot, at=htm.clock())
    htm.consolidate("week")
    assert not any("Zanzibar" in t for t in every_text(htm))
    assert len(htm.digests(limit=1000)) == 8


def test_purging_a_forgotten_source(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    fill_week(htm)
    htm.add("Zanzibar is the codename.", key="secret", created_at=at(WEEK[1], 12))
    htm.consolidate("week")
    htm.forget("secret", confirm=True)
    assert htm.purge(confirm=True, key="secret") == 1
    assert not any("Zanzibar" in t for t in every_text(htm))
    assert htm.consolidate("week")[-1].version == 1  # rebuilt at the forget; nothing new


def test_a_model_digest_with_no_model_at_hand_is_deleted_then_made_again(
        htm_factory: Callable[..., HTM]) -> None:
    writer, other = htm_factory(), htm_factory(robot="other")
    fill_week(writer)
    writer.add("Zanzibar is the codename.", key="secret", created_at=at(WEEK[1], 12))
    model = FakeListChatModel(responses=["Zanzibar and Atlas plans."])
    writer.consolidate("day", at=WEEK[1], strategy="simple", chat_model=model)
    other.forget("secret", confirm=True)  # ``other`` was given no model: it cannot rebuild
    assert writer.get(f"digest:day:{WEEK[1]}") is None
    assert not any("Zanzibar" in t for t in every_text(writer))
    model.responses = ["Atlas plans."]
    model.i = 0
    remade = writer.consolidate("day", at=WEEK[1], strategy="simple", chat_model=model)
    assert [m.content for m in remade] == ["Atlas plans."]


def test_default_period_is_the_last_complete_one(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    htm.add("Today's note.", key="today", created_at=datetime(2024, 5, 15, 9, tzinfo=timezone.utc))
    htm.add("Yesterday's note.", key="yday", created_at=at(date(2024, 5, 14)))
    htm.add("Late night in Tokyo.", key="late", created_at=at(date(2024, 5, 14), 20))
    assert [m.key for m in htm.consolidate()] == ["digest:day:2024-05-14"]
    assert [m.key for m in htm.consolidate("day", at="2024-05-15")] == ["digest:day:2024-05-15"]
    tokyo = htm.consolidate("day", at=date(2024, 5, 15), tz="Asia/Tokyo")
    assert [m.key for m in tokyo] == ["digest:day:2024-05-15@Asia/Tokyo"]
    # 14 May 20:00 UTC is 15 May 05:00 in Tokyo; 14 May 10:00 UTC is still the 14th there
    assert "Late night" in tokyo[0].content and "Yesterday" not in tokyo[0].content


@pytest.mark.parametrize(("kwargs", "error", "says"), [
    ({"period": "year"}, TimeframeError, "day, week, month"),
    ({"period": "day", "at": "next tuesday"}, TimeframeError, "2026-11-28"),
    ({"period": "week", "at": "2024-05"}, TimeframeError, "2026-W48"),
    ({"period": "day", "tz": "Mars/Olympus"}, TimeframeError, "IANA"),
    ({"period": "day", "scope": "ada"}, ValidationError, "ChatScope"),
    ({"period": "day", "user_id": ""}, ValidationError, "non-empty"),
    ({"period": "day", "user_id": "ada", "scope": ChatScope.of(user_id="ada")},
     ValidationError, "not both"),
    ({"period": "day", "strategy": "abstractive"}, UnknownStrategyError, "extractive"),
    ({"period": "day", "strategy": "simple"}, ValidationError, "chat_model="),
    ({"period": "day", "target_tokens": 0}, InvalidBudgetError, "target_tokens"),
    ({"period": "day", "target_tokens": "300"}, InvalidBudgetError, "target_tokens"),
])
def test_bad_input_writes_nothing(htm_factory: Callable[..., HTM], kwargs: dict[str, Any],
                                  error: type[Exception], says: str) -> None:
    htm = htm_factory()
    fill_week(htm)
    before = len(htm.operations(limit=1000))
    kwargs = dict(kwargs)
    period = kwargs.pop("period")
    with pytest.raises(error, match=says):
        htm.consolidate(period, **kwargs)
    with pytest.raises(error, match=says):
        htm.schedule_consolidation(period, **kwargs)
    assert len(htm.operations(limit=1000)) == before
    assert htm.digests() == []


def test_model_strategies_through_consolidate(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    fill_week(htm)
    usage = LLMUsage()
    model = FakeListChatModel(responses=[f"Day {n}: Atlas steps and budget." for n in range(7)]
                              + ["The week: Atlas launch steps and the budget with Kenji."])
    strategy = strategy_named("hierarchical", chat_model=model, usage=usage,
                              max_input_tokens=2_000)
    made = htm.consolidate("week", strategy=strategy, target_tokens=60)
    assert [m.content for m in made] == [f"Day {n}: Atlas steps and budget." for n in range(7)] \
        + ["The week: Atlas launch steps and the budget with Kenji."]
    assert usage.calls == 8
    assert {m.metadata["digest"]["strategy"] for m in made} == {"hierarchical"}
    assert htm.consolidate("week", strategy=strategy, target_tokens=60)[-1].version == 1
    assert usage.calls == 8  # unchanged sources: the model is not asked again
    for name in ("simple", "map-reduce"):
        model = FakeListChatModel(responses=[f"{name} digest of the day."])
        digest = htm.consolidate("day", at=WEEK[0], strategy=name, chat_model=model)[-1]
        assert digest.content == f"{name} digest of the day."
        assert digest.metadata["digest"]["strategy"] == name


def test_a_model_answer_that_stays_invalid_writes_nothing(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    fill_week(htm)
    model = FakeListChatModel(responses=["word " * 200])
    with pytest.raises(InvalidModelOutputError):
        htm.consolidate("day", at=WEEK[0], strategy="simple", chat_model=model,
                        target_tokens=20)
    assert htm.digests() == []


def test_model_requests_wait_on_the_jobs_rate_limit(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(enrichment_options={"requests_per_second": 1000.0, "burst": 100.0})
    fill_week(htm)
    model = FakeListChatModel(responses=["Atlas steps."])
    htm.consolidate("week", strategy="simple", chat_model=model)
    bucket = htm._consolidator._rate_limit()
    assert bucket is not None and bucket.acquired == 8


def test_a_scheduled_consolidation_runs_in_the_background_worker(
        htm_factory: Callable[..., HTM]) -> None:
    import threading

    htm = htm_factory()
    fill_week(htm, ChatScope.of(user_id="ada"))
    threads = []
    extractive = strategy_named("extractive")

    class Watching:
        name = "extractive"

        def summarise(self, items: Any, target_tokens: int) -> Any:
            threads.append(threading.current_thread().name)
            return extractive.summarise(items, target_tokens)

    job = htm.schedule_consolidation("week", user_id="ada", strategy=Watching())
    assert isinstance(job, int)
    assert htm.flush_consolidation(timeout=60)
    week = htm.get("chat:user:ada:digest:week:2024-W19")
    assert week is not None and "Atlas" in week.content
    assert len(threads) == 8 and all(t.startswith("htm-consolidate") for t in threads)
    assert threading.current_thread().name not in threads


def test_two_writers_consolidating_at_once_make_one_digest_per_period(
        htm_factory: Callable[..., HTM]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    first, second = htm_factory(robot="first"), htm_factory(robot="second")
    fill_week(first)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda h: h.consolidate("week"), (first, second, first)))
    assert [[m.key for m in made] for made in results] == [[m.key for m in results[0]]] * 3
    digests = second.digests(limit=1000)
    assert len(digests) == 8 and len({d.key for d in digests}) == 8
    week = second.get("digest:week:2024-W19")
    assert week is not None
    assert [s["key"] for s in week.metadata["digest"]["sources"]] == \
        [f"digest:day:{d}" for d in WEEK]
    assert [s["id"] for s in week.metadata["digest"]["sources"]] == \
        [second.get(f"digest:day:{d}").id for d in WEEK]  # type: ignore[union-attr]


def test_forgetting_a_users_source_rebuilds_the_users_and_the_stores_digests(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    ada, other = ChatScope.of(user_id="ada"), ChatScope.of(user_id="Ada")
    fill_week(htm, ada, who="Quokka")
    fill_week(htm, other, who="Zephyr")
    secret = ada.own_key("secret")
    htm.add("Zanzibar is Quokka's codename.", key=secret, tags=ada.stored_tags(None),
            created_at=at(WEEK[4], 12))
    for user in ("ada", "Ada", None):
        htm.consolidate("week", user_id=user)
    others = {d.key: d.id for d in htm.digests(user_id="Ada", limit=100)}
    assert sum("Zanzibar" in t for t in every_text(htm)) == 4  # ada's and the store's
    htm.forget(secret, confirm=True)
    assert not any("Zanzibar" in t for t in every_text(htm))
    assert {d.key: d.id for d in htm.digests(user_id="Ada", limit=100)} == others  # untouched
    assert len(htm.digests(user_id="ada", limit=100)) == 8
    assert "Quokka" in htm.get(f"digest:day:{WEEK[4]}").content  # type: ignore[union-attr]


def test_forgetting_a_day_digest_rebuilds_its_week_and_the_next_consolidate_replaces_it(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    fill_week(htm)
    htm.consolidate("week")
    day_key = f"digest:day:{WEEK[2]}"
    htm.forget(day_key, confirm=True)
    week = htm.get("digest:week:2024-W19")
    assert week is not None and "step 2 " not in week.content
    assert day_key not in [s["key"] for s in week.metadata["digest"]["sources"]]
    made = htm.consolidate("week")
    assert day_key in [m.key for m in made] and "step 2 " in made[-1].content
    assert htm.get(day_key, include_forgotten=True).forgotten_at is None  # type: ignore[union-attr]


def test_a_scheduled_model_consolidation(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(enrichment_options={"requests_per_second": 1000.0, "burst": 100.0})
    fill_week(htm)
    model = FakeListChatModel(responses=["Atlas steps, by the model."])
    htm.schedule_consolidation("day", at=WEEK[0], strategy="simple", chat_model=model)
    assert htm.flush_consolidation(timeout=60)
    digest = htm.get(f"digest:day:{WEEK[0]}")
    assert digest is not None and digest.content == "Atlas steps, by the model."
    assert digest.metadata["digest"]["strategy"] == "simple"


def test_each_worker_waits_only_for_its_own_jobs(htm_factory: Callable[..., HTM]) -> None:
    """A ``consolidate`` job left in the shared queue by a process that stopped does not
    hold up ``flush_enrichment``, and enrichment jobs no runner here does do not hold up
    ``flush_consolidation``. Fails before ``JobRunner.flush`` counted its own kinds only:
    both flushes then ran into their timeouts and returned False."""
    from htm_core.enrich import LLMTagger

    tagger = LLMTagger(FakeListChatModel(responses=['["launch"]']))
    tagging = htm_factory(robot="tagging", tagger=tagger)
    queue = tagging.store.open_job_queue()
    queue.put("consolidate", "digest:day:2024-05-06",
              {"period": "day:2024-05-06", "scope": "robot", "strategy": "extractive",
               "target_tokens": None})
    tagging.add("Ada planned the Atlas launch.", key="note")
    assert tagging.flush_enrichment(timeout=10)
    assert tagging.get("note").tags == ("launch",)  # type: ignore[union-attr]

    plain = htm_factory(robot="plain")
    fill_week(plain)
    queue.put("importance", "note", {"content": "Ada planned the Atlas launch."})
    plain.schedule_consolidation("day", at=WEEK[0])
    assert plain.flush_consolidation(timeout=10)
    assert queue.counts(kinds=["importance"])["pending"] == 1  # no runner here does it
    assert plain.get(f"digest:day:{WEEK[0]}") is not None


def test_a_day_of_more_memories_than_one_page(htm_factory: Callable[..., HTM]) -> None:
    """The day's inputs are read a page (1,000) at a time: the last memory of a busy day is
    one of them, and forgetting it changes the digest."""
    htm = htm_factory()
    start = at(WEEK[0], 0)
    htm.add_many([{"content": f"Turn {n}: Ada and Kenji went through checklist item {n}.",
                   "key": f"turn-{n}", "created_at": start + timedelta(seconds=30 * n)}
                  for n in range(1_003)], working_memory=False)
    first = htm.consolidate("day", at=WEEK[0])[-1]
    htm.store.forget("turn-1002", robot=htm.robot, at=htm.clock())
    again = htm.consolidate("day", at=WEEK[0])[-1]
    assert (again.id, again.version) != (first.id, first.version)


def test_a_key_held_by_another_memory_is_refused(htm_factory: Callable[..., HTM]) -> None:
    from htm_core.errors import DuplicateKeyError

    htm = htm_factory()
    fill_week(htm)
    htm.add("A note someone keyed like a digest.", key=f"digest:day:{WEEK[0]}",
            created_at=at(date(2024, 4, 1)))
    with pytest.raises(DuplicateKeyError, match="forget and purge that memory"):
        htm.consolidate("day", at=WEEK[0])
    assert htm.digests() == []
    assert htm.get(f"digest:day:{WEEK[0]}").version == 1  # type: ignore[union-attr]
