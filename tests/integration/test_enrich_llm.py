"""Enrichment through the real ``langchain_ollama.ChatOllama`` against a loopback Ollama.

No Ollama server can run here, so a small ``http.server`` on 127.0.0.1 plays one: it
implements ``POST /api/chat`` with Ollama's request JSON and its streamed NDJSON answer
(content chunks, then a final ``done`` record carrying ``prompt_eval_count`` and
``eval_count``). What it answers is decided per test by a ``respond(prompt)`` function.
Everything from the enrichers and the JobRunner down to the socket is the real code, with
the durable queue on a real SQLite file.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from htm_core.enrich import (
    InvalidModelOutputError,
    JobRunner,
    LLMImportanceScorer,
    LLMTagger,
    LLMUsage,
    ModelCallError,
    SQLJobQueue,
    Summariser,
    enrichment_handlers,
    importance_job,
    ollama_chat_model,
    summary_job,
    tag_job,
)
from htm_core.errors import MissingDependencyError

pytest.importorskip("langchain_ollama")


@dataclass
class FakeOllamaChat:
    """One fake server: how it answers, and what it was asked (with arrival times)."""

    respond: Callable[[str], str] = lambda prompt: "[]"
    fail_next: int = 0  # answer this many requests with HTTP 500 first
    requests: list[dict[str, Any]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    url: str = ""


def _handler(state: FakeOllamaChat) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            payload = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append({"path": self.path, **payload})
            state.times.append(time.monotonic())
            if self.path != "/api/chat":
                self._send(404, b'{"error": "404 page not found"}')
                return
            if state.fail_next > 0:
                state.fail_next -= 1
                self._send(500, b'{"error": "llama runner process has terminated"}')
                return
            prompt = payload["messages"][-1]["content"]
            answer = state.respond(prompt)
            half = len(answer) // 2
            stamp = "2024-05-15T12:00:00Z"
            lines = [{"model": payload["model"], "created_at": stamp, "done": False,
                      "message": {"role": "assistant", "content": part}}
                     for part in (answer[:half], answer[half:])]
            lines.append({"model": payload["model"], "created_at": stamp, "done": True,
                          "done_reason": "stop", "message": {"role": "assistant", "content": ""},
                          "total_duration": 1000, "load_duration": 10,
                          "prompt_eval_count": len(prompt.split()), "eval_count": len(answer.split())})
            body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@pytest.fixture
def ollama() -> Iterator[FakeOllamaChat]:
    state = FakeOllamaChat()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def memory_of(prompt: str) -> str:
    """The memory text quoted at the end of an enrichment prompt."""
    return prompt.rsplit('"""', 2)[-2].strip() if prompt.count('"""') >= 2 else prompt


def topic_tags(prompt: str) -> str:
    text = memory_of(prompt).lower()
    if "garbage" in text:
        return "Sure! Here are some tags: postgres, databases"
    if "postgres" in text:
        return '```json\n["database:postgresql:indexes"]\n```'
    return '["misc"]'


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[SQLJobQueue]:
    engine = create_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    yield SQLJobQueue(engine)
    engine.dispose()


def test_chat_ollama_tags_stored_through_the_job_runner(ollama: FakeOllamaChat, queue: SQLJobQueue) -> None:
    ollama.respond = topic_tags
    usage = LLMUsage()
    model = ollama_chat_model("llama3.2", base_url=ollama.url)
    tagger = LLMTagger(model, usage=usage, existing_tags=["database:postgresql"])
    stored: dict[str, list[str]] = {}
    runner = JobRunner(queue, enrichment_handlers(tagger=tagger, on_tags=stored.__setitem__),
                       usage=usage, poll_interval=0.05)
    with runner:
        runner.submit_many([tag_job("m1", "Our Postgres HNSW index is slow"),
                            tag_job("m2", "Lunch was fine")])
        assert runner.flush(timeout=30)
    assert stored == {"m1": ["database:postgresql:indexes"], "m2": ["misc"]}
    first = ollama.requests[0]
    assert first["model"] == "llama3.2" and first["messages"][-1]["role"] == "user"
    assert "database:postgresql" in first["messages"][-1]["content"]  # the ontology hint
    stats = runner.stats()
    assert (stats["completed"], stats["calls"], stats["invalid_outputs"]) == (2, 2, 0)
    # tokens are Ollama's own counts (this server: words of the prompt / of the answer)
    assert stats["input_tokens"] == sum(len(r["messages"][-1]["content"].split()) for r in ollama.requests)
    assert stats["output_tokens"] == 3 + 1


def test_malformed_output_rejected_counted_and_never_stored(ollama: FakeOllamaChat,
                                                            queue: SQLJobQueue) -> None:
    ollama.respond = topic_tags
    tagger = LLMTagger(ollama_chat_model(base_url=ollama.url), max_retries=1)
    stored: dict[str, list[str]] = {}
    runner = JobRunner(queue, enrichment_handlers(tagger=tagger, on_tags=stored.__setitem__),
                       usage=tagger.usage, max_attempts=2, initial_backoff=0.05, poll_interval=0.02)
    with runner:
        runner.submit(*tag_job("bad", "garbage in"))
        runner.submit(*tag_job("good", "postgres vacuum"))
        assert runner.flush(timeout=30)
    assert stored == {"good": ["database:postgresql:indexes"]}
    stats = runner.stats()
    assert stats["invalid_outputs"] == 4  # 2 attempts x (1 + 1 retry)
    assert stats["gave_up"] == 2 and stats["failed"] == 1 and stats["failed_in_queue"] == 1
    (failed,) = queue.failed()
    assert failed.memory_key == "bad" and "malformed" in (failed.last_error or "")
    with pytest.raises(InvalidModelOutputError) as info:
        tagger.tag("garbage again")
    assert info.value.outputs[0].startswith("Sure! Here are some tags")


def test_rate_limit_of_n_per_second_holds_at_the_server(ollama: FakeOllamaChat, queue: SQLJobQueue) -> None:
    ollama.respond = lambda prompt: "5"
    scorer = LLMImportanceScorer(ollama_chat_model(base_url=ollama.url))
    scores: dict[str, float] = {}
    runner = JobRunner(queue, enrichment_handlers(scorer=scorer, on_importance=scores.__setitem__),
                       workers=2, requests_per_second=8.0, poll_interval=0.02)
    with runner:
        runner.submit_many([importance_job(f"m{i}", f"fact number {i}") for i in range(8)])
        assert runner.flush(timeout=30)
    assert scores == {f"m{i}": 5.0 for i in range(8)}
    span = ollama.times[-1] - ollama.times[0]
    assert len(ollama.times) == 8 and span >= 7 / 8 * 0.95  # 8 requests at 8/s, burst 1


def test_server_errors_retried_with_backoff(ollama: FakeOllamaChat, queue: SQLJobQueue) -> None:
    ollama.respond = lambda prompt: "7"
    ollama.fail_next = 2
    scorer = LLMImportanceScorer(ollama_chat_model(base_url=ollama.url))
    with pytest.raises(ModelCallError, match="llama runner"):
        scorer.score("first try hits the 500")
    scores: dict[str, float] = {}
    runner = JobRunner(queue, enrichment_handlers(scorer=scorer, on_importance=scores.__setitem__),
                       usage=scorer.usage, initial_backoff=0.05, poll_interval=0.02)
    with runner:
        runner.submit(*importance_job("m1", "Remember that the deadline is Friday"))
        assert runner.flush(timeout=30)
    assert scores == {"m1": 7.0}
    stats = runner.stats()
    assert stats["retried"] == 1 and stats["errors"] == 2 and stats["completed"] == 1


def test_summary_job_through_chat_ollama(ollama: FakeOllamaChat, queue: SQLJobQueue) -> None:
    ollama.respond = lambda prompt: "Alice and Bob chose PostgreSQL; launch moved to Friday."
    summariser = Summariser(ollama_chat_model(base_url=ollama.url), max_chars=200)
    written: list[tuple[str, str, list[str]]] = []
    runner = JobRunner(queue, enrichment_handlers(summariser=summariser,
                                                  on_summary=lambda *args: written.append(args)),
                       poll_interval=0.02)
    kind, key, payload = summary_job(["m1", "m2"], ["Alice: use Postgres?", "Bob: yes, launch Friday"])
    with runner:
        runner.submit(kind, key, payload)
        assert runner.flush(timeout=30)
    assert written == [(key, "Alice and Bob chose PostgreSQL; launch moved to Friday.", ["m1", "m2"])]
    assert "- Bob: yes, launch Friday" in ollama.requests[0]["messages"][-1]["content"]


async def test_async_path_uses_chat_ollama_ainvoke(ollama: FakeOllamaChat) -> None:
    ollama.respond = topic_tags
    tagger = LLMTagger(ollama_chat_model(base_url=ollama.url))
    assert await tagger.atag("postgres bloat") == ["database:postgresql:indexes"]
    assert tagger.usage.calls == 1 and tagger.usage.output_tokens == 3


def test_missing_langchain_ollama_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_ollama", None)  # makes the import fail
    with pytest.raises(MissingDependencyError, match=r'pip install "htm-memory\[ollama\]"'):
        ollama_chat_model()
    with pytest.raises(MissingDependencyError):
        LLMTagger()


def test_batched_tag_jobs_share_one_ollama_request(ollama: FakeOllamaChat, queue: SQLJobQueue) -> None:
    def respond(prompt: str) -> str:
        n = prompt.count("\nMemory ") + prompt.startswith("Memory ")
        return json.dumps({str(i): [f"topic:item-{i}"] for i in range(1, n + 1)})

    ollama.respond = respond
    tagger = LLMTagger(ollama_chat_model(base_url=ollama.url))
    stored: dict[str, list[str]] = {}
    queue.put_many([tag_job(f"m{i}", f"note {i}") for i in range(1, 5)])
    runner = JobRunner(queue, enrichment_handlers(tagger=tagger, on_tags=stored.__setitem__, batch_tags=True),
                       usage=tagger.usage, batch_size=4, poll_interval=0.02)
    with runner:
        assert runner.flush(timeout=30)
    assert stored == {f"m{i}": [f"topic:item-{i}"] for i in range(1, 5)}
    assert len(ollama.requests) == 1 and runner.stats()["calls"] == 1
    assert 'Memory 4:\n"""\nnote 4\n"""' in ollama.requests[0]["messages"][-1]["content"]
