"""Long memories: what their windows cost at add time and at recall time.

- ``longturns``: ``HTM.recall`` (hybrid top 10, hashing embedder, SQLite) on a store of
  about 430 user-assistant turns of about 180 words (each turn a user message and the
  assistant's answer from ``benchmarks/data/assistant.py``, seed 11), queried by that
  set's questions; beside it, in the same run, ``benchmarks.e2e``'s 600-turn chit-chat
  conversation. p50 per run, median of ``--runs``.
- ``add``: ``HTM.add_many`` of 30-word texts (three sentences) with an embedder that costs
  nothing (one ready vector for every text), working memory off, against raw ``sqlite3``
  rows + FTS5 (the same texts, keys, times and vectors in one transaction), and the ratio,
  in the same run; medians of ``--runs``.
- ``passes``: model passes and CPU time per memory of MiniLM embedding the long messages of
  the ``assistant`` set (``--messages`` of them) through ``HTM.add_many``: windows pooled
  from the pass over the whole text (MiniLM's ``embed_windows``) against each window
  embedded as a text of its own; and how close the pooled window vectors are to MiniLM's
  own vector of the window text (cosine).

Run: ``python -m benchmarks.long_memories {longturns,add,passes} [--runs R] [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ._common import fmt_time, markdown_table
from .data.assistant import build_assistant_set

ROBOT = "bench"


def _p50(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


# -- longturns -------------------------------------------------------------------------


def long_turns(n: int = 430) -> tuple[list[dict[str, Any]], list[str]]:
    """``n`` turns (a user message and the assistant's answer after it, oldest first) and
    the questions of their users (deterministic: the ``assistant`` set, seed 11)."""
    data = build_assistant_set(seed=11, users=6, sessions=40)
    turns: list[dict[str, Any]] = []
    questions: list[str] = []
    for conv in data["conversations"]:
        for session in conv["sessions"]:
            start = datetime.fromisoformat(session["date"])
            messages = session["turns"]
            for i in range(0, len(messages) - 1, 2):
                pair = messages[i:i + 2]
                turns.append({"content": "\n".join(f"{m['speaker']}: {m['text']}" for m in pair),
                              "key": pair[0]["id"],
                              "created_at": start + timedelta(seconds=60 * i)})
                if len(turns) == n:
                    break
            if len(turns) == n:
                break
        users = {t["key"].split("-")[0] for t in turns}
        questions += [q["question"] for q in data["questions"]
                      if q["evidence"][0].split("-")[0] in users]
        if len(turns) == n:
            break
    return turns, questions


def bench_longturns(n: int, *, queries: int, folder: Path, windows: bool = True
                    ) -> dict[str, Any]:
    """p50 ``HTM.recall`` over ``n`` long turns, hashing embedder, after one warm round
    (``windows``: False, the same store made and searched without windows)."""
    from htm_core import HTM, RetrievalConfig

    turns, questions = long_turns(n)
    questions = questions[:queries]
    words = statistics.mean(len(t["content"].split()) for t in turns)
    config = RetrievalConfig() if windows else RetrievalConfig(window_words=None)
    with HTM(robot=ROBOT, database_url=folder / f"longturns-{windows}.db", embedder="hashing",
             working_memory_tokens=1_000_000, retrieval=config) as htm:
        htm.add_many(turns)
        windows = htm.store.window_count()
        for q in questions:
            htm.recall(q, limit=10)
        times, cpu = [], []
        for _round in range(3):
            for q in questions:
                t0, c0 = time.perf_counter(), time.thread_time()
                htm.recall(q, limit=10)
                times.append(time.perf_counter() - t0)
                cpu.append(time.thread_time() - c0)
    return {"turns": len(turns), "words": words, "windows": windows,
            "queries": len(questions), "htm_recall": _p50(times), "cpu": _p50(cpu)}


def run_longturns(runs: int, quick: bool) -> dict[str, Any]:
    from .e2e import bench_conversation

    rows: dict[str, list[float]] = {"longturns": [], "no_windows": [], "conversation": [],
                                    "cpu": [], "cpu_no_windows": []}
    info: dict[str, Any] = {}
    for _ in range(runs):
        folder = Path(tempfile.mkdtemp(prefix="htm-long-"))
        try:
            info = bench_longturns(100 if quick else 430, queries=20 if quick else 100,
                                   folder=folder)
            rows["longturns"].append(info["htm_recall"])
            rows["cpu"].append(info["cpu"])
            bare = bench_longturns(100 if quick else 430, queries=20 if quick else 100,
                                   folder=folder, windows=False)
            rows["no_windows"].append(bare["htm_recall"])
            rows["cpu_no_windows"].append(bare["cpu"])
            chat = bench_conversation(600, queries=20 if quick else 100, folder=folder)
            rows["conversation"].append(chat["htm_recall"])
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        gc.collect()
    print(f"## HTM.recall p50, hybrid top 10, SQLite (median of {runs} runs; per run the "
          "p50 of 3 rounds of the queries)\n")
    print(markdown_table(
        ["store", "memories", "HTM.recall p50", "runs", "thread CPU p50"],
        [[f"long turns ({info['words']:.0f} words on average, {info['windows']:,} windows, "
          "hashing embedder)", f"{info['turns']:,}", fmt_time(_p50(rows["longturns"])),
          ", ".join(fmt_time(v) for v in rows["longturns"]), fmt_time(_p50(rows["cpu"]))],
         ["the same, windows off", f"{info['turns']:,}", fmt_time(_p50(rows["no_windows"])),
          ", ".join(fmt_time(v) for v in rows["no_windows"]),
          fmt_time(_p50(rows["cpu_no_windows"]))],
         ["chit-chat conversation (benchmarks.e2e conversation, ready vectors)", "600",
          fmt_time(_p50(rows["conversation"])),
          ", ".join(fmt_time(v) for v in rows["conversation"]), ""]]))
    return {"info": info, **{k: _p50(v) for k, v in rows.items()}, "samples": rows}


# -- add -------------------------------------------------------------------------------

_WORDS = ("garden kernel river paper window silver market ladder orange pocket planet "
          "candle harbor violin meadow copper basket thunder pencil lantern velvet anchor "
          "saddle marble falcon cactus tunnel hammer island mirror").split()


def thirty_word_texts(n: int) -> list[str]:
    """``n`` distinct texts of 30 words in three sentences of 10 (deterministic)."""
    out = []
    for i in range(n):
        words = [_WORDS[(i * 7 + j * 3 + (i // 30) * j) % len(_WORDS)] for j in range(27)]
        words[:3] = [f"item{i}", f"batch{i // 100}", f"group{i % 13}"]
        sentences = [" ".join(words[k:k + 9]) for k in range(0, 27, 9)]
        out.append(". ".join(f"{s} today" for s in sentences) + ".")
    return out


class FreeEmbedder:
    """An embedder that costs nothing: one ready vector for every text."""

    name = "free-embedder"

    def __init__(self, dim: int = 384) -> None:
        vector = np.random.default_rng(3).standard_normal(dim)
        self._vector = (vector / np.linalg.norm(vector)).tolist()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector] * len(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._vector


def _raw_rows(path: Path, texts: Sequence[str], vector: Sequence[float], batch: int) -> float:
    """Seconds to write ``texts`` as plain rows + an FTS5 index with ``sqlite3``."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, key TEXT UNIQUE, content TEXT, "
               "created_at REAL, embedding BLOB)")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(content, content='m', content_rowid='id')")
    blob = np.asarray(vector, dtype=np.float32).tobytes()
    now = datetime.now(timezone.utc).timestamp()
    t0 = time.perf_counter()
    for start in range(0, len(texts), batch):
        part = range(start, min(start + batch, len(texts)))
        with db:
            db.executemany("INSERT INTO m(id, key, content, created_at, embedding) "
                           "VALUES (?, ?, ?, ?, ?)",
                           [(i + 1, f"k{i}", texts[i], now, blob) for i in part])
            db.executemany("INSERT INTO f(rowid, content) VALUES (?, ?)",
                           [(i + 1, texts[i]) for i in part])
    elapsed = time.perf_counter() - t0
    db.close()
    return elapsed


