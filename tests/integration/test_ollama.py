"""The Ollama path through the real ``langchain-ollama`` client and ``ollama`` HTTP client.

No Ollama server can run here, so a small ``http.server`` on 127.0.0.1 plays one: it
implements ``POST /api/embed`` (the only endpoint ``OllamaEmbeddings`` calls) with Ollama's
request and response JSON, computing the vectors with the hashing embedder. Everything from
``OllamaEmbedder`` down to the socket is the real code.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.errors import EmbeddingError, InvalidBudgetError
from htm_core.ollama import OllamaEmbedder, ollama_url

pytest.importorskip("langchain_ollama")

DIM = 64


@dataclass
class FakeOllama:
    """State of one fake server: what it answers and what it was asked."""

    mode: str = "ok"  # ok | slow | http500 | badjson | nomodel | short
    delay: float = 2.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


def _handler(state: FakeOllama) -> type[BaseHTTPRequestHandler]:
    embedder = HashingEmbedder(dim=DIM)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            payload = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append({"path": self.path, **payload})
            if self.path != "/api/embed":
                self._send(404, b'{"error": "404 page not found"}')
                return
            if state.mode == "slow":
                time.sleep(state.delay)
            if state.mode == "http500":
                self._send(500, b'{"error": "llama runner process has terminated"}')
                return
            if state.mode == "nomodel":
                msg = f'model "{payload["model"]}" not found, try pulling it first'
                self._send(404, json.dumps({"error": msg}).encode())
                return
            if state.mode == "badjson":
                self._send(200, b"<html>this is not ollama</html>")
                return
            texts = payload["input"]
            texts = [texts] if isinstance(texts, str) else texts
            vectors = embedder.embed_documents(texts)
            if state.mode == "short":
                vectors = vectors[:-1]
            body = {"model": payload["model"], "embeddings": vectors,
                    "total_duration": 1000, "load_duration": 10, "prompt_eval_count": len(texts)}
            self._send(200, json.dumps(body).encode())

    return Handler


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    state = FakeOllama()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def refused_url() -> str:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_embeds_through_the_real_client(fake_ollama: FakeOllama) -> None:
    e = OllamaEmbedder(base_url=fake_ollama.url)
    assert e.name == "ollama:nomic-embed-text" and e.dim is None
    vectors = e.embed_documents(["User prefers Vim", "It rained"])
    assert len(vectors) == 2 and e.dim == DIM
    assert vectors[0] == pytest.approx(HashingEmbedder(dim=DIM).embed_query("User prefers Vim"))
    assert e.embed_query("rain") == pytest.approx(HashingEmbedder(dim=DIM).embed_query("rain"))
    first = fake_ollama.requests[0]
    assert first["path"] == "/api/embed"
    assert first["model"] == "nomic-embed-text"
    assert first["input"] == ["User prefers Vim", "It rained"]


def test_url_resolution_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HTM_OLLAMA_URL", raising=False)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    assert ollama_url() == "http://127.0.0.1:11434"
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:11434")
    assert ollama_url() == "http://gpu-box:11434"
    monkeypatch.setenv("HTM_OLLAMA_URL", "https://ollama.internal/")
    assert ollama_url() == "https://ollama.internal"
    assert ollama_url("http://10.0.0.5:1234") == "http://10.0.0.5:1234"
    assert OllamaEmbedder("mxbai-embed-large").base_url == "https://ollama.internal"


def test_env_url_reaches_the_server(fake_ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch,
                                    sqlite_url: str) -> None:
    monkeypatch.setenv("HTM_OLLAMA_URL", fake_ollama.url)
    monkeypatch.setenv("HTM_EMBEDDER", "ollama:all-minilm")
    with HTM(database_url=sqlite_url) as htm:
        htm.add("User prefers Vim keybindings", key="vim")
        stats = htm.stats()
        assert stats.embedder == "ollama:all-minilm"
        assert stats.embedder_choice == "ollama:all-minilm (requested)"
        assert stats.embedding_dim == DIM
        assert [h.memory.key for h in htm.recall("vim keybindings", strategy="vector")] == ["vim"]
    assert {r["model"] for r in fake_ollama.requests} == {"all-minilm"}


def test_bad_timeout_is_rejected() -> None:
    with pytest.raises(InvalidBudgetError, match="positive number of seconds"):
        OllamaEmbedder(timeout=0)


@pytest.mark.parametrize(("mode", "match"), [
    ("http500", r"HTTP 500: llama runner process has terminated"),
    ("nomodel", r"ollama pull nomic-embed-text"),
    ("badjson", r"not Ollama embedding JSON"),
    ("short", r"returned 1 embeddings for 2 texts"),
])
def test_server_errors_become_embedding_errors(fake_ollama: FakeOllama, mode: str,
                                               match: str) -> None:
    fake_ollama.mode = mode
    with pytest.raises(EmbeddingError, match=match):
        OllamaEmbedder(base_url=fake_ollama.url).embed_documents(["a", "b"])


def test_refused_connection(refused_url: str) -> None:
    with pytest.raises(EmbeddingError, match=r"cannot connect to Ollama at .*ollama serve") as info:
        OllamaEmbedder(base_url=refused_url, timeout=5).embed_query("hello")
    assert isinstance(info.value.__cause__, ConnectionError)


def test_timeout(fake_ollama: FakeOllama) -> None:
    fake_ollama.mode = "slow"
    fake_ollama.delay = 1.5
    started = time.monotonic()
    with pytest.raises(EmbeddingError, match=r"did not answer within 0.3 s.*HTM_OLLAMA_TIMEOUT"):
        OllamaEmbedder(base_url=fake_ollama.url, timeout=0.3).embed_query("hello")
    assert time.monotonic() - started < 1.4


def _snapshot(htm: HTM) -> tuple[int, int, list[str]]:
    s = htm.stats()
    ops = [o.op for o in htm.operations(limit=1000)]
    return s.long_term_total, s.working_memory_count, ops


@pytest.mark.parametrize("failure", ["refused", "timeout", "http500", "badjson"])
def test_failed_add_leaves_the_store_unchanged(fake_ollama: FakeOllama, refused_url: str,
                                               sqlite_url: str, clock: Any, failure: str) -> None:
    with HTM(database_url=sqlite_url, clock=clock,
             embedder=OllamaEmbedder(base_url=fake_ollama.url)) as htm:
        htm.add("A memory from before the outage", key="before")
    url = refused_url if failure == "refused" else fake_ollama.url
    fake_ollama.mode, fake_ollama.delay = {"refused": ("ok", 0), "timeout": ("slow", 1.0),
                                           "http500": ("http500", 0),
                                           "badjson": ("badjson", 0)}[failure]
    with HTM(database_url=sqlite_url, clock=clock,
             embedder=OllamaEmbedder(base_url=url, timeout=0.3)) as htm:
        before = _snapshot(htm)
        with pytest.raises(EmbeddingError, match="Ollama"):
            htm.add("A memory during the outage", key="during")
        with pytest.raises(EmbeddingError, match="Ollama"):
            htm.add_many(["one of a batch", {"content": "two of a batch", "key": "k2"}])
        assert _snapshot(htm) == before
        assert htm.retrieve("during") is None and htm.retrieve("k2") is None
        assert htm.stats().long_term_total == 1 and htm.stats().pending_embeddings == 0


def test_background_mode_survives_an_outage(fake_ollama: FakeOllama, sqlite_url: str,
                                            clock: Any) -> None:
    """With background embeddings the memory is stored even while Ollama fails."""
    fake_ollama.mode = "http500"
    with HTM(database_url=sqlite_url, clock=clock, background_embeddings=True,
             embedder=OllamaEmbedder(base_url=fake_ollama.url)) as htm:
        htm.add("User prefers Vim keybindings", key="vim")
        assert [h.memory.key for h in htm.recall("vim", strategy="fulltext")] == ["vim"]
        with pytest.raises(EmbeddingError, match="HTTP 500"):
            htm.flush(timeout=20)
        stats = htm.stats()  # a dead embedder marks no memory as failed; its passes count
        assert stats.failed_embeddings == 0 and stats.extra["failed_embedding_passes"] >= 3
        assert stats.pending_embeddings == 1
        fake_ollama.mode = "ok"
        htm.flush(timeout=30)
        assert htm.stats().pending_embeddings == 0
        assert [h.memory.key for h in htm.recall("vim", strategy="vector")] == ["vim"]


def test_one_request_per_batch_and_none_for_known_texts(fake_ollama: FakeOllama,
                                                        sqlite_url: str, clock: Any) -> None:
    with HTM(database_url=sqlite_url, clock=clock, embed_batch_size=5,
             embedder=OllamaEmbedder(base_url=fake_ollama.url)) as htm:
        htm.add_many([f"imported line {i}" for i in range(12)])
        assert [len(r["input"]) for r in fake_ollama.requests] == [5, 5, 2]
        htm.add_many([{"content": f"imported line {i}", "key": f"again-{i}"} for i in range(12)])
        assert len(fake_ollama.requests) == 3  # all twelve came from the cache
        htm.recall("line 7", strategy="vector")
        assert fake_ollama.requests[-1]["input"] == ["line 7"]
