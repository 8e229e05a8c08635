"""A memory larger than the whole working-memory budget is logged once per memory and
``HTM`` object, not on every recall that finds it, on both backends."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from htm_core import HTM

LOGGER = "htm_core.working.resident"
BIG = " ".join(f"tabs-over-spaces reason {i}" for i in range(60))


def too_large(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.WARNING
            and "more than the whole working-memory budget" in r.getMessage()]


def test_several_recalls_warn_once_per_memory(htm_factory: Callable[..., HTM],
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    htm = htm_factory(robot="Ada", working_memory_tokens=100)
    htm.add(BIG, key="Big")
    htm.add(BIG + " more", key="big")  # a second memory, its key differing by case only
    htm.add("a small fact about tabs", key="small")
    assert len(too_large(caplog)) == 2
    for _ in range(6):
        keys = {hit.memory.key for hit in htm.recall("tabs-over-spaces reason", limit=5)}
        assert {"Big", "big"} <= keys
        htm.create_context()
    messages = too_large(caplog)
    assert len(messages) == 2, messages
    assert any("'Big'" in m for m in messages) and any("'big'" in m for m in messages)
    assert "Big" not in htm.create_context().keys  # still kept out of working memory


def test_each_htm_object_warns_for_itself(htm_factory: Callable[..., HTM],
                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    writer = htm_factory(robot="Ada", working_memory_tokens=100)
    writer.add(BIG, key="Big")
    readers = [htm_factory(robot=name, working_memory_tokens=100) for name in ("ada", "Ada")]
    for _ in range(3):
        for htm in (writer, *readers):
            assert htm.recall("tabs-over-spaces reason", limit=3)[0].memory.key == "Big"
    assert len(too_large(caplog)) == 3  # the writer's add, then each reader's first recall


def test_a_new_version_that_is_still_too_large_is_told_again(
        htm_factory: Callable[..., HTM], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    htm = htm_factory(robot="Ada", working_memory_tokens=100)
    first = htm.add(BIG, key="Big")
    htm.recall("tabs-over-spaces reason")
    htm.update("Big", BIG + " revised", expected_version=first.version)
    for _ in range(3):
        htm.recall("tabs-over-spaces reason")
    assert len(too_large(caplog)) == 2