def _htm_rows(path: Path, texts: Sequence[str], embedder: FreeEmbedder, batch: int,
              windows: Sequence[int]) -> float:
    """Seconds to write what ``HTM.add_many`` writes for ``texts`` (rows, full text, log
    lines, then ``windows[i]`` window rows of text i in a second transaction) straight through
    ``sqlite3`` into an htm store, with none of htm's Python work: the floor of its add path."""
    import hashlib
    import zlib

    from htm_core import HTM

    with HTM(robot=ROBOT, database_url=path, embedder=embedder) as htm:
        htm.add_many([{"content": "the store's embedder", "key": "first"}], working_memory=False)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA cache_size=-32768")
    blob = np.asarray(embedder.embed_query(""), dtype=np.float32).tobytes()
    columns = ("id, key, content, content_hash, content_crc, robot_id, importance, token_count, "
               "created_at, last_accessed, access_count, metadata, embedding, embedder, "
               "forgotten_at, kind, source, confidence")
    now = time.time()
    t0 = time.perf_counter()
    for start in range(0, len(texts), batch):
        ids = range(start + 2, min(start + batch, len(texts)) + 2)
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO htm_meta(key, value) VALUES ('fts_batch_insert', '1')")
        db.executemany(f"INSERT INTO memories({columns}) VALUES ({', '.join('?' * 18)})", [
            (i, f"k{i}", texts[i - 2], hashlib.sha256(texts[i - 2].encode()).hexdigest(),
             zlib.crc32(texts[i - 2].encode()), 1, 1.0, 40, now, now, 0, "{}", blob,
             embedder.name, None, "episodic", None, None) for i in ids])
        db.execute("INSERT INTO memories_fts(rowid, content) SELECT id, content FROM memories "
                   "WHERE id BETWEEN ? AND ?", (ids[0], ids[-1]))
        db.execute("DELETE FROM htm_meta WHERE key = 'fts_batch_insert'")
        db.execute("INSERT INTO operations(at, op, robot_id, memory_id, key, detail) SELECT ?, "
                   "'add', robot_id, id, key, '{}' FROM memories WHERE id BETWEEN ? AND ? "
                   "ORDER BY id", (now, ids[0], ids[-1]))
        db.execute("COMMIT")
        if any(windows[i - 2] for i in ids):
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT INTO memory_windows(memory_id, n, embedding) VALUES (?, ?, ?)",
                           [(i, k, blob) for i in ids for k in range(windows[i - 2])])
            db.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    db.close()
    return elapsed


