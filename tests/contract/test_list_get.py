"""``HTM.get`` and ``HTM.list`` on every backend: filters, key prefix, each order both ways,
keyset paging through a few hundred memories, forgotten ones only when asked, no access
counted, and bad input refused with a specific error."""

from __future__ import annotations

import asyncio
import random
from datetime import datetime, timedelta, timezone

import pytest

from htm_core import HTM, Memory, Page
from htm_core.errors import (
    InvalidBudgetError,
    InvalidKeyError,
    InvalidTagError,
    TimeframeError,
    ValidationError,
)

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
TAGS = ("user:preferences", "user", "project:alpha", "projects", "")


def _fill(htm_factory, n: int = 300) -> tuple[HTM, list[Memory]]:
    """``n`` memories by two robots, keys not in id order, importances and times with ties,
    tags of a small tree (``projects`` is not below ``project``), a key prefix with LIKE's
    wildcards in it, a tenth of them forgotten."""
    rng = random.Random(20)
    ada, bob = htm_factory(robot="ada"), htm_factory(robot="bob")
    numbers = list(range(n))
    rng.shuffle(numbers)
    for i, number in enumerate(numbers):
        owner = ada if i % 3 else bob
        tag = TAGS[i % len(TAGS)]
        owner.add_many([{
            "content": f"memory number {number} about {tag or 'nothing'}",
            "key": (f"doc_%{number:04d}" if number % 4 == 0 else f"doc-{number:04d}"),
            "importance": float(rng.choice([1, 2.5, 5, 9])),
            "tags": [tag] if tag else [],
            "created_at": T0 + timedelta(minutes=rng.randrange(0, n // 2)),
        }], working_memory=False)
    for memory in ada.list(limit=10_000, include_forgotten=True).memories[::10]:
        ada.forget(memory.key, confirm=True)
    return ada, list(ada.list(limit=10_000, include_forgotten=True).memories)


def _pages(htm: HTM, limit: int, **kwargs) -> list[Page]:
    pages = [htm.list(limit=limit, **kwargs)]
    while pages[-1].next_cursor is not None:
        pages.append(htm.list(limit=limit, cursor=pages[-1].next_cursor, **kwargs))
    return pages


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("order", ["created_at", "key", "importance"])
def test_paging_returns_each_visible_memory_once_in_order(htm_factory, order, descending):
    htm, everything = _fill(htm_factory)
    visible = [m for m in everything if m.forgotten_at is None]
    expected = sorted(visible, key=lambda m: (getattr(m, order), m.id), reverse=descending)
    pages = _pages(htm, 37, order=order, descending=descending)
    assert [len(p.memories) for p in pages[:-1]] == [37] * (len(pages) - 1)
    assert 0 < len(pages[-1].memories) <= 37 and pages[-1].next_cursor is None
    assert [m.id for p in pages for m in p.memories] == [m.id for m in expected]


def test_filters_select_what_recall_would(htm_factory):
    htm, everything = _fill(htm_factory)
    visible = [m for m in everything if m.forgotten_at is None]

    def listed(**kwargs) -> list[int]:
        return [m.id for p in _pages(htm, 50, **kwargs) for m in p.memories]

    def by_time(ms):
        return [m.id for m in sorted(ms, key=lambda m: (m.created_at, m.id))]

    assert listed(robot="bob") == by_time(m for m in visible if m.robot == "bob")
    assert listed(tags=["user"]) == by_time(
        m for m in visible if set(m.tags) & {"user", "user:preferences"})
    assert listed(tags="project") == by_time(m for m in visible if "project:alpha" in m.tags)
    start, end = T0 + timedelta(minutes=30), T0 + timedelta(minutes=90)
    assert listed(timeframe=(start, end)) == by_time(
        m for m in visible if start <= m.created_at < end)
    assert listed(key_prefix="doc_%") == by_time(
        m for m in visible if m.key.startswith("doc_%"))
    combined = listed(robot="ada", tags=["projects"], key_prefix="doc-", timeframe=(start, end))
    assert combined == by_time(m for m in visible if m.robot == "ada" and "projects" in m.tags
                               and m.key.startswith("doc-") and start <= m.created_at < end)
    assert combined  # the data holds some of each, so the filters are tested on something
    assert listed(robot="nobody") == []


def test_forgotten_memories_only_when_asked(htm_factory):
    htm, everything = _fill(htm_factory, n=60)
    forgotten = [m for m in everything if m.forgotten_at is not None]
    assert forgotten
    shown = [m.id for m in htm.list(limit=1_000).memories]
    assert not {m.id for m in forgotten} & set(shown)
    with_them = htm.list(limit=1_000, include_forgotten=True, order="key").memories
    assert [m.id for m in with_them] == [m.id for m in sorted(everything, key=lambda m: m.key)]
    assert htm.get(forgotten[0].key) is None
    found = htm.get(forgotten[0].key, include_forgotten=True)
    assert found is not None and found.forgotten_at is not None


def test_get_and_list_count_no_access_and_leave_working_memory_alone(htm_factory):
    htm = htm_factory(robot="ada", working_memory_tokens=1_000)
    htm.add("the kettle is in the left cupboard", key="kettle")
    htm.clear_working_memory()
    before = htm.store.get("kettle")
    for _ in range(3):
        got = htm.get("kettle")
        htm.list(key_prefix="kett")
    after = htm.store.get("kettle")
    assert got is not None and got.content == "the kettle is in the left cupboard"
    assert (after.access_count, after.last_accessed) == (before.access_count,
                                                         before.last_accessed)
    assert "kettle" not in htm.working_memory
    assert htm.get("missing") is None
    htm.retrieve("kettle")  # the contrast: retrieve counts an access
    assert htm.store.get("kettle").access_count == before.access_count + 1


def test_a_page_from_another_instance_continues_on_this_one(htm_factory):
    """The cursor is plain data: a page started by one ``HTM`` continues on another."""
    first, _ = _fill(htm_factory, n=40)
    other = htm_factory(robot="carl")
    page = first.list(limit=15, order="importance", descending=True)
    rest = _pages(other, 100, order="importance", descending=True)
    rest_after = other.list(limit=100, order="importance", descending=True,
                            cursor=page.next_cursor)
    assert [m.id for m in page.memories + rest_after.memories] == \
        [m.id for p in rest for m in p.memories]


def test_the_async_twins_return_what_the_sync_methods_do(htm_factory):
    htm, _ = _fill(htm_factory, n=30)
    page = asyncio.run(htm.alist(limit=7, order="key", tags=["user"]))
    assert page == htm.list(limit=7, order="key", tags=["user"])
    key = page.memories[0].key
    assert asyncio.run(htm.aget(key)) == htm.get(key)


@pytest.mark.parametrize(("kwargs", "error", "says"), [
    ({"order": "newest"}, ValidationError, "created_at, key, importance"),
    ({"limit": 0}, InvalidBudgetError, "limit"),
    ({"limit": 10_001}, InvalidBudgetError, "limit"),
    ({"cursor": "not-a-cursor"}, ValidationError, "next_cursor"),
    ({"cursor": ""}, ValidationError, "next_cursor"),
    ({"cursor": 42}, ValidationError, "next_cursor"),
    ({"key_prefix": ""}, ValidationError, "key_prefix"),
    ({"descending": "yes"}, ValidationError, "True or False"),
    ({"tags": ["Not A Tag!"]}, InvalidTagError, None),
    ({"timeframe": "the day after never"}, TimeframeError, None),
])
def test_bad_list_arguments_are_refused(htm_factory, kwargs, error, says):
    htm = htm_factory(robot="ada")
    with pytest.raises(error, match=says):
        htm.list(**kwargs)


def test_a_cursor_of_another_order_is_refused_with_what_to_do(htm_factory):
    htm, _ = _fill(htm_factory, n=20)
    cursor = htm.list(limit=5, order="key").next_cursor
    with pytest.raises(ValidationError, match="order='key', descending=False"):
        htm.list(limit=5, order="importance", cursor=cursor)
    with pytest.raises(ValidationError, match="order='key', descending=False"):
        htm.list(limit=5, order="key", descending=True, cursor=cursor)


def test_get_refuses_a_bad_key(htm_factory):
    htm = htm_factory(robot="ada")
    with pytest.raises(InvalidKeyError):
        htm.get("")
