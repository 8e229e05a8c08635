"""The coherence state machine (``test_coherence_property``) driven through the async API.

Every call the machine makes on an ``HTM`` (adds, recalls, retrievals, forgets, restores,
purges, contexts, closes) goes through its async twin on one event loop per example: on
PostgreSQL the twins run natively (a greenlet on the loop's thread, psycopg's async
driver), on SQLite in a worker thread. The invariants are the sync machine's: no context
or recall holds a hidden memory, working memory within budget and equal to the persisted
membership.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from htm_core import HTM
from tests.reliability.test_coherence_property import CoherenceMachine


class ThroughTwins:
    """An ``HTM`` whose methods with an async twin are called through the twin, on
    ``loop``; everything else (``store``, ``working_memory``, ``robot``) is the HTM's."""

    def __init__(self, htm: HTM, loop: asyncio.AbstractEventLoop) -> None:
        self.htm = htm
        self.loop = loop

    def __getattr__(self, name: str) -> Any:
        twin = getattr(self.htm, f"a{name}", None)
        if twin is None or not asyncio.iscoroutinefunction(twin):
            return getattr(self.htm, name)
        return lambda *args, **kwargs: self.loop.run_until_complete(twin(*args, **kwargs))


class AsyncCoherenceMachine(CoherenceMachine):
    """The machine with its instances called through their twins on its own loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        super().__init__()

    def _open(self, name: str) -> HTM:
        return ThroughTwins(super()._open(name), self.loop)  # type: ignore[return-value]

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            self.loop.close()


@pytest.mark.postgres
def test_instances_on_one_store_stay_coherent_through_the_async_api(store_url: str) -> None:
    machine = type("Machine", (AsyncCoherenceMachine,), {"url": store_url})
    run_state_machine_as_test(machine, settings=settings(
        max_examples=6, stateful_step_count=25, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
    probe = HTM(database_url=store_url, embedder="hashing")
    try:
        assert probe.native_async == (not store_url.endswith(".db"))
    finally:
        probe.close()