def _add_round(folder: Path, texts: Sequence[str], batch: int, embedder: FreeEmbedder,
               rates: dict[str, list[float]]) -> int:
    """One run of :func:`run_add` in ``folder``: each rate appended; the window rows made."""
    from htm_core import HTM, RetrievalConfig
    from htm_core._windows import split_windows

    n, windows = len(texts), 0
    items = [{"content": t, "key": f"k{i}"} for i, t in enumerate(texts)]
    cpu = time.process_time()
    rates["raw"].append(n / _raw_rows(folder / "raw.db", texts, embedder.embed_query(""), batch))
    rates["cpu_raw"].append((time.process_time() - cpu) / n)
    for name, config in (("htm", RetrievalConfig()),
                         ("no_windows", RetrievalConfig(window_words=None))):
        with HTM(robot=ROBOT, database_url=folder / f"{name}.db", embedder=embedder,
                 retrieval=config) as htm:
            t0, cpu = time.perf_counter(), time.process_time()
            for start in range(0, n, batch):
                htm.add_many(items[start:start + batch], working_memory=False)
            rates[name].append(n / (time.perf_counter() - t0))
            rates[f"cpu_{name}"].append((time.process_time() - cpu) / n)
            windows = max(windows, htm.store.window_count())
    counts = [len(split_windows(t, 20)) for t in texts]
    rates["rows"].append(n / _htm_rows(folder / "rows.db", texts, embedder, batch, counts))
    rates["rows_no_windows"].append(
        n / _htm_rows(folder / "rows0.db", texts, embedder, batch, [0] * n))
    return windows


