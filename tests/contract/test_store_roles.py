"""The store protocol's roles: both stores and an in-memory fake satisfy every one, the
required roles and every capability.

``LongTermStore`` is the union of small required role protocols, and the capabilities are
optional roles beside it (htm_core/store/base.py). Checked
two ways: ``isinstance`` against each ``runtime_checkable`` role (members present) on an
open store of each backend, and a structural comparison of every member's signature
(parameter names, kinds and defaults) between the role and the class. The fake
(``htm_core.testing.InMemoryStore``) then carries a real ``HTM`` and a recall through
``htm_core.recall.search``, which asks only for the ``Search`` role.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.enrich import InMemoryJobQueue, SQLJobQueue
from htm_core.recall import search
from htm_core.store import open_store
from htm_core.store.base import (
    CAPABILITIES,
    Embeddings,
    Forgetting,
    Lifecycle,
    LongTermStore,
    OperationsLog,
    Records,
    Search,
    SearchFilters,
    WorkingSet,
)
from htm_core.store.postgres import PostgresStore
from htm_core.store.sqlite import SQLiteStore
from htm_core.testing import InMemoryStore

REQUIRED: tuple[type, ...] = (Lifecycle, Records, Search, Forgetting, WorkingSet, OperationsLog,
                              Embeddings)
ROLES: tuple[type, ...] = (*REQUIRED, *CAPABILITIES.values())
IMPLEMENTATIONS = (SQLiteStore, PostgresStore, InMemoryStore)


def _members(protocol: type) -> dict[str, Any]:
    """The members a protocol declares itself: methods and annotated attributes."""
    own = {name: value for name, value in vars(protocol).items()
           if not name.startswith("_") and callable(value)}
    own.update(dict.fromkeys(vars(protocol).get("__annotations__", {})))
    return own


def test_the_roles_partition_the_store_protocol() -> None:
    """Every member is in exactly one role; the union of the required ones adds none and
    takes no capability; no engine, no log()."""
    seen: dict[str, str] = {}
    for role in ROLES:
        for name in _members(role):
            assert name not in seen, f"{name} is in {seen[name]} and {role.__name__}"
            seen[name] = role.__name__
    assert not _members(LongTermStore)
    assert set(LongTermStore.__mro__[1:1 + len(REQUIRED)]) == set(REQUIRED)
    assert not set(CAPABILITIES.values()) & set(LongTermStore.__mro__)
    assert "engine" not in seen and "log" not in seen
    assert "open_job_queue" in seen


def _comparable(signature: inspect.Signature) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in list(signature.parameters.values())[1:]]


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.__name__)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_every_member_has_the_role_signature(implementation: type, role: type) -> None:
    for name, declared in _members(role).items():
        if declared is None:  # an instance attribute (backend, url): isinstance checks it
            continue
        assert hasattr(implementation, name), f"{implementation.__name__} lacks {name}"
        wanted = _comparable(inspect.signature(declared))
        got = _comparable(inspect.signature(getattr(implementation, name)))
        # an implementation may add keyword-only options with defaults after the role's
        extra = got[len(wanted):]
        assert got[:len(wanted)] == wanted, f"{implementation.__name__}.{name}: {got} != {wanted}"
        assert all(kind is inspect.Parameter.KEYWORD_ONLY and default is not inspect.Parameter.empty
                   for _, kind, default in extra), f"{implementation.__name__}.{name} adds {extra}"


@pytest.fixture
def any_store(store_url: str) -> Iterator[LongTermStore]:
    store = open_store(store_url)
    yield store
    store.close()


def test_both_stores_are_every_role(any_store: LongTermStore) -> None:
    for role in (*ROLES, LongTermStore):
        assert isinstance(any_store, role), role.__name__


def test_the_job_queue_comes_from_the_store(any_store: LongTermStore) -> None:
    """A durable queue on the store's own database; jobs put there are seen by a second
    queue the store opens (as by another worker)."""
    queue = any_store.open_job_queue()
    assert isinstance(queue, SQLJobQueue)
    queue.put("tags", "m1", {"content": "Postgres is slow"})
    assert any_store.open_job_queue().counts()["pending"] == 1


def test_an_in_memory_store_gets_an_in_process_queue() -> None:
    store = open_store(":memory:")
    try:
        assert isinstance(store.open_job_queue(), InMemoryJobQueue)
    finally:
        store.close()


def test_the_fake_is_every_role() -> None:
    fake = InMemoryStore()
    for role in (*ROLES, LongTermStore):
        assert isinstance(fake, role), role.__name__


def test_retrieval_needs_only_the_search_role() -> None:
    fake = InMemoryStore()
    embedder = HashingEmbedder()
    with HTM(store=fake, embedder=embedder) as htm:
        vim = htm.add("User prefers Vim keybindings", key="pref-vim")
        htm.add("Lunch was pasta with tomatoes", key="lunch")
        assert [hit.memory.key for hit in htm.recall("vim keybindings", limit=1)] == ["pref-vim"]
    ranked = search(fake, query="vim keybindings", query_vector=lambda: embedder.embed_query("vim"),
                    strategy="hybrid", limit=2, filters=SearchFilters())
    assert ranked[0].id == vim.id


def test_the_fake_lists_as_the_stores_do(any_store: LongTermStore) -> None:
    """The same memories on the fake and on a real store page the same way."""
    listed = []
    for store in (InMemoryStore(), any_store):
        with HTM(store=store, embedder=HashingEmbedder()) as htm:
            htm.add_many([{"content": f"note {i}", "key": f"n{i % 7}-{i:02d}",
                           "importance": float(i % 3), "tags": ["a:b" if i % 2 else "c"]}
                          for i in range(30)], working_memory=False)
            htm.forget("n0-07", confirm=True)
            page = htm.list(order="importance", descending=True, tags=["a"], limit=4)
            keys = [m.key for m in page.memories]
            while page.next_cursor:
                page = htm.list(order="importance", descending=True, tags=["a"], limit=4,
                                cursor=page.next_cursor)
                keys += [m.key for m in page.memories]
            listed.append(keys)
    assert listed[0] == listed[1] and len(listed[0]) == 14 and "n0-07" not in listed[0]


def test_the_fake_updates_as_the_stores_do(any_store: LongTermStore) -> None:
    """An update on the fake and on a real store: the same versions, history recall, and a
    second HTM of the robot showing the new text."""
    seen = []
    for store in (InMemoryStore(), any_store):
        with HTM(store=store, embedder=HashingEmbedder(), robot="r") as htm, \
                HTM(store=store, embedder=HashingEmbedder(), robot="r") as twin:
            htm.add("Standup is at nine", key="standup")
            assert "nine" in twin.create_context().text
            htm.update("standup", "Standup moved to ten", tags=["team"])
            seen.append((
                [(v.version, v.content, v.superseded) for v in htm.versions("standup")],
                [(h.memory.version, h.memory.superseded) for h in htm.recall(
                    "nine", strategy="fulltext", include_history=True)],
                twin.create_context().text))
    assert seen[0] == seen[1]
    assert seen[0][2] == "Standup moved to ten"
