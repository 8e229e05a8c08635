"""``create_context(query=..., recall_kinds=...)`` on both backends: the recalled part holds
only memories of those kinds, within ``tags``, and a bad value is refused before anything
is read, with or without a query."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from htm_core import HTM
from htm_core.errors import ValidationError
from htm_core.scope import ChatScope


def test_recall_kinds_pick_within_the_scope(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="r", working_memory_tokens=2_000)
    for user, code in (("Ada", "4711"), ("ada", "1174")):
        tag = ChatScope.of(user_id=user).tag
        htm.add(f"The locker code is {code}", tags=[tag], kind="fact", key=f"{tag}:f")
        htm.add(f"Ada keeps locker {code} tidy", tags=[tag], key=f"{tag}:e")
    htm.working_memory.clear()
    ada = ChatScope.of(user_id="ada").tag
    ctx = htm.create_context("recent", query="locker code", recall_kinds=["Fact"],
                             tags=[ada], scope_working=True)
    assert [m.content for m in ctx.memories] == ["The locker code is 1174"]
    every = htm.create_context("recent", query="locker code", tags=[ada], scope_working=True)
    assert sorted(m.content for m in every.memories) == [
        "Ada keeps locker 1174 tidy", "The locker code is 1174"]


@pytest.mark.parametrize("bad", [[], ["facts"], "nope", 3])
def test_bad_recall_kinds_are_refused(htm_factory: Callable[..., HTM], bad: object) -> None:
    htm = htm_factory()
    with pytest.raises(ValidationError, match="kind"):
        htm.create_context(recall_kinds=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="kind"):
        htm.create_context(query="x", recall_kinds=bad)  # type: ignore[arg-type]
