"""Every Python block of README.md and docs/*.md runs, as written, page by page.

A page's blocks run in order in one namespace, as a reader would type them (a block may use
what an earlier one made), with top-level ``await`` allowed, from a temporary directory, with
``HTM()`` configured by environment variables the way a user's would be: a SQLite file and
the hashing embedder (PostgreSQL pages: the test server). What a page leaves to the reader
(an open ``htm``, a chat ``model``, an ``llm``, a list of ``turns``) is given before every
block (``PAGES``); a made-up server address is replaced by a test server's (``HOSTS``): the
PostgreSQL test server, and a loopback stand-in for Ollama that answers ``/api/embed`` with
hashing vectors and ``/api/chat`` with a JSON tag list (no Ollama server runs here).

The ``htm`` command lines of the pages' shell blocks run too, page by page, in order, in
process (``htm_core.cli.main``) as a shell in a fresh home directory would run them (the
default database in the user data directory, the hashing embedder), except the servers and
what needs a model this machine lacks (``SKIP_COMMANDS``, each with its reason).

A block that cannot run here is marked in the page, on the line before its fence, with the
reason: ``<!-- not run: needs ... -->``. A page whose blocks another test runs is listed in
``RUN_ELSEWHERE``. :func:`test_every_python_block_is_run_or_marked` fails when a page gains
Python blocks that no test runs.
"""

from __future__ import annotations

import ast
import doctest
import inspect
import io
import json
import logging
import os
import re
import shlex
import sys
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.cli import main
from tests.integration.test_cli_command_lines import SHELL, argv_of

ROOT = Path(__file__).resolve().parents[2]
PAGES_ON_DISK = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON = {"python", "py", "python3", "pycon"}
MARK = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>\S.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<lang>[\w+-]*)[^\n]*$")

#: pages whose Python blocks another test runs, all of them, in order
RUN_ELSEWHERE = {"docs/llamaindex.md": "tests/docs/test_docs_llamaindex.py",
                 "docs/cli.md": "tests/integration/test_cli_commands.py"}
#: at most this many blocks may be marked as not run
MAX_NOT_RUN = 4


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    not_run: str | None


