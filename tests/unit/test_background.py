"""Background embeddings: ``add`` returns at once, a worker fills vectors, nothing is lost.

Real SQLite files throughout; the embedders are the hashing embedder behind a gate, a
delay or a switch that makes it fail, so the tests can hold the worker where they need it.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.background import EmbeddingWorker
from htm_core.errors import EmbeddingError

ROOT = Path(__file__).resolve().parents[2]


class ControlledEmbedder:
    """HashingEmbedder that can be held at a gate or made to fail; records finished calls."""

    def __init__(self, dim: int = 64) -> None:
        self._inner = HashingEmbedder(dim=dim)
        self.name = self._inner.name
        self.gate = threading.Event()
        self.gate.set()
        self.failing = False
        self.entered = threading.Event()
        self.calls: list[int] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.entered.set()
        if not self.gate.wait(timeout=60):
            raise RuntimeError("test gate never opened")
        if self.failing:
            raise RuntimeError("embedding service unavailable")
        self.calls.append(len(texts))
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._inner.embed_query(text)


def _worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("htm-embedder")]


# -- the worker on its own -----------------------------------------------------------


def test_worker_drains_then_flush_returns() -> None:
    queue = list(range(7))
    done: list[int] = []

    def fill() -> int:
        batch = queue[:3]
        del queue[:3]
        done.extend(batch)
        return len(batch)

    worker = EmbeddingWorker(fill, name="htm-embedder-test")
    worker.start()
    worker.flush(timeout=10)
    assert done == list(range(7)) and worker.embedded == 7
    queue.extend([7, 8])
    worker.flush(timeout=10)  # a flush after new work waits for a fresh pass
    assert done[-2:] == [7, 8]
    assert worker.stop(timeout=10) and not worker.alive


def test_worker_retries_with_backoff_and_flush_reports_the_error() -> None:
    attempts: list[float] = []
    healthy = threading.Event()

    def fill() -> int:
        attempts.append(time.monotonic())
        if not healthy.is_set():
            raise RuntimeError("boom")
        return 0

    worker = EmbeddingWorker(fill, initial_backoff=0.05, max_backoff=0.2)
    worker.start()
    with pytest.raises(EmbeddingError, match="failed 3 times in a row while flushing: boom"):
        worker.flush(timeout=10)
    assert worker.failures >= 3 and isinstance(worker.last_error, RuntimeError)
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps[1] >= 0.09  # the second wait is twice the first
    healthy.set()
    worker.flush(timeout=10)
    assert worker.last_error is None
    worker.stop()


def test_flush_timeout_and_dead_worker() -> None:
    release = threading.Event()

    def fill() -> int:
        release.wait(10)
        return 0

    worker = EmbeddingWorker(fill)
    worker.start()
    with pytest.raises(EmbeddingError, match=r"flush timed out after 0\.2 s"):
        worker.flush(timeout=0.2)
    release.set()
    assert worker.stop(timeout=10)
    with pytest.raises(EmbeddingError, match="not running"):
        worker.flush()


def test_worker_rejects_bad_backoff() -> None:
    with pytest.raises(ValueError, match="initial_backoff"):
        EmbeddingWorker(lambda: 0, initial_backoff=0)


# -- through HTM ---------------------------------------------------------------------


def test_thousand_adds_return_before_embeddings_exist(sqlite_url: str, clock: Any) -> None:
    embedder = ControlledEmbedder()
    embedder.gate.clear()  # hold the worker inside its first batch
    with HTM(database_url=sqlite_url, clock=clock, embedder=embedder,
             background_embeddings=True) as htm:
        assert htm.background_embeddings
        for i in range(1000):
            m = htm.add(f"note {i}: the parrot number {i} said hello", key=f"n{i}")
            assert m.embedding is None
        assert embedder.calls == []
        s = htm.stats()
        assert s.long_term_total == 1000 and s.pending_embeddings == 1000
        assert s.extra["background_embeddings"] is True
        # Full-text recall works at once; the vector arm has nothing yet.
        assert [h.memory.key for h in htm.recall("parrot 417", strategy="fulltext",
                                                 limit=1)] == ["n417"]
        assert htm.recall("parrot", strategy="vector") == []
        embedder.gate.set()
        htm.flush(timeout=120)
        s = htm.stats()
        assert s.pending_embeddings == 0 and s.failed_embeddings == 0
        assert sum(embedder.calls) == 1000 and max(embedder.calls) <= 64
        memory = htm.store.get("n417", include_embedding=True)
        assert memory is not None and memory.embedder == embedder.name
        assert [h.memory.key for h in htm.recall("note 417: the parrot number 417 said hello",
                                                 strategy="vector", limit=1)] == ["n417"]
    assert _worker_threads() == []


def test_failing_embedder_loses_nothing_and_a_new_htm_finishes(store_url: str,
                                                               clock: Any) -> None:
    broken = ControlledEmbedder()
    broken.failing = True
    with HTM(database_url=store_url, clock=clock, embedder=broken,
             background_embeddings=True, embed_batch_size=16) as htm:
        htm.add_many([f"memory {i} about the garden" for i in range(40)])
        with pytest.raises(EmbeddingError, match="embedding service unavailable"):
            htm.flush(timeout=30)
        s = htm.stats()
        assert s.long_term_total == 40 and s.pending_embeddings == 40
        assert s.failed_embeddings == 0  # an embedder that is down marks no memory
        assert s.extra["failed_embedding_passes"] >= 3
        assert len(htm.recall("garden", strategy="fulltext", limit=50)) == 40
        started = time.monotonic()
    assert time.monotonic() - started < 5  # close stopped the worker in its backoff
    assert _worker_threads() == []
    fixed = ControlledEmbedder()
    with HTM(database_url=store_url, clock=clock, embedder=fixed,
             background_embeddings=True) as htm:
        htm.flush(timeout=60)  # the pending ones were picked up on start
        assert htm.stats().pending_embeddings == 0
        assert sum(fixed.calls) == 40
        assert len(htm.recall("garden", strategy="vector", limit=50)) == 40


def test_foreground_flush_fills_leftovers(store_url: str, clock: Any) -> None:
    broken = ControlledEmbedder()
    broken.failing = True
    with HTM(database_url=store_url, clock=clock, embedder=broken,
             background_embeddings=True) as htm:
        htm.add_many(["left over one", "left over two"])
    with HTM(database_url=store_url, clock=clock, embedder=ControlledEmbedder()) as htm:
        assert not htm.background_embeddings
        assert htm.stats().pending_embeddings == 2
        htm.flush()
        assert htm.stats().pending_embeddings == 0


def test_close_mid_batch_stops_cleanly(sqlite_url: str, clock: Any) -> None:
    embedder = ControlledEmbedder()
    embedder.gate.clear()
    htm = HTM(database_url=sqlite_url, clock=clock, embedder=embedder,
              background_embeddings=True, embed_batch_size=8)
    htm.add_many([f"thing {i}" for i in range(20)])
    assert embedder.entered.wait(10)
    threading.Timer(0.2, embedder.gate.set).start()
    htm.close()  # waits for the batch in flight, then stops
    assert _worker_threads() == []
    with HTM(database_url=sqlite_url, clock=clock, embedder=HashingEmbedder(dim=64)) as again:
        s = again.stats()
        assert s.long_term_total == 20 and s.pending_embeddings == 12


_CHILD = """
import os, signal, sys, time
sys.path.insert(0, {root!r})
from htm_core import HTM, HashingEmbedder

