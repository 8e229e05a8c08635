"""Export/import (JSON Lines) and store-to-store copy, on real SQLite files (and PostgreSQL).

The 10k copy is interrupted half-way by raising from the progress callback, exactly as a
Ctrl-C between two batches would, then resumed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from htm_core import HTM, FrozenClock, HashingEmbedder, transfer
from htm_core.errors import StoreError, ValidationError
from htm_core.models import Memory
from htm_core.store import open_store
from htm_core.store.base import LongTermStore
from htm_core.transfer import (
    EXPORT_FORMAT,
    copy_store,
    export_jsonl,
    import_jsonl,
    verify_copy,
)


def _all(store: LongTermStore) -> dict[str, Memory]:
    return {m.key: m for batch in store.iter_memories(include_embedding=True) for m in batch}


def _fields(m: Memory) -> dict[str, Any]:
    return {"content": m.content, "robot": m.robot, "importance": m.importance,
            "token_count": m.token_count, "created_at": m.created_at,
            "last_accessed": m.last_accessed, "access_count": m.access_count, "tags": m.tags,
            "metadata": m.metadata, "forgotten_at": m.forgotten_at, "embedder": m.embedder,
            "content_hash": m.content_hash, "kind": m.kind, "source": m.source,
            "confidence": m.confidence}


def _assert_same(a: dict[str, Memory], b: dict[str, Memory], *, embeddings: bool) -> None:
    assert sorted(a) == sorted(b)
    for key, m in a.items():
        other = b[key]
        expected = _fields(m)
        if not embeddings:
            expected["embedder"] = None
        assert _fields(other) == expected, key
        if embeddings and m.embedding is not None:
            # The store keeps float32 unit vectors and re-normalises on write: equal to 1 ulp.
            assert other.embedding is not None
            np.testing.assert_allclose(other.embedding, m.embedding, rtol=0, atol=1e-6)
        else:
            assert other.embedding is None


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def new_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """Makes fresh, empty databases on one backend (every database of a test on the same one)."""
    made: list[Iterator[str]] = []
    count = 0

    def make() -> str:
        nonlocal count
        count += 1
        if request.param == "sqlite":
            return str(tmp_path / f"db{count}.db")
        pytest.importorskip("htm_core.store.postgres")
        from tests.pg import fresh_database

        gen = fresh_database(request.getfixturevalue("postgres_server_url"))
        made.append(gen)
        return next(gen)

    yield make
    for gen in made:
        next(gen, None)


@pytest.fixture
def populated(new_url: Callable[[], str], clock: FrozenClock) -> Iterator[HTM]:
    """A store with two robots, tags, metadata, accesses and a forgotten memory."""
    with HTM(robot="alice", database_url=new_url(), embedder=HashingEmbedder(),
             clock=clock, working_memory_tokens=40) as htm:
        htm.add("User prefers Vim keybindings", importance=9.0, key="pref-vim",
                tags=["user:preferences:editor"], metadata={"source": "chat", "n": 1},
                kind="preference", source="chat", confidence=0.8)
        clock.advance(hours=1)
        htm.add("Lunch was noodles — 🍜 délicieux", importance=1.5, tags=["food"])
        clock.advance(days=2)
        htm.add("Deploy failed: missing migration", importance=5.0, key="deploy",
                metadata={"nested": {"a": [1, 2, None]}}, source="import:ci.log")
        htm.add("A note that will be forgotten", key="gone")
        htm.forget("gone", confirm=True)
        clock.advance(minutes=30)
        htm.recall("vim keybindings", limit=2)  # recalled memories gain accesses too
        htm.retrieve("pref-vim")
        htm.retrieve("pref-vim")
        with HTM(robot="bob", store=htm.store, embedder=HashingEmbedder(), clock=clock) as bob:
            bob.add("Bob likes tea", importance=3.0, key="bob-tea", tags=["user:preferences"])
        yield htm


def test_export_then_import_round_trips_every_field(populated: HTM, tmp_path: Path,
                                                    new_url: Callable[[], str]) -> None:
    path = tmp_path / "out.jsonl"
    assert export_jsonl(populated.store, path, with_embeddings=True) == 5
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert header["format"] == EXPORT_FORMAT and header["count"] == 5
    assert header["embedder"] == "hashing-384" or header["embedder"].startswith("hashing")
    assert len(lines) == 7  # header, 5 memories, the end line with count and checksum
    assert json.loads(lines[-1])["count"] == 5
    target = open_store(new_url())
    try:
        result = import_jsonl(target, path)
        assert (result.seen, result.written, result.skipped) == (5, 5, 0)
        src, dst = _all(populated.store), _all(target)
        _assert_same(src, dst, embeddings=True)
        assert src["pref-vim"].access_count >= 2 and dst["gone"].forgotten_at is not None
        assert target.embedding_info() == populated.store.embedding_info()
        # the forgotten one stays hidden from search and get until restored
        assert target.get("gone") is None
        assert target.get("gone", include_forgotten=True) is not None
        # re-running the import is a no-op: nothing duplicated, nothing touched
        again = import_jsonl(target, path)
        assert (again.written, again.skipped) == (0, 5)
        _assert_same(src, _all(target), embeddings=True)
    finally:
        target.close()


def test_import_without_embeddings_embeds_with_the_given_embedder(
        populated: HTM, tmp_path: Path, new_url: Callable[[], str]) -> None:
    path = tmp_path / "plain.jsonl"
    export_jsonl(populated.store, path)
    assert "embedding" not in path.read_text(encoding="utf-8").splitlines()[1]
    target = open_store(new_url())
    try:
        result = import_jsonl(target, path, embedder=HashingEmbedder())
        assert result.embedded == 5 and result.written == 5
        got = _all(target)
        assert sorted(got) == sorted(_all(populated.store))
        assert all(m.embedding is not None for m in got.values())
        with HTM(robot="alice", store=target, embedder=HashingEmbedder()) as htm:
            assert htm.recall("vim keybindings", strategy="vector", limit=1)[0].memory.key \
                == "pref-vim"
    finally:
        target.close()


def test_interrupted_import_resumes_without_duplicates(populated: HTM, tmp_path: Path,
                                                       new_url: Callable[[], str]) -> None:
    path = tmp_path / "out.jsonl"
    export_jsonl(populated.store, path, with_embeddings=True)
    target = open_store(new_url())

    def stop(done: int, total: int | None) -> None:
        if done >= 2:
            raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            import_jsonl(target, path, batch_size=2, progress=stop)
        assert len(_all(target)) == 2
        result = import_jsonl(target, path, batch_size=2)
        assert (result.written, result.skipped) == (3, 2)
        _assert_same(_all(populated.store), _all(target), embeddings=True)
    finally:
        target.close()


@pytest.mark.parametrize(("content", "message"), [
    ("", "empty"),
    ("not json\n", "line 1 is not valid JSON"),
    ("[1, 2]\n", "first line is not an htm export header"),
    ('{"format": "htm-export", "version": 99}\n', "version 99"),
    ('{"format": "htm-export", "version": 1}\n{"key": "k"}\n', "line 2: missing field"),
    ('{"format": "htm-export", "version": 1}\n{"key": "k", "content": "c", "robot": "r", '
     '"created_at": "yesterday"}\n', "created_at"),
    ('{"format": "htm-export", "version": 1}\n{broken\n', "line 2 is not valid JSON"),
    ('{"format": "htm-export", "version": 1}\n{"key": "k", "content": "c", "robot": "r", '
     '"created_at": "2024-05-01T00:00:00+00:00", "kind": "facts"}\n', "kind must be one of"),
    ('{"format": "htm-export", "version": 1}\n{"key": "k", "content": "c", "robot": "r", '
     '"created_at": "2024-05-01T00:00:00+00:00", "confidence": 2}\n', "confidence must be"),
])
def test_bad_import_files_are_rejected_with_the_line(tmp_path: Path, content: str,
                                                     message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    target = open_store(tmp_path / "dst.db")
    try:
        with pytest.raises(ValidationError, match=message):
            import_jsonl(target, path)
        assert _all(target) == {}
    finally:
        target.close()


def test_a_line_without_a_kind_imports_as_an_episodic_memory(tmp_path: Path) -> None:
    """A file written before memories had kinds: its memories are ``episodic``, with no
    source or confidence, whatever the kind rules would say of their text."""
    path = tmp_path / "v1.jsonl"
    path.write_text('{"format": "htm-export", "version": 1}\n{"key": "k", "content": '
                    '"My name is Ada", "robot": "r", "created_at": "2024-05-01T00:00:00+00:00"}'
                    '\n', encoding="utf-8")
    target = open_store(tmp_path / "dst.db")
    try:
        assert import_jsonl(target, path).written == 1
        m = target.get("k")
        assert m is not None and (m.kind, m.source, m.confidence) == ("episodic", None, None)
    finally:
        target.close()


def test_copy_refuses_the_same_database(tmp_path: Path) -> None:
    store = open_store(tmp_path / "a.db")
    other = open_store(tmp_path / "a.db")
    try:
        with pytest.raises(ValidationError, match="same database"):
            copy_store(store, other)
    finally:
        store.close()
        other.close()


def test_verify_detects_a_different_memory_under_the_same_key(
        populated: HTM, new_url: Callable[[], str]) -> None:
    target = open_store(new_url())
    try:
        with HTM(robot="alice", store=target, embedder=HashingEmbedder()) as htm:
            htm.add("User prefers Vim keybindings", key="pref-vim", importance=2.0)
        with pytest.raises(StoreError, match="pref-vim"):
            copy_store(populated.store, target, sample=1000)
    finally:
        target.close()


N = 10_000


@pytest.fixture(scope="module")
def big_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A SQLite store of 10k memories from 3 robots, a few forgotten."""
    from datetime import datetime, timezone

    clock = FrozenClock(datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc))
    url = str(tmp_path_factory.mktemp("big") / "big.db")
    words = ["vim", "postgres", "deploy", "lunch", "weather", "python", "tests", "budget",
             "kafka", "tea", "hiking", "invoice", "release", "docker", "latency"]
    rng = np.random.default_rng(7)
    for r, robot in enumerate(("alice", "bob", "carol")):
        with HTM(robot=robot, database_url=url, embedder=HashingEmbedder(), clock=clock,
                 working_memory_tokens=1000) as htm:
            items = []
            for i in range(r, N, 3):
                picked = " ".join(words[j] for j in rng.choice(len(words), 4, replace=False))
                items.append({"content": f"memory {i}: {picked}", "key": f"k{i:05d}",
                              "importance": float(i % 11), "tags": [f"topic:{words[i % 15]}"],
                              "created_at": clock() - timedelta(minutes=i)})
            for start in range(0, len(items), 1000):
                htm.add_many(items[start:start + 1000])
            if robot == "bob":
                for i in (1, 4, 7):
                    htm.forget(f"k{i:05d}", confirm=True)
    yield url