def code_blocks(path: Path) -> list[Block]:
    """Every fenced block of *path* (indented fences too, their indent removed)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        mark = MARK.match(lines[i - 1]) if i else None
        blocks.append(Block(page, i + 1, opening["lang"].lower(), "\n".join(body) + "\n",
                            mark["reason"] if mark else None))
        i = j + 1
    return blocks


def python_blocks(path: Path) -> list[Block]:
    return [b for b in code_blocks(path) if b.language in PYTHON]


# --- what the pages leave to the reader -------------------------------------------------


class _FakeOllama(BaseHTTPRequestHandler):
    """Ollama's ``/api/embed`` (hashing vectors, 64 dimensions) and ``/api/chat`` (one
    streamed answer: a JSON list of tags)."""

    embedder = HashingEmbedder(dim=64)

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if self.path == "/api/embed":
            texts = [payload["input"]] if isinstance(payload["input"], str) else payload["input"]
            body = json.dumps({"model": payload["model"],
                               "embeddings": self.embedder.embed_documents(texts)}).encode()
        elif self.path == "/api/chat":
            body = json.dumps({"model": payload["model"], "created_at": "2024-05-15T12:00:00Z",
                               "done": True, "done_reason": "stop",
                               "message": {"role": "assistant", "content": '["misc"]'},
                               "prompt_eval_count": 1, "eval_count": 1}).encode() + b"\n"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def fake_ollama() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOllama)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _chat_model() -> Any:
    from tests.fake_chat import RecordingChatModel

    return RecordingChatModel(default="Noted.")


def _llm() -> Any:
    from langchain_core.language_models.fake import FakeListLLM

    return FakeListLLM(responses=["Sure."] * 8)


def _otel() -> dict[str, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    return {"mp": MeterProvider(), "tp": TracerProvider()}


def _htm() -> dict[str, Any]:
    return {"htm": HTM(robot="assistant")}


def _with_editor() -> dict[str, Any]:
    htm = HTM(robot="assistant")
    htm.add("User prefers Vim", key="editor")
    return {"htm": htm}


TURNS = ["The report is due on Friday", "Ada reviews the deadline", "We ship the report"]

#: page -> makers of the names it leaves to the reader (called before every block)
PAGES: dict[str, list[Callable[[], dict[str, Any]]]] = {
    "README.md": [_htm, lambda: {"model": _chat_model()}],
    "docs/api.md": [_with_editor],
    "docs/backends.md": [],
    "docs/configuration.md": [],
    "docs/concepts.md": [_htm],
    "docs/consolidation.md": [lambda: {"chat_model": _chat_model()}],
    "docs/embeddings.md": [lambda: {"conversation": TURNS, "turns": TURNS}],
    "docs/enrichment.md": [_htm, lambda: {
        "my_langchain_chat_model": _chat_model(), "write_tags": lambda key, tags: None,
        "store_summary": lambda *args: None, "evicted": []}],
    "docs/getting-started.md": [],
    "docs/index.md": [],
    "docs/langchain.md": [lambda: {"model": _chat_model(), "chat_model": _chat_model(),
                                   "llm": _llm()}],
    "docs/mcp.md": [],
    "docs/observability.md": [_htm, _otel],
    "docs/postgres.md": [lambda: {"batches": []}],
    "docs/recall-quality.md": [_htm],
    "docs/ui.md": [],
}

#: pages of independent examples, each on its own default database (``HTM_DATABASE_URL``)
FRESH_DATABASE_PER_BLOCK = {"docs/embeddings.md"}

#: made-up addresses in the pages -> the test servers' (filled in by the fixtures)
HOSTS = {
    "postgres": re.compile(r"postgresql://(?:htm:secret@db\.internal(?::5432)?|localhost)/htm"),
    "ollama": re.compile(r"http://gpu-box:11434"),
}


@pytest.fixture
def reader_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_ollama: str) -> Path:
    for name in ("HTM_DATABASE_URL", "HTM_ROBOT", "HTM_EMBEDDER", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HTM_DATABASE_URL", str(tmp_path / "reader.db"))
    monkeypatch.setenv("HTM_EMBEDDER", "hashing")
    monkeypatch.setenv("HTM_OLLAMA_URL", fake_ollama)
    (tmp_path / "handbook.md").write_text("# Handbook\n\nWe deploy on Fridays.\n")
    observability = logging.getLogger("htm_core.observability")
    monkeypatch.setattr(observability, "level", observability.level)
    return tmp_path


def _close_everything(namespace: dict[str, Any]) -> None:
    for value in list(namespace.values()):
        if isinstance(value, HTM):
            value.close()
        elif type(value).__module__.startswith("htm_core.enrich") and hasattr(value, "stop"):
            value.stop()


def _run_session(code: str, namespace: dict[str, Any], name: str) -> None:
    test = doctest.DocTestParser().get_doctest(code, namespace, name, name, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    runner.run(test, out=report.write, clear_globs=False)
    assert runner.failures == 0, report.getvalue()


async def run_page(page: str, substitutions: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                   path: Path | None = None) -> dict[str, Any]:
    """Run the Python blocks of ``page`` (read from ``path``, default the page itself)."""
    module = types.ModuleType("docs_page")  # dataclasses look their module up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: dict[str, Any] = module.__dict__
    given: list[dict[str, Any]] = []
    try:
        for block in python_blocks(path or ROOT / page):
            if block.not_run:
                continue
            if page in FRESH_DATABASE_PER_BLOCK:
                monkeypatch.setenv("HTM_DATABASE_URL", str(Path.cwd() / f"block-{block.line}.db"))
            for make in PAGES[page]:
                names = make()
                given.append(names)
                namespace.update(names)
            code = block.code
            for name, pattern in HOSTS.items():
                code = pattern.sub(substitutions.get(name, r"\g<0>"), code)
            if block.language == "pycon":  # a session: its outputs are checked too
                _run_session(code, namespace, f"{page}:{block.line}")
                continue
            compiled = compile(code, f"{page}:{block.line}", "exec",
                               flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(compiled, namespace)  # the page's own example
            if inspect.iscoroutine(result):
                await result
        return namespace
    finally:
        for names in given:
            _close_everything(names)
        _close_everything(namespace)


SQLITE_PAGES = sorted(p for p in PAGES if p != "docs/postgres.md")


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::PendingDeprecationWarning")
@pytest.mark.parametrize("page", SQLITE_PAGES)
async def test_page_runs_as_written(page: str, reader_env: Path, fake_ollama: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    await run_page(page, {"ollama": fake_ollama}, monkeypatch)


async def test_postgres_page_runs_as_written(reader_env: Path, pg_url: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTM_DATABASE_URL", pg_url)
    monkeypatch.setenv("ROBOT", "ingest-1")
    namespace = await run_page("docs/postgres.md", {"postgres": pg_url}, monkeypatch)
    assert namespace["s"].long_term_total >= 2


def test_every_python_block_is_run_or_marked() -> None:
    with_python = {str(p.relative_to(ROOT)) for p in PAGES_ON_DISK if python_blocks(p)}
    assert sorted(with_python - set(PAGES) - set(RUN_ELSEWHERE)) == [], \
        "add these pages to PAGES (with the names they leave to the reader)"
    assert sorted((set(PAGES) | set(RUN_ELSEWHERE)) - {str(p.relative_to(ROOT))
                                                       for p in PAGES_ON_DISK}) == []
    marked = [b for p in PAGES_ON_DISK for b in python_blocks(p) if b.not_run]
    assert len(marked) <= MAX_NOT_RUN, [f"{b.page}:{b.line}: {b.not_run}" for b in marked]
    assert all(b.page not in RUN_ELSEWHERE for b in marked), "that test runs every block"


async def test_a_session_block_checks_its_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 reader_env: Path) -> None:
    page = tmp_path / "session.md"
    monkeypatch.setitem(PAGES, "session.md", [])
    page.write_text("```pycon\n>>> 1 + 1\n3\n```\n")
    with pytest.raises(AssertionError, match="Expected:"):
        await run_page("session.md", {}, monkeypatch, page)
    page.write_text("```pycon\n>>> 1 + 1\n2\n```\n")
    await run_page("session.md", {}, monkeypatch, page)


def test_the_collector_reads_indented_fences_and_marks(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("- item:\n\n  ```python\n  x = 1\n  ```\n\n<!-- not run: needs a GPU -->\n"
                    "```py\ny = 2\n```\n\n```bash\nhtm stats\n```\n")
    blocks = python_blocks(page)
    assert [(b.code, b.not_run) for b in blocks] == [("x = 1\n", None), ("y = 2\n", "needs a GPU")]


# --- the pages' command lines -------------------------------------------------------------

#: command lines not run here: (a test on the words of the line, why)
SKIP_COMMANDS: list[tuple[Callable[[list[str]], bool], str]] = [
    (lambda argv: bool({"ui", "mcp"} & set(argv)),
     "serves until stopped; tests/ui and tests/integration/test_mcp*.py run the servers"),
    (lambda argv: "local" in argv,
     "the local extra's model (all-MiniLM-L6-v2) is not installed in the test environment"),
]


def command_lines(path: Path) -> list[tuple[int, list[str]]]:
    """``(line, argv)`` of every ``htm`` command in the shell blocks of *path* (continuation
    lines joined, comments and redirections dropped), in page order."""
    found = []
    for block in code_blocks(path):
        if block.language not in SHELL or block.not_run:
            continue
        body = re.sub(r"\\\n\s*", " ", block.code)
        for line in body.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("htm ") and "COMMAND" not in line:
                found.append((block.line, argv_of(line)))
    return found


def _damaged_export(cwd: Path) -> None:
    """``damaged.jsonl``: the page's export cut in the middle of its last record."""
    whole = (cwd / "backup.jsonl").read_bytes()
    (cwd / "damaged.jsonl").write_bytes(whole[: len(whole) - 20])


