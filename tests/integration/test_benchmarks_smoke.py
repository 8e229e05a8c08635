"""Smoke test of the benchmark scripts: each runs in its short mode and prints its table.

Not a timing test: the figures depend on the machine and its load. Each script runs as
``python -m benchmarks.<name> --quick`` from the repository root, as docs/benchmarks.md
says, with its data cache in a temporary directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(module: str, *args: str, cache: Path) -> str:
    env = {**os.environ, "HTM_BENCH_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def table_rows(output: str) -> list[list[str]]:
    rows = [line for line in output.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in rows]


def test_working_memory_quick(tmp_path: Path) -> None:
    out = run("working_memory", "--quick", cache=tmp_path)
    rows = table_rows(out)
    assert rows[0][:3] == ["resident", "htm add (evicts)", "seed sort-all add"]
    assert [r[0] for r in rows[2:]] == ["200", "1,000"]
    assert all(r[1].endswith("s") and r[3].endswith("×") for r in rows[2:])


def test_store_ops_quick(tmp_path: Path) -> None:
    out = run("store_ops", "--quick", cache=tmp_path)
    assert "single `add` + commit (median)" in out
    assert "- single add + commit:" in out and "- bulk add_many:" in out
    rows = table_rows(out)
    opened = [r for r in rows if r[0] == "500"]
    assert opened and opened[0][2].endswith("MB")
    assert (tmp_path / "store-v2-500-7.db").exists()


def test_recall_latency_quick(tmp_path: Path) -> None:
    out = run("recall_latency", "--quick", cache=tmp_path)
    rows = table_rows(out)
    assert rows[0][0] == "memories" and "LangChain InMemory" in rows[0]
    data = rows[2]
    assert data[0] == "500"
    assert float(data[-1]) == 1.0  # exact search below the ANN threshold: recall@10 is 1


def test_coherence_quick(tmp_path: Path) -> None:
    out = run("coherence", "--quick", cache=tmp_path)
    rows = table_rows(out)
    assert rows[0][:4] == ["backend", "memories", "resident", "create_context"]
    assert rows[2][0] == "SQLite" and rows[2][1] == "200"
    assert all(cell.endswith("s") for cell in rows[2][3:])


@pytest.mark.postgres
def test_postgres_ops_quick(tmp_path: Path) -> None:
    """Starts its own throwaway pgserver (PostgreSQL 16 + pgvector): the benchmarks' path
    without a server URL."""
    pytest.importorskip("pgserver")
    out = run("postgres_ops", "--quick", cache=tmp_path)
    rows = table_rows(out)
    assert rows[0][0] == "memories" and rows[2][0] == "300"
    assert 0.0 <= float(rows[2][-1]) <= 1.0
    assert "- single add + commit, PostgreSQL:" in out


@pytest.mark.slow
def test_embedding_quick(tmp_path: Path) -> None:
    """Loads MiniLM (seconds on two cores), hence marked slow."""
    out = run("embedding", "--quick", cache=tmp_path)
    assert "embed one query (MiniLM)" in out
    assert "`add` in background mode (returns before the vector)" in out
    assert len(table_rows(out)) == 12


def test_plots_are_drawn_from_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results"
    monkeypatch.setenv("HTM_BENCH_RESULTS", str(results))
    run("working_memory", "--quick", "--save", cache=tmp_path)
    assert (results / "working_memory.json").exists()
    out = run("plots", "--results", str(results), "--out", str(tmp_path / "img"), cache=tmp_path)
    files = [Path(line) for line in out.splitlines() if line.endswith(".png")]
    assert files
    for f in files:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("what", ["add", "recall", "conversation", "cli"])
def test_e2e_quick(tmp_path: Path, what: str) -> None:
    """The end-to-end runs through HTM, each in its short mode."""
    out = run("e2e", what, "--quick", cache=tmp_path)
    rows = table_rows(out)
    assert len(rows) >= 3 and all(len(r) == len(rows[0]) for r in rows)
    if what == "recall":
        assert rows[0][:3] == ["memories", "HTM.recall", "numpy exact + FTS5 + RRF"]
        assert float(rows[2][4]) > 0  # a full working memory: the recalls evict
    if what == "cli":
        assert [r[0] for r in rows[2:]] == ["python -c pass", "htm stats", "htm log",
                                            "htm forget", "htm export"]


def test_e2e_words_data_quick(tmp_path: Path) -> None:
    """Common-word queries over uniformly random vectors: the worst case for both arms."""
    out = run("e2e", "recall", "--quick", "--data", "words", cache=tmp_path)
    assert "(words data; medians)" in out and table_rows(out)[2][0] == "400"


@pytest.mark.postgres
@pytest.mark.parametrize("what", [["bulk"], ["bulk", "--working-memory", "off"], ["live"]])
def test_e2e_postgres_quick(tmp_path: Path, what: list[str], postgres_server_url: str) -> None:
    """On the suite's server (a throwaway server of a benchmark's own is what
    test_postgres_ops_quick runs)."""
    out = run("e2e_postgres", *what, "--quick", "--url", postgres_server_url, cache=tmp_path)
    if what[1:]:
        assert "working memory off" in out
    rows = table_rows(out)
    assert rows[2][0] == "300" and rows[2][-1].replace(".", "", 1).isdigit()


@pytest.mark.postgres
def test_scale_smoke(tmp_path: Path, postgres_server_url: str) -> None:
    """Many users in one store, at its smoke size: each sampled user's scoped recall in
    the shared store and alone, the vector arm's recall@10 against exact, and the two
    paths of a scoped search. On the suite's server."""
    out = run("scale", "--smoke", "--database-url", postgres_server_url, cache=tmp_path)
    assert "memories of 30 users" in out and "pgvector" in out
    rows = table_rows(out)
    users = [r for r in rows if r[0] in ("heavy", "medium", "light") and len(r) == 11]
    assert [r[0] for r in users] == ["heavy", "medium", "light"]
    for row in users:
        assert 0.0 <= float(row[7]) <= 1.0 and 0.0 <= float(row[8]) <= 1.0
        assert row[6].endswith("×")
    assert out.count("vector recall@10 (worst user)") == 3
    assert out.count("hybrid p50 against alone (worst user)") == 3