def _recall_keys(url: str) -> list[list[str]]:
    """Hybrid recall results, read-only (the facade's recall would touch the memories)."""
    with HTM(robot="alice", database_url=url, embedder=HashingEmbedder()) as htm:
        return [_ranked_keys(htm, q)
                for q in ("vim deploy", "postgres latency budget", "lunch with tea")]


def _ranked(htm: HTM, query: str) -> list[Any]:
    from htm_core.recall import search
    from htm_core.store import SearchFilters

    return search(htm.store, query=query, query_vector=lambda: htm.embedder.embed_query(query),
                  strategy="hybrid", limit=10, filters=SearchFilters())


def _ranked_keys(htm: HTM, query: str) -> list[str]:
    ranked = _ranked(htm, query)
    return [m.key for m in htm.store.get_many([r.id for r in ranked])]


def _interrupted_copy_then_resume(source_url: str, target_url: str) -> None:
    source, target = open_store(source_url), open_store(target_url)
    calls: list[int] = []

    def interrupt_half_way(done: int, total: int | None) -> None:
        calls.append(done)
        assert total == N
        if done >= N // 2:
            raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            copy_store(source, target, batch_size=500, progress=interrupt_half_way)
        partial = _all(target)
        assert len(partial) == N // 2  # whole batches only
        result = copy_store(source, target, batch_size=500, sample=200)
        assert result.verified
        assert (result.seen, result.written, result.skipped) == (N, N // 2, N // 2)
        counts = target.counts("alice")
        assert counts.total + counts.forgotten == N and counts.forgotten == 3
        verify_copy(source, target, sample=500, seed=3)
    finally:
        source.close()
        target.close()
    assert _recall_keys(target_url) == _recall_keys(source_url)


def test_copy_10k_sqlite_to_sqlite_interrupted_and_resumed(big_source: str, tmp_path: Path) -> None:
    _interrupted_copy_then_resume(big_source, str(tmp_path / "copy.db"))


@pytest.mark.postgres
@pytest.mark.slow
def test_copy_10k_sqlite_to_postgres_interrupted_and_resumed(big_source: str,
                                                             postgres_server_url: str) -> None:
    pytest.importorskip("htm_core.store.postgres")
    from tests.pg import fresh_database

    for url in fresh_database(postgres_server_url):
        _interrupted_copy_then_resume(big_source, url)


def _bulk_loads(store: LongTermStore) -> int:
    return len(store.operations(op="bulk_load", limit=100))


@pytest.mark.parametrize("how", ["copy", "import"])
def test_a_large_move_into_a_smaller_store_loads_in_bulk(
        populated: HTM, new_url: Callable[[], str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Into a store holding no more memories than are coming in (a new store, a resumed
    run), copy and import write inside ``bulk_load()``: on PostgreSQL the HNSW graph is
    built once at the end instead of taking each row (10k rows took 37 s). Into a larger
    store its indexes stay as they are. ``BULK_MIN`` is lowered to this store's 5."""
    monkeypatch.setattr(transfer, "BULK_MIN", 5)
    path = tmp_path / "out.jsonl"
    export_jsonl(populated.store, path, with_embeddings=True)

    def move(target: LongTermStore) -> None:
        if how == "copy":
            copy_store(populated.store, target)
        else:
            import_jsonl(target, path)

    empty, larger = open_store(new_url()), open_store(new_url())
    try:
        move(empty)
        assert _bulk_loads(empty) == 2  # the indexes dropped (or the load started), then built
        _assert_same(_all(populated.store), _all(empty), embeddings=True)
        with HTM(robot="alice", store=larger, embedder=HashingEmbedder()) as other:
            other.add_many([f"an older memory {i}" for i in range(6)])
        move(larger)
        assert _bulk_loads(larger) == 0
        assert len(_all(larger)) == 11
    finally:
        empty.close()
        larger.close()
