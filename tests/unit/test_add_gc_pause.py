"""A large ``add_many`` holds the cyclic garbage collector off while it writes, and only then.

The collector is process-wide state, so these tests check what a caller can see: it is off
during a large batch (an embedder records it), on again afterwards, on again after a batch
that failed, untouched for small batches, and left off when the process had switched it
off itself. Both backends, real databases.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence

import pytest

from htm_core import HTM
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
    embedder = RecordingEmbedder()
    htm = htm_factory(embedder=embedder)
    htm.add_many(batch(GC_PAUSE_MIN))
    assert embedder.seen and not any(embedder.seen)  # off while the batch was embedded
    assert gc.isenabled()
    embedder.seen.clear()
    htm.add_many(batch(GC_PAUSE_MIN - 1, start=10_000))  # small: left alone
    assert embedder.seen and all(embedder.seen)
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
