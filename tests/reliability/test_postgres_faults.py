"""Faults: the PostgreSQL server goes away under load, and the embedder fails.

The server tests start their OWN pgserver instance (PostgreSQL 16 + pgvector) in a temporary
directory, so they can stop it with ``pg_ctl stop -m fast`` (what a crash of the server or
a restart by an operator looks like to clients: every connection is cut) and start it again
on the same socket. While it is down every call raises ``DatabaseUnavailableError`` (never
a raw driver exception); once it is back, the first call on a dead pooled connection
replaces it and runs again (nothing had been committed), so the same ``HTM`` objects work
again with nothing lost and no error.

The embedder tests run on both backends with a real ``HashingEmbedder`` behind a switch that
makes it raise (an unreachable embedding server): in the foreground ``add`` raises
``EmbeddingError`` and stores nothing; in background mode ``add`` stores the memory at once,
the vector stays pending and is retried, and nothing is dropped.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.errors import DatabaseUnavailableError, EmbeddingError, StoreError

pytestmark = pytest.mark.postgres


class OwnServer:
    """A pgserver instance this module can stop and start."""

    def __init__(self) -> None:
        import pgserver

        self.pgdata = Path(tempfile.mkdtemp(prefix="htm-faults-"))
        self.server = pgserver.get_server(str(self.pgdata), cleanup_mode="stop")
        self.url = self.server.get_uri()

    def stop(self) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata,
               user=self.server.system_user, timeout=30)

    def start(self) -> None:
        self.server.ensure_postgres_running()
        assert self.server.get_uri() == self.url

    def close(self) -> None:
        self.server.cleanup()
        shutil.rmtree(self.pgdata, ignore_errors=True)


@pytest.fixture(scope="module")
def own_server() -> Iterator[OwnServer]:
    pytest.importorskip("pgserver")
    server = OwnServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def own_url(own_server: OwnServer) -> Iterator[str]:
    from tests.pg import fresh_database

    own_server.start()  # a failed test may have left it stopped
    yield from fresh_database(own_server.url)


def all_contents(htm: HTM) -> list[str]:
    return sorted(m.content for batch in htm.store.iter_memories(include_forgotten=True)
                  for m in batch)


def test_calls_while_down_raise_database_unavailable(own_server: OwnServer, own_url: str) -> None:
    """Every entry point gives DatabaseUnavailableError while the server is down; then recovers."""
    htm = HTM(robot="solo", database_url=own_url, embedder=HashingEmbedder())
    try:
        htm.add("written before the outage", key="before")
        own_server.stop()
        try:
            calls: list[Callable[[], Any]] = [
                lambda: htm.add("written during the outage"),
                lambda: htm.add_many(["one", "two"]),
                lambda: htm.recall("outage"),
                lambda: htm.recall("outage", strategy="fulltext"),
                lambda: htm.retrieve("before"),
                lambda: htm.forget("before", confirm=True),
                lambda: htm.stats(),
                lambda: htm.operations(),
            ]
            for call in calls:
                with pytest.raises(DatabaseUnavailableError, match="check the server is running"):
                    call()
            with pytest.raises(DatabaseUnavailableError):
                HTM(robot="late", database_url=own_url, embedder=HashingEmbedder())
        finally:
            own_server.start()
        # Same HTM object, dead pooled connections: the first call replaces them.
        assert htm.retrieve("before") is not None
        htm.add("written after the outage", key="after")
        assert all_contents(htm) == ["written after the outage", "written before the outage"]
        assert [h.memory.key for h in htm.recall("outage", strategy="fulltext", limit=5)] \
            and htm.stats().long_term_total == 2
        # The call that failed during the outage changed nothing: "before" is not forgotten.
        assert htm.store.get("before") is not None
    finally:
        htm.close()


def test_first_call_after_a_restart_succeeds(own_server: OwnServer, own_url: str) -> None:
    """Pooled connections are not pinged before use: after a restart the first write, and
    after another the first read, meet a dead connection, which is replaced and the call
    run again (it had committed nothing), so neither raises and nothing is doubled."""
    htm = HTM(robot="solo", database_url=own_url, embedder=HashingEmbedder())
    try:
        htm.add("written before the restarts", key="before")
        own_server.stop()
        own_server.start()
        htm.add("first call after a restart", key="after")
        assert all_contents(htm) == ["first call after a restart", "written before the restarts"]
        own_server.stop()
        own_server.start()
        hits = htm.recall("restart", strategy="hybrid", limit=5)
        assert [h.memory.key for h in hits][:2] and {h.memory.key for h in hits} <= {"before",
                                                                                     "after"}
        assert htm.stats().long_term_total == 2
    finally:
        htm.close()


def prepared(conn: Any) -> list[str]:
    """The statements prepared in ``conn``'s session (the searches, the recall check)."""
    return [str(r[0]) for r in conn.execute("SELECT statement FROM pg_prepared_statements")
            if "ts_rank" in r[0] or "working_version" in r[0]]