def _readers_database(cwd: Path) -> None:
    """``memories.db``: the reader's own database, with a memory in it."""
    with HTM(database_url=str(cwd / "memories.db"), embedder=HashingEmbedder()) as htm:
        htm.add("User prefers Vim keybindings", key="pref-vim")


#: files a page's commands read that an earlier command of the page does not write
GIVEN_FILES: dict[str, Callable[[Path], None]] = {"damaged.jsonl": _damaged_export,
                                                  "memories.db": _readers_database}


def _skipped(argv: list[str]) -> bool:
    return any(skip(argv) for skip, _ in SKIP_COMMANDS)


SHELL_PAGES = [str(p.relative_to(ROOT)) for p in PAGES_ON_DISK
               if any(not _skipped(argv) for _, argv in command_lines(p))]


@pytest.fixture
def shell_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_ollama: str) -> Path:
    for name in [n for n in os.environ if n.startswith("HTM_")] + ["XDG_DATA_HOME",
                                                                    "OLLAMA_HOST"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HTM_EMBEDDER", "hashing")
    monkeypatch.setenv("HTM_OLLAMA_URL", fake_ollama)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page", SHELL_PAGES)
def test_page_command_lines_run(page: str, shell_home: Path, pg_url: str) -> None:
    for line, argv in command_lines(ROOT / page):
        if _skipped(argv):
            continue
        words = [os.path.expanduser(w) for w in argv]
        words = [HOSTS["postgres"].sub(pg_url, w) if w.startswith("postgresql://") else w
                 for w in words]
        for word in words:
            if word in GIVEN_FILES and not (shell_home / word).exists():
                GIVEN_FILES[word](shell_home)
        out, err = io.StringIO(), io.StringIO()
        code = main(words, stdout=out, stderr=err)
        assert code == 0, f"{page}:{line}: htm {shlex.join(argv)}\n{err.getvalue()}"


def test_the_command_lines_are_found() -> None:
    """The collector finds the pages' commands (a broken pattern would pass vacuously)."""
    assert {"README.md", "docs/cli.md", "docs/getting-started.md", "docs/mcp.md"} <= \
        set(SHELL_PAGES)
    assert sum(len(command_lines(ROOT / p)) for p in SHELL_PAGES) >= 30