def run_add(n: int, runs: int, batch: int) -> dict[str, Any]:
    texts = thirty_word_texts(n)
    embedder = FreeEmbedder()
    rates: dict[str, list[float]] = {k: [] for k in ("htm", "no_windows", "raw", "rows",
                                                     "rows_no_windows", "cpu_htm",
                                                     "cpu_no_windows", "cpu_raw")}
    windows = 0
    warm = Path(tempfile.mkdtemp(prefix="htm-add30-warm-"))
    try:  # the token counter's tables and lazy imports load here, not in the first run
        _add_round(warm, texts[:50], batch, embedder, {k: [] for k in rates})
    finally:
        shutil.rmtree(warm, ignore_errors=True)
    for _ in range(runs):
        folder = Path(tempfile.mkdtemp(prefix="htm-add30-"))
        try:
            windows = _add_round(folder, texts, batch, embedder, rates)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        gc.collect()
    htm_rate, raw_rate = _p50(rates["htm"]), _p50(rates["raw"])
    bare = _p50(rates["no_windows"])
    print(f"## HTM.add_many of 30-word texts, an embedder that costs nothing, SQLite "
          f"(batches of {batch}; medians of {runs})\n")
    print(markdown_table(
        ["memories", "HTM.add_many (working memory off)", "the same, windows off",
         "sqlite3 rows + FTS5", "raw / HTM", "raw / HTM windows off", "window rows written"],
        [[f"{n:,}", f"{htm_rate:,.0f}/s", f"{bare:,.0f}/s", f"{raw_rate:,.0f}/s",
          f"{raw_rate / htm_rate:.1f}", f"{raw_rate / bare:.1f}", f"{windows:,}"]]))
    rows, rows0 = _p50(rates["rows"]), _p50(rates["rows_no_windows"])
    print(f"\nhtm's own rows written by sqlite3 alone (no htm code; the floor of its add path): "
          f"{rows:,.0f}/s with windows (raw / it {raw_rate / rows:.1f}), {rows0:,.0f}/s "
          f"without (raw / it {raw_rate / rows0:.1f})")
    cpu = {k: _p50(rates[f"cpu_{k}"]) for k in ("htm", "no_windows", "raw")}
    print(f"\nprocess CPU time per memory: HTM.add_many {fmt_time(cpu['htm'])}, windows off "
          f"{fmt_time(cpu['no_windows'])}, sqlite3 rows + FTS5 {fmt_time(cpu['raw'])} (HTM / "
          f"raw {cpu['htm'] / cpu['raw']:.1f}, windows off {cpu['no_windows'] / cpu['raw']:.1f})")
    print("\nruns (HTM.add_many, windows off, sqlite3 rows + FTS5; raw / HTM in that run): "
          + "; ".join(f"{h:,.0f}/s, {b:,.0f}/s, {r:,.0f}/s ({r / h:.1f}, {r / b:.1f})"
                      for h, b, r in zip(rates["htm"], rates["no_windows"], rates["raw"],
                                         strict=True)))
    return {"size": n, "htm": htm_rate, "no_windows": bare, "raw": raw_rate,
            "ratio": raw_rate / htm_rate, "windows": windows, "floor": rows,
            "floor_no_windows": rows0, "cpu": cpu, "samples": rates}


# -- passes ----------------------------------------------------------------------------