def test_prepared_recall_reads_survive_a_restart(own_server: OwnServer, own_url: str) -> None:
    """The recall path's reads run on the store's own connection, where psycopg prepares a
    statement run five times; after a restart that connection is dead: the first recall
    replaces it (a new session, nothing prepared yet), gets the same answer, and the
    statements are prepared again on the new connection."""
    htm = HTM(robot="solo", database_url=own_url, embedder=HashingEmbedder())
    try:
        htm.add_many([f"restart note {i} about deploy windows" for i in range(30)])
        first = [h.memory.key for h in htm.recall("deploy windows", limit=5)]
        for _ in range(8):
            assert [h.memory.key for h in htm.recall("deploy windows", limit=5)] == first
        before = htm.store.database.raw_connection  # type: ignore[attr-defined]
        assert before is not None and prepared(before)
        own_server.stop()
        own_server.start()
        assert [h.memory.key for h in htm.recall("deploy windows", limit=5)] == first
        after = htm.store.database.raw_connection  # type: ignore[attr-defined]
        assert after is not before and not after.broken
        for _ in range(8):
            assert [h.memory.key for h in htm.recall("deploy windows", limit=5)] == first
        assert prepared(after)
    finally:
        htm.close()


def test_restart_under_load_loses_nothing(own_server: OwnServer, own_url: str) -> None:
    """Three writer threads (own HTM each) keep adding while the server is stopped and started.

    While it is down they get DatabaseUnavailableError/StoreError only; every add that
    returned is in the store afterwards; nothing that was not attempted appears; retrying
    the failed adds (same content, so the same generated key) stores each exactly once.
    """
    stop = threading.Event()
    phase = {"value": "up"}
    log: dict[str, dict[str, Any]] = {}
    htms = [HTM(robot=f"w{i}", database_url=own_url, embedder=HashingEmbedder(),
                working_memory_tokens=500) for i in range(3)]

    def writer(htm: HTM) -> None:
        mine: dict[str, Any] = {"ok": [], "failed": [], "errors": set(), "raw": [],
                                "ok_after": 0, "wm_over": 0}
        log[htm.robot] = mine
        j = 0
        while not stop.is_set():
            content = f"{htm.robot} event {j} marker{htm.robot}"
            j += 1
            seen_phase = phase["value"]
            try:
                htm.add(content)
                mine["ok"].append(content)
                if seen_phase == "restarted":
                    mine["ok_after"] += 1
            except StoreError as exc:
                mine["failed"].append(content)
                mine["errors"].add(type(exc).__name__)
                time.sleep(0.02)
            except Exception as exc:  # anything else is the bug we look for
                mine["raw"].append(repr(exc))
            if htm.working_memory.tokens > htm.working_memory.max_tokens:
                mine["wm_over"] += 1

    threads = [threading.Thread(target=writer, args=(h,)) for h in htms]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        own_server.stop()
        phase["value"] = "down"
        time.sleep(1.5)
        own_server.start()
        phase["value"] = "restarted"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
                log[h.robot]["ok_after"] >= 5 for h in htms):
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)

        for robot, mine in log.items():
            assert mine["raw"] == [], (robot, mine["raw"])
            assert mine["failed"], f"{robot} never saw the outage"
            assert mine["errors"] <= {"DatabaseUnavailableError", "StoreError"}, mine["errors"]
            assert "DatabaseUnavailableError" in mine["errors"]
            assert mine["ok_after"] >= 5, f"{robot} did not recover"
            assert mine["wm_over"] == 0
        stored = set(all_contents(htms[0]))
        attempted = {c for mine in log.values() for c in mine["ok"] + mine["failed"]}
        returned = {c for mine in log.values() for c in mine["ok"]}
        assert returned <= stored, "an add that returned is missing"
        assert stored <= attempted, "a memory nobody added appeared"
        # Retrying every failed add is safe and completes the set, each exactly once.
        for htm in htms:
            htm.add_many(log[htm.robot]["failed"])
        contents = all_contents(htms[0])
        assert sorted(contents) == sorted(attempted)
        assert len(contents) == len(set(contents))
    finally:
        stop.set()
        own_server.start()
        for htm in htms:
            htm.close()