@pytest.mark.parametrize("what", ["longturns", "add"])
def test_long_memories_quick(tmp_path: Path, what: str) -> None:
    """The windows of long memories: recall over long turns, add_many of short texts."""
    rows = table_rows(run("long_memories", what, "--quick", cache=tmp_path))
    assert len(rows) >= 3 and all(len(r) == len(rows[0]) for r in rows)
    if what == "longturns":
        assert [r[1] for r in rows[2:]] == ["100", "100", "600"]
    else:
        assert rows[2][-1] != "0"  # 30-word texts make windows


def test_recall_dump_quick_is_the_same_twice(tmp_path: Path) -> None:
    """Two dumps of the same tree are byte-identical (what a before/after comparison relies
    on), and every set and kind of call is in them."""
    sets = "dev,assistant"
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    for out in (first, second):
        run("recall_dump", str(out), "--quick", "--sets", sets, cache=tmp_path)
    lines = first.read_text(encoding="utf-8").splitlines()
    assert first.read_bytes() == second.read_bytes()
    assert {line.split(" ", 1)[0] for line in lines} == set(sets.split(","))
    for call in ("default vector limit=1:", "default fulltext limit=25:", "explain:",
                 "default hybrid neighbors=3:", "default hybrid rerank:", " plain:",
                 " fusion-fn:"):
        assert any(call in line for line in lines), call
    assert any("'neighbor'" in line for line in lines)


@pytest.mark.postgres
def test_async_recall_quick(tmp_path: Path, postgres_server_url: str) -> None:
    """Runs on the suite's server; its ceilings come from the CPU times it reads in /proc."""
    out = run("async_recall", "--quick", "--concurrency", "20", "--database-url",
              postgres_server_url, cache=tmp_path)
    rows = {r[0]: r for r in table_rows(out)}
    assert float(rows["sequential"][1].replace(",", "")) > 0
    assert rows["sequential"][2] == "1.0×"
    assert float(rows["arecall × 20 (thread twins)"][1].replace(",", "")) > 0
    assert "ms client CPU" in out


def test_digests_quick(tmp_path: Path) -> None:
    rows = table_rows(run("digests", "--quick", cache=tmp_path))
    assert rows[0] == ["what", "time"]
    assert [r[0] for r in rows[2:]] == [
        "consolidate a month (9 digests of 140 memories)",
        "forget, no digest built on it (median)",
        "forget, its day, week and month rebuilt (median)"]
    assert all(r[1].endswith("s") for r in rows[2:])


@pytest.mark.parametrize("what", ["intake", "upgrade"])
def test_kinds_quick(tmp_path: Path, what: str) -> None:
    out = run("kinds", what, "--quick", cache=tmp_path)
    assert ("µs a memory" if what == "intake" else "migrate 7 -> 8 of 2,000 memories") in out


def test_time_phrase_recall_quick(tmp_path: Path) -> None:
    out = run("time_phrase_recall", "--quick", cache=tmp_path)
    assert "40 questions naming a time, 100 memories, SQLite" in out
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("- ")] == [
        "- rare-word gate (default)", "- arm for every time phrase"]