class _WindowTexts:
    """MiniLM without ``embed_windows``: each window is embedded as a text of its own."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = self.inner.embed_documents(texts)
        return out

    def embed_query(self, text: str) -> list[float]:
        out: list[float] = self.inner.embed_query(text)
        return out


def assistant_messages(n: int) -> list[dict[str, Any]]:
    """The first ``n`` messages of the ``assistant`` set, as ``add_many`` items."""
    data = build_assistant_set(seed=11)
    out: list[dict[str, Any]] = []
    for conv in data["conversations"]:
        for session in conv["sessions"]:
            for turn in session["turns"]:
                out.append({"content": f"{turn['speaker']}: {turn['text']}", "key": turn["id"]})
    return out[:n]


def _embed_run(items: list[dict[str, Any]], embedder: Any, folder: Path,
               batch: int) -> dict[str, Any]:
    from htm_core import HTM

    counter = embedder.inner if isinstance(embedder, _WindowTexts) else embedder
    before, cpu = counter.passes, time.process_time()
    with HTM(robot=ROBOT, database_url=folder / "passes.db", embedder=embedder) as htm:
        for start in range(0, len(items), batch):
            htm.add_many(items[start:start + batch], working_memory=False)
        windows = htm.store.window_count()
    return {"passes": (counter.passes - before) / len(items),
            "cpu": (time.process_time() - cpu) / len(items), "windows": windows}


def agreement(items: list[dict[str, Any]], embedder: Any) -> dict[str, float]:
    """Cosine of each pooled window vector with MiniLM's vector of the window's text."""
    from htm_core._windows import window_plan

    texts = [i["content"] for i in items if window_plan(i["content"], 20)[0]]
    plans = [window_plan(t, 20) for t in texts]
    _, pooled = embedder.embed_windows(texts, [p[1] for p in plans])
    own = np.asarray(embedder.embed_documents([w for p in plans for w in p[0]]))
    got = np.asarray([v for rows in pooled for v in rows])
    cos = (got * own).sum(axis=1)
    return {"windows": float(len(cos)), "mean": float(cos.mean()),
            "median": float(np.median(cos)), "p10": float(np.percentile(cos, 10)),
            "min": float(cos.min())}


def run_passes(n: int, batch: int) -> dict[str, Any]:
    from htm_core.embeddings import LocalEmbedder

    items = assistant_messages(n)
    words = statistics.mean(len(i["content"].split()) for i in items)
    rows = {}
    for name, embedder in (("windows pooled (pool_windows=True)",
                            LocalEmbedder(pool_windows=True)),
                           ("each window a text (the default)", _WindowTexts(LocalEmbedder()))):
        folder = Path(tempfile.mkdtemp(prefix="htm-passes-"))
        try:
            rows[name] = _embed_run(items, embedder, folder, batch)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    agree = agreement(items[:60], LocalEmbedder())
    print(f"## MiniLM passes and CPU per memory, `assistant` set, first {len(items)} "
          f"messages ({words:.0f} words on average), add_many batches of {batch}\n")
    print(markdown_table(["windows", "model passes per memory", "CPU per memory",
                          "window rows"],
                         [[k, f"{v['passes']:.2f}", fmt_time(v["cpu"]), f"{v['windows']:,}"]
                          for k, v in rows.items()]))
    print(f"\npooled against MiniLM's own window vectors ({agree['windows']:.0f} windows of "
          f"the first 60 messages): cosine mean {agree['mean']:.3f}, median "
          f"{agree['median']:.3f}, p10 {agree['p10']:.3f}, min {agree['min']:.3f}")
    return {"rows": rows, "agreement": agree, "messages": len(items)}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["longturns", "add", "passes"])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for smoke runs")
    parser.add_argument("--runs", type=int, default=3, help="repetitions (median)")
    parser.add_argument("--size", type=int, default=None, help="add: texts; passes: messages")
    parser.add_argument("--batch", type=int, default=1_000, help="add_many batch size")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.what == "longturns":
        return run_longturns(1 if args.quick else args.runs, args.quick)
    if args.what == "add":
        return run_add(args.size or (2_000 if args.quick else 20_000),
                       1 if args.quick else args.runs, args.batch)
    return run_passes(args.size or (20 if args.quick else 200), min(args.batch, 64))


if __name__ == "__main__":
    main()
