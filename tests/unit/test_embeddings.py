"""Embedders, the embedding cache, batching, embedder choice and re-embedding, on real SQLite."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.embeddings import Embedder, embedder_name, resolve_embedder
from htm_core.errors import (
    EmbedderMismatchError,
    EmbeddingError,
    InvalidBudgetError,
    MissingDependencyError,
)


class CountingEmbedder:
    """The hashing embedder, recording every call and every text it is asked to embed."""

    def __init__(self, dim: int = 64, name: str | None = None) -> None:
        self._inner = HashingEmbedder(dim=dim)
        self.dim = dim
        self.name = name or self._inner.name
        self.calls: list[list[str]] = []
        self.queries: list[str] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            self.calls.append(list(texts))
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self._inner.embed_query(text)

    @property
    def texts(self) -> list[str]:
        return [t for call in self.calls for t in call]


def test_hashing_embedder_is_deterministic_and_normalised() -> None:
    e = HashingEmbedder(dim=128)
    a, b = e.embed_documents(["User prefers Vim", "User prefers Vim"])
    assert a == b and len(a) == 128
    assert sum(x * x for x in a) == pytest.approx(1.0, rel=1e-5)
    assert isinstance(e, Embedder)
    assert e.embed_query("!!!") != e.embed_query("???")  # no words: still a stable unit vector


def test_embedder_name_falls_back_to_class_and_model() -> None:
    class Anon:
        model = "text-embedding-3-small"

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0] for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            return [1.0]

    assert embedder_name(Anon()) == "Anon:text-embedding-3-small"
    assert embedder_name(HashingEmbedder(dim=32)) == "hashing-v1-32"


def test_resolve_embedder_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    e, how = resolve_embedder("hashing:96")
    assert isinstance(e, HashingEmbedder) and e.dim == 96 and how == "hashing:96 (requested)"
    given = HashingEmbedder()
    assert resolve_embedder(given) == (given, "given")
    with pytest.raises(EmbeddingError, match="unknown embedder 'word2vec'; use 'auto'"):
        resolve_embedder("word2vec")
    with pytest.raises(TypeError, match="embed_documents and embed_query"):
        resolve_embedder(object())
    monkeypatch.setattr("htm_core.embeddings.local_available", lambda: False)
    e, how = resolve_embedder(None)
    assert isinstance(e, HashingEmbedder) and how == "auto: hashing (no local model installed)"


def test_missing_extra_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "langchain_ollama", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "htm-memory\[ollama\]"'):
        resolve_embedder("ollama")


def test_stats_show_embedder_choice_and_token_counter(sqlite_url: str, clock: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTM_EMBEDDER", "hashing:48")
    with HTM(database_url=sqlite_url, clock=clock) as htm:
        htm.add("User prefers Vim keybindings")
        s = htm.stats()
        assert (s.embedder, s.embedding_dim) == ("hashing-v1-48", 48)
        assert s.embedder_choice == "hashing:48 (requested)"
        assert s.token_counter == htm.token_counter.name
        assert "cl100k_base" in s.token_counter
        assert s.extra["embed_batch_size"] == 64 and s.extra["background_embeddings"] is False


def test_stats_name_a_custom_token_counter(sqlite_url: str, clock: Any) -> None:
    class Words:
        name = "words"

        def count(self, text: str) -> int:
            return len(text.split())

    with HTM(database_url=sqlite_url, clock=clock, embedder="hashing",
             token_counter=Words()) as htm:
        assert htm.add("one two three").token_count == 3
        assert htm.stats().token_counter == "words"


def test_no_text_is_embedded_twice(store_url: str, clock: Any) -> None:
    counting = CountingEmbedder()
    with HTM(database_url=store_url, clock=clock, embedder=counting) as htm:
        htm.add("User prefers Vim keybindings", key="a")
        htm.add("User prefers Vim keybindings", key="b")       # same text, other key: LRU hit
        htm.add("User prefers Vim keybindings")                 # generated key: LRU hit
        htm.add_many(["It rained all day", "It rained all day", {"content": "Tea, no sugar"},
                      {"content": "User prefers Vim keybindings", "key": "c"}])
        assert counting.texts == ["User prefers Vim keybindings", "It rained all day",
                                  "Tea, no sugar"]
        assert htm.stats().embedding_cache_hits >= 3
    # A new process (fresh LRU) finds the vectors in the store by content hash.
    again = CountingEmbedder()
    with HTM(database_url=store_url, clock=clock, embedder=again) as htm:
        htm.add_many([{"content": "It rained all day", "key": "d"},
                      {"content": "Tea, no sugar", "key": "e"}, "Brand new text"])
        assert again.texts == ["Brand new text"]
        assert htm.stats().long_term_total == 9  # a, b, c, 3 generated; d, e, 1 generated


def test_add_many_makes_one_call_per_batch(store_url: str, clock: Any) -> None:
    counting = CountingEmbedder()
    with HTM(database_url=store_url, clock=clock, embedder=counting,
             embed_batch_size=10) as htm:
        htm.add_many([f"note number {i}" for i in range(35)])
        assert [len(c) for c in counting.calls] == [10, 10, 10, 5]
        assert htm.stats().embedding_calls == 4
        assert htm.stats().long_term_total == 35
        assert htm.stats().pending_embeddings == 0


def test_default_batch_size_is_64(sqlite_url: str, clock: Any) -> None:
    counting = CountingEmbedder()
    with HTM(database_url=sqlite_url, clock=clock, embedder=counting) as htm:
        htm.add_many([f"fact {i}" for i in range(130)])
    assert [len(c) for c in counting.calls] == [64, 64, 2]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "64"])
def test_bad_batch_size(sqlite_url: str, bad: Any) -> None:
    with pytest.raises(InvalidBudgetError, match="embed_batch_size must be a positive integer"):
        HTM(database_url=sqlite_url, embedder="hashing", embed_batch_size=bad)


def test_failed_batch_writes_nothing(sqlite_url: str, clock: Any) -> None:
    class FailsOnThird(CountingEmbedder):
        def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
            if len(self.calls) == 2:
                raise RuntimeError("GPU fell off the bus")
            return super().embed_documents(texts)

    with HTM(database_url=sqlite_url, clock=clock, embedder=FailsOnThird(),
             embed_batch_size=4) as htm:
        with pytest.raises(EmbeddingError, match="GPU fell off the bus; check it is reachable"):
            htm.add_many([f"item {i}" for i in range(10)])
        assert htm.stats().long_term_total == 0
        assert len(htm.working_memory) == 0


def _make_store(url: str, clock: Any, n: int = 30) -> None:
    with HTM(database_url=url, clock=clock, embedder=HashingEmbedder(dim=64)) as htm:
        htm.add_many([{"content": f"the cat number {i} sleeps on the mat", "key": f"k{i}"}
                      for i in range(n)])
        htm.add("User prefers Vim keybindings", key="vim")


def test_switching_embedder_raises_a_clear_error(store_url: str, clock: Any) -> None:
    _make_store(store_url, clock)
    with pytest.raises(EmbedderMismatchError) as info:
        HTM(database_url=store_url, clock=clock, embedder=HashingEmbedder(dim=32))
    message = str(info.value)
    assert "'hashing-v1-64' (64 dimensions)" in message and "'hashing-v1-32'" in message
    assert "allow_embedder_mismatch=True" in message and "reembed()" in message


def test_reembed_rebuilds_every_vector(store_url: str, clock: Any,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    _make_store(store_url, clock)
    new = CountingEmbedder(dim=32)
    with HTM(database_url=store_url, clock=clock, embedder=new,
             allow_embedder_mismatch=True) as htm:
        assert htm.stats().extra["embedder_mismatch"] is True
        # Until re-embedded: full-text recall only; vector recall says what to do.
        assert [h.memory.key for h in htm.recall("Vim keybindings", limit=1)] == ["vim"]
        with pytest.raises(EmbedderMismatchError, match="call reembed"):
            htm.recall("Vim", strategy="vector")
        htm.add("Added while mismatched", key="mid")
        assert new.calls == []
        assert htm.reembed(batch_size=8) == 32
        assert [len(c) for c in new.calls] == [8, 8, 8, 8]
        s = htm.stats()
        assert (s.embedder, s.embedding_dim, s.pending_embeddings) == ("hashing-v1-32", 32, 0)
        assert s.extra["embedder_mismatch"] is False
        assert [h.memory.key for h in htm.recall("Vim keybindings", strategy="vector",
                                                 limit=1)] == ["vim"]
        memory = htm.store.get("k3", include_embedding=True)
        assert memory is not None and memory.embedder == "hashing-v1-32"
        assert memory.embedding is not None and len(memory.embedding) == 32
    assert "re-embedding with hashing-v1-32" in capsys.readouterr().err
    with HTM(database_url=store_url, clock=clock, embedder=HashingEmbedder(dim=32)) as htm:
        assert htm.stats().embedder == "hashing-v1-32"


def test_reembed_is_resumable(store_url: str, clock: Any) -> None:
    _make_store(store_url, clock)

    class DiesAfterTwoBatches(CountingEmbedder):
        def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
            if len(self.calls) == 2:
                raise RuntimeError("killed")
            return super().embed_documents(texts)

    with HTM(database_url=store_url, clock=clock, embedder=DiesAfterTwoBatches(dim=32),
             allow_embedder_mismatch=True) as htm:
        with pytest.raises(EmbeddingError, match="killed"):
            htm.reembed(batch_size=10, progress=False)
        assert htm.stats().pending_embeddings == 11
        assert htm.stats().failed_embeddings == 0  # an embedder that is down marks nothing
    # The store now belongs to the new embedder: it opens without the opt-in and resumes.
    resumed = CountingEmbedder(dim=32)
    with HTM(database_url=store_url, clock=clock, embedder=resumed) as htm:
        assert htm.reembed(batch_size=10, progress=False) == 11
        assert len(resumed.texts) == 11
        assert htm.stats().pending_embeddings == 0
        assert htm.reembed(progress=False) == 0


def test_reembed_force_and_bad_batch(store_url: str, clock: Any) -> None:
    _make_store(store_url, clock, n=5)
    counting = CountingEmbedder(dim=64)
    with HTM(database_url=store_url, clock=clock, embedder=counting) as htm:
        assert htm.reembed(progress=False) == 0
        assert htm.reembed(progress=False, force=True) == 6
        assert len(counting.texts) == 6
        with pytest.raises(InvalidBudgetError, match="batch_size"):
            htm.reembed(batch_size=0)
