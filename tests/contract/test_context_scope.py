"""``create_context(tags=..., scope_working=True)``: a context of one scope out of a shared
working memory, on every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from htm_core import HTM
from htm_core.errors import ValidationError
from htm_core.tags import carries_tag, tag_matches


def fill(htm: HTM) -> None:
    for n in range(12):
        htm.add(f"Ada's note number {n} about her garden and the tomatoes", importance=9.0,
                key=f"ada-{n}", tags=["chat:user:ada:session:s1"])
    htm.add("Bob likes sailing on Sundays", importance=1.0, key="bob-1",
            tags=["chat:user:bob:session:s2"])
    htm.add("Bobby is another user entirely", importance=1.0, key="bobby-1",
            tags=["chat:user:bobby"])


def test_scoped_context_takes_only_the_scope_and_is_not_starved(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    fill(htm)
    assert len(htm.working_memory) == 14
    budget = 60
    unscoped = htm.create_context(strategy="important", max_tokens=budget,
                                  tags=["chat:user:bob"])
    assert "bob-1" not in unscoped.keys  # Ada's important notes fill the budget first
    scoped = htm.create_context(strategy="important", max_tokens=budget,
                                tags=["chat:user:bob"], scope_working=True)
    assert scoped.keys == ("bob-1",)
    assert scoped.tokens <= scoped.budget
    for strategy in ("balanced", "recent", "important"):
        ada = htm.create_context(strategy=strategy, max_tokens=budget,
                                 tags="chat:user:ada", scope_working=True)
        assert ada.keys and all(k.startswith("ada-") for k in ada.keys)
        assert ada.tokens <= ada.budget
        assert ada.keys == htm.create_context(strategy=strategy, max_tokens=budget,
                                              tags="chat:user:ada", scope_working=True).keys


def test_scoped_context_with_a_query_recalls_within_the_scope_too(
        htm_factory: Callable[..., HTM], store_url: str) -> None:
    htm = htm_factory()
    fill(htm)
    htm.close()
    again = htm_factory(database_url=store_url)  # working memory restored from the store
    assert "ada-0" in again.working_memory
    context = again.create_context(query="garden tomatoes sailing", tags=["chat:user:bob"],
                                   scope_working=True)
    assert context.keys == ("bob-1",)
    both = asyncio.run(again.acreate_context(tags=["chat:user:bob", "chat:user:bobby"],
                                             scope_working=True))
    assert set(both.keys) == {"bob-1", "bobby-1"}


def test_scope_working_needs_tags(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    with pytest.raises(ValidationError, match="tags"):
        htm.create_context(scope_working=True)


def test_the_tag_rule() -> None:
    assert tag_matches("chat:user:bob", "chat:user:bob")
    assert tag_matches("chat:user:bob:session:s1", "chat:user:bob")
    assert not tag_matches("chat:user:bobby", "chat:user:bob")
    assert not tag_matches("chat:user", "chat:user:bob")
    assert carries_tag(["x", "chat:user:bob:session:s1"], ["y", "chat:user:bob"])
    assert not carries_tag([], ["chat"])
    assert not carries_tag(["chat"], [])