class Slow(HashingEmbedder):
    def embed_documents(self, texts):
        time.sleep(0.5)
        return super().embed_documents(texts)

htm = HTM(database_url={db!r}, embedder=Slow(dim=64), background_embeddings=True,
          embed_batch_size=8)
for i in range(300):
    htm.add(f"diary entry {{i}} about the lighthouse", key=f"d{{i}}")
print("added", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_killed_process_loses_no_memory(tmp_path: Path, clock: Any) -> None:
    db = str(tmp_path / "killed.db")
    script = textwrap.dedent(_CHILD.format(root=str(ROOT), db=db))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=120, env=env)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert "added" in child.stdout
    with HTM(database_url=db, clock=clock, embedder=HashingEmbedder(dim=64)) as look:
        s = look.stats()
        assert s.long_term_total == 300
        assert 0 < s.pending_embeddings <= 300  # killed mid-way: some vectors still missing
    with HTM(database_url=db, clock=clock, embedder=HashingEmbedder(dim=64),
             background_embeddings=True) as htm:
        htm.flush(timeout=120)
        assert htm.stats().pending_embeddings == 0
        memory = htm.store.get("d123", include_embedding=True)
        assert memory is not None and memory.embedding is not None
        assert [h.memory.key for h in htm.recall("diary entry 123 about the lighthouse",
                                                 strategy="vector", limit=1)] == ["d123"]


def test_vectors_filled_by_another_process_reach_vector_recall(sqlite_url: str,
                                                               clock: Any) -> None:
    embedder = ControlledEmbedder()
    embedder.gate.clear()
    with HTM(database_url=sqlite_url, clock=clock, embedder=embedder, robot="writer",
             background_embeddings=True) as writer, \
            HTM(database_url=sqlite_url, clock=clock, embedder=HashingEmbedder(dim=64),
                robot="reader") as reader:
        writer.add("the purple elephant dances", key="x1")
        reader.add("a completely different note about taxes", key="y")
        assert [h.memory.key for h in reader.recall("purple elephant", strategy="vector")] \
            == ["y"]
        embedder.gate.set()
        writer.flush(timeout=30)
        assert "x1" in [h.memory.key for h in reader.recall("purple elephant",
                                                            strategy="vector")]