def test_background_worker_survives_an_outage(own_server: OwnServer, own_url: str) -> None:
    """Vectors pending when the server goes away are filled once it is back, not dropped."""
    embedder = SwitchableEmbedder()
    embedder.down.set()  # keep the memories pending until the server is stopped
    htm = HTM(robot="bg", database_url=own_url, embedder=embedder, background_embeddings=True)
    try:
        htm.add_many([f"pending across the outage {i}" for i in range(8)])
        assert htm.stats().pending_embeddings == 8
        own_server.stop()
        try:
            embedder.down.clear()  # the embedder works now, the database does not
            with pytest.raises(EmbeddingError):
                htm.flush(timeout=20)
        finally:
            own_server.start()
        htm.flush(timeout=60)
        assert htm.stats().pending_embeddings == 0
        hits = htm.recall("pending across the outage 5", strategy="vector", limit=1)
        assert hits[0].memory.content == "pending across the outage 5"
    finally:
        htm.close()


# -- the embedder failing, on both backends ---------------------------------------------


class SwitchableEmbedder:
    """A real HashingEmbedder that raises while ``down`` is set (an unreachable server)."""

    name = "switchable-hashing-64"

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=64)
        self.down = threading.Event()
        self.calls = 0

    def _check(self) -> None:
        self.calls += 1
        if self.down.is_set():
            raise ConnectionError("embedding server refused the connection")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self._check()
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self._check()
        return self.inner.embed_query(text)


def test_failing_embedder_foreground_stores_nothing(htm_factory: Callable[..., HTM]) -> None:
    embedder = SwitchableEmbedder()
    htm = htm_factory(robot="fg", embedder=embedder)
    htm.add("kept from before", key="kept")
    before = (htm.stats().long_term_total, len(htm.operations(limit=10_000)),
              sorted(htm.working_memory.keys()))
    embedder.down.set()
    with pytest.raises(EmbeddingError, match="nothing was stored"):
        htm.add("lost if we are careless")
    with pytest.raises(EmbeddingError):
        htm.add_many(["a", "b", "c"])
    with pytest.raises(EmbeddingError):
        htm.recall("careless")  # hybrid needs the query vector
    after = (htm.stats().long_term_total, len(htm.operations(limit=10_000)),
             sorted(htm.working_memory.keys()))
    assert after == before
    assert [h.memory.key for h in htm.recall("kept", strategy="fulltext")] == ["kept"]
    embedder.down.clear()
    htm.add("lost if we are careless")
    assert htm.stats().long_term_total == 2 and htm.stats().pending_embeddings == 0


def test_failing_embedder_background_queues_and_retries(htm_factory: Callable[..., HTM]) -> None:
    embedder = SwitchableEmbedder()
    embedder.down.set()
    htm = htm_factory(robot="bg", embedder=embedder, background_embeddings=True)
    contents = [f"queued while the embedder is down number {i}" for i in range(12)]
    for c in contents[:6]:
        htm.add(c)
    htm.add_many(contents[6:])
    # Stored at once, found by full text, vectors pending, the worker failing.
    assert htm.stats().long_term_total == 12
    assert len(htm.recall("queued embedder", strategy="fulltext", limit=50)) == 12
    with pytest.raises(EmbeddingError, match="will be embedded once the embedder works"):
        htm.flush(timeout=30)
    stats = htm.stats()
    # the embedder is down, no text is at fault: all stay pending, none is marked as failing
    assert stats.pending_embeddings == 12 and stats.failed_embeddings == 0
    assert stats.extra["failed_embedding_passes"] >= 1
    embedder.down.clear()
    htm.flush(timeout=60)
    assert htm.stats().pending_embeddings == 0
    hits = htm.recall("queued while the embedder is down number 3", strategy="vector", limit=1)
    assert hits[0].memory.content == contents[3]


def test_pending_vectors_survive_a_restart(htm_factory: Callable[..., HTM]) -> None:
    """Closed while the embedder is down: the next background HTM on the store finishes."""
    broken = SwitchableEmbedder()
    broken.down.set()
    first = htm_factory(robot="bg", embedder=broken, background_embeddings=True)
    first.add_many([f"left pending {i}" for i in range(5)])
    first.close()
    healed = SwitchableEmbedder()
    second = htm_factory(robot="bg", embedder=healed, background_embeddings=True)
    second.flush(timeout=60)
    assert second.stats().pending_embeddings == 0
    assert second.stats().long_term_total == 5

