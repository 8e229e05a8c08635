"""Every documented example finds what it just added, run as written.

The README's and docs/cli.md's command lines run in-process through ``htm_core.cli.main``
(a fresh SQLite file, the hashing embedder, the real clock); the Python examples of
docs/index.md, docs/postgres.md (on the test PostgreSQL server instead of the page's
made-up host) and docs/langchain.md run with ``exec``; the MCP ``recall`` tool's first
timeframe example is asked of a real server. An example whose timeframe is a calendar
phrase ("last week") finds nothing it has just added, so these fail on such wording.
"""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.cli import main
from htm_core.timeframe import parse_timeframe

ROOT = Path(__file__).resolve().parents[2]
VIM = "User prefers Vim keybindings"


def _section(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"{path.name} lost its {heading!r} section"
    return found.group(1)


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def _htm_lines(block: str) -> Iterator[list[str]]:
    """The ``htm ...`` commands of a shell block, continuation lines joined, comments off."""
    for line in block.replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if argv[:1] == ["htm"]:
            yield argv[1:]


def _run(db: Path, argv: list[str]) -> str:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--db", str(db), "--embedder", "hashing", *argv], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    return out.getvalue()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("HTM_DATABASE_URL", "HTM_ROBOT", "HTM_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_readme_command_line_recalls_what_it_added(clean_env: Path) -> None:
    block = _blocks(_section(ROOT / "README.md", "## Command line"), "bash")[0]
    lines = [argv for argv in _htm_lines(block) if argv[0] in ("add", "recall")]
    assert [argv[0] for argv in lines] == ["add", "recall"]
    db = clean_env / "readme.db"
    _run(db, lines[0])
    assert VIM in _run(db, lines[1])


def test_cli_page_recalls_what_it_added(clean_env: Path) -> None:
    page = ROOT / "docs" / "cli.md"
    add = next(_htm_lines(_blocks(_section(page, "## htm add"), "bash")[0]))
    recall = next(_htm_lines(_blocks(_section(page, "## htm recall"), "bash")[0]))
    assert add[0] == "add" and recall[0] == "recall" and "--timeframe" in recall
    db = clean_env / "cli.db"
    _run(db, add)
    assert VIM in _run(db, recall)


def _exec(code: str, name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(code, name, "exec"), namespace)
    return namespace


def test_index_example_recalls_what_it_added(clean_env: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTM_DATABASE_URL", str(clean_env / "index.db"))
    monkeypatch.setenv("HTM_EMBEDDER", "hashing")
    code = _blocks((ROOT / "docs" / "index.md").read_text(encoding="utf-8"), "python")[0]
    assert "timeframe=" in code
    hits = _exec(code, "docs/index.md")["hits"]
    assert [h.memory.content for h in hits] == [VIM]


def test_postgres_example_recalls_what_it_added(pg_url: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTM_EMBEDDER", "hashing")
    code = next(b for b in _blocks((ROOT / "docs" / "postgres.md").read_text(encoding="utf-8"),
                                   "python") if "recall(" in b)
    code = re.sub(r'database_url="[^"]+"', f"database_url={pg_url!r}", code, count=1)
    hits = _exec(code, "docs/postgres.md")["hits"]
    assert "The deploy window is Tuesday 10:00 UTC" in [h.memory.content for h in hits]


def test_langchain_per_call_example_finds_what_was_added(clean_env: Path) -> None:
    pytest.importorskip("langchain_core")
    from htm_integrations.langchain import HTMRetriever

    page = (ROOT / "docs" / "langchain.md").read_text(encoding="utf-8")
    call = re.search(r"`(retriever\.invoke\(\"query\"[^`]*timeframe=[^`]*\))`", page)
    assert call, "docs/langchain.md lost its per-call example"
    with HTM(database_url=str(clean_env / "lc.db"), embedder=HashingEmbedder()) as htm:
        htm.add("Notes on the query planner", tags=["kb"])
        retriever = HTMRetriever(htm=htm, k=4, tags=["kb"])
        docs = eval(call.group(1), {"retriever": retriever})
    assert [d.page_content for d in docs] == ["Notes on the query planner"]


async def test_mcp_recall_description_leads_with_a_timeframe_that_finds_it(
        clean_env: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from htm_integrations.mcp.server import build_server

    with HTM(database_url=str(clean_env / "mcp.db"), embedder=HashingEmbedder()) as htm:
        async with Client(build_server(htm), cache=None) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            described = tools["recall"].input_schema["properties"]["timeframe"]["description"]
            examples = re.findall(r"'([^']+)'([^']*)", described)
            for example, said_after in examples:
                asked = datetime.now(timezone.utc)
                _, end = parse_timeframe(example)  # every example is a valid timeframe
                if example.startswith(("last", "past")) and end is not None and end <= asked:
                    # "last week" reads as "recently": the description must say it is not
                    assert "previous" in said_after or "calendar" in said_after, example
            await client.call_tool("remember", {"content": "Deploy on Tuesday"})
            result = await client.call_tool("recall", {"query": "deploy",
                                                       "timeframe": examples[0][0]})
    assert result.structured_content is not None
    assert result.structured_content["count"] == 1
