"""A large ``add_many`` holds the cyclic garbage collector off while it checks and writes.

The collector is process-wide state, so these tests check what a caller can see: it is off
while a large batch is checked and written (the clock, called by both steps, records it),
on while the embedder (user code) runs, on again afterwards and after a batch that failed,
untouched for small batches, and left off when the process had switched it off itself.
Both backends, real databases.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone

import pytest

from htm_core import HTM, FrozenClock
from htm_core._intake import GC_PAUSE_MIN
from htm_core.embeddings import HashingEmbedder
from htm_core.errors import DuplicateKeyError


class RecordingEmbedder(HashingEmbedder):
    """The hashing embedder, noting whether the collector was on at each call."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[bool] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen.append(gc.isenabled())
        return super().embed_documents(texts)


class RecordingClock(FrozenClock):
    """A frozen clock noting whether the collector was on at each reading."""

    def __init__(self) -> None:
        super().__init__(datetime(2024, 5, 15, 12, tzinfo=timezone.utc))
        self.seen: list[bool] = []

    def __call__(self) -> datetime:
        self.seen.append(gc.isenabled())
        return super().__call__()


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def batch(n: int, start: int = 0) -> list[dict[str, str]]:
    return [{"content": f"note {i} about the garden", "key": f"k{i}"} for i in range(start, start + n)]


@pytest.mark.usefixtures("collector_on")
def test_large_batch_pauses_the_collector_and_switches_it_back_on(
        htm_factory: Callable[..., HTM]) -> None:
    embedder, clock = RecordingEmbedder(), RecordingClock()
    htm = htm_factory(embedder=embedder, clock=clock)
    clock.seen.clear()
    htm.add_many(batch(GC_PAUSE_MIN))
    # Read for each item's time (the check) and for the working-memory change (the write).
    assert len(clock.seen) > GC_PAUSE_MIN and not any(clock.seen)
    assert embedder.seen and all(embedder.seen)  # the embedder runs with the collector on
    assert gc.isenabled()
    clock.seen.clear()
    htm.add_many(batch(GC_PAUSE_MIN - 1, start=10_000))  # small: left alone
    assert clock.seen and all(clock.seen)
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_failed_batch_switches_the_collector_back_on(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    htm.add("taken", key="k5")
    with pytest.raises(DuplicateKeyError):
        htm.add_many(batch(GC_PAUSE_MIN))  # k5 holds other content: nothing is written
    assert gc.isenabled()
    assert htm.retrieve("k6") is None


def test_collector_switched_off_by_the_process_stays_off(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    was = gc.isenabled()
    gc.disable()
    try:
        htm.add_many(batch(GC_PAUSE_MIN))
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()
