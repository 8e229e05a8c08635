"""Long-term store operations on SQLite: single add, bulk add, open + first recall, RSS.

Embedding is excluded (vectors are precomputed; see ``benchmarks.embedding`` for the
model's cost). Baselines in the same run: LangChain ``InMemoryVectorStore`` and LlamaIndex
``SimpleVectorStore`` fed the same precomputed vectors.

Run: ``python -m benchmarks.store_ops [--quick] [--sizes 1000,10000,100000]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ._common import (
    CACHE_DIR,
    Dataset,
    VectorTableEmbedder,
    dataset,
    fmt_time,
    goal_line,
    markdown_table,
    median_time,
    save_results,
)

ROBOT = "bench"
EMBEDDER = "VectorTableEmbedder"


def records(ds: Dataset, start: int, stop: int, prefix: str = "bench") -> list[Any]:
    """``NewMemory`` records for items ``start..stop`` of ``ds``, with their vectors."""
    from htm_core.store import NewMemory

    return [NewMemory(key=f"{prefix}-{i}", content=ds.texts[i], robot=ROBOT, importance=1.0 + i % 9,
                      token_count=len(ds.texts[i]) // 4, created_at=ds.created[i],
                      embedding=ds.vectors[i], embedder=EMBEDDER)
            for i in range(start, stop)]


def store_path(n: int, seed: int = 7) -> Path:
    """A cached SQLite store of ``n`` seeded memories (built once, then reused)."""
    from htm_core.store.sqlite import SQLiteStore

    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = CACHE_DIR / f"store-v2-{n}-{seed}.db"  # v2: the rare-word vocabulary
    done = path.with_suffix(".ok")
    if path.exists() and done.exists():
        return path
    for old in CACHE_DIR.glob(f"{path.name}*"):
        old.unlink()
    ds = dataset(n, seed=seed)
    store = SQLiteStore(path)
    for begin in range(0, n, 5_000):
        store.add_many(records(ds, begin, min(n, begin + 5_000)))
    index = store.mirror.index
    if index is not None and hasattr(index, "ensure_graph"):
        index.ensure_graph()  # persist the HNSW graph, as a long-running app would have
    store.close()
    done.write_text("ok")
    return path


def bench_single_add(runs: int) -> dict[str, float]:
    """Median ``store.add_many([one])`` (one transaction, committed) on a file store."""
    from htm_core.store.sqlite import SQLiteStore

    ds = dataset(runs + 10, seed=11)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "single.db")
        recs = records(ds, 0, runs + 10)
        it = iter(recs)
        t = median_time(lambda: store.add_many([next(it)]), runs=runs, warmup=5)
        store.close()
    return {"single_add": t}


def bench_bulk(n: int, batch: int, runs: int = 1) -> dict[str, Any]:
    """Throughput of ``store.add_many`` in batches of ``batch``, of the raw floor, and of the
    baselines.

    htm (plain, and inside ``bulk_load()``) and the raw floor (with and without the
    ``content_hash`` index that ``bulk_load`` defers) run ``runs`` times each, alternating,
    on a fresh file each time; the medians are the figures (the machine is shared, so single
    runs swing by 2×) and the individual runs are kept too.
    """
    ds = dataset(n, seed=13)
    recs = records(ds, 0, n)
    # The same memories without vectors: a store with no embedder (full text only).
    bare = [replace(r, embedding=None, embedder=None) for r in recs]
    rows = raw_rows(ds, n)
    rates: dict[str, list[float]] = {"htm_bulk": [], "htm_bulk_load": [], "raw_sqlite": [],
                                     "raw_sqlite_no_hash_index": [], "htm_bulk_no_vectors": [],
                                     "htm_bulk_load_no_vectors": []}
    for _ in range(runs):
        rates["htm_bulk"].append(_htm_bulk_once(recs, batch))
        rates["htm_bulk_load"].append(_htm_bulk_once(recs, batch, bulk_load=True))
        rates["raw_sqlite"].append(_raw_bulk_once(rows, batch))
        rates["raw_sqlite_no_hash_index"].append(_raw_bulk_once(rows, batch, hash_index=False))
        rates["htm_bulk_no_vectors"].append(_htm_bulk_once(bare, batch))
        rates["htm_bulk_load_no_vectors"].append(_htm_bulk_once(bare, batch, bulk_load=True))
    out: dict[str, Any] = {}
    for name, values in rates.items():
        out[f"{name}_per_s"] = statistics.median(values)
        out[f"{name}_runs_per_s"] = values
    emb = VectorTableEmbedder(ds.texts, ds.vectors)
    try:
        from langchain_core.documents import Document
        from langchain_core.vectorstores import InMemoryVectorStore

        lc = InMemoryVectorStore(embedding=_LCEmbeddings(emb))
        t0 = time.perf_counter()
        for begin in range(0, n, batch):
            lc.add_documents([Document(page_content=t) for t in ds.texts[begin:begin + batch]])
        out["langchain_bulk_per_s"] = n / (time.perf_counter() - t0)
    except ImportError:
        pass
    try:
        from llama_index.core.schema import TextNode
        from llama_index.core.vector_stores import SimpleVectorStore

        li = SimpleVectorStore()
        t0 = time.perf_counter()
        for begin in range(0, n, batch):
            li.add([TextNode(text=ds.texts[i], id_=f"n{i}", embedding=ds.vectors[i].tolist())
                    for i in range(begin, min(n, begin + batch))])
        out["llamaindex_bulk_per_s"] = n / (time.perf_counter() - t0)
    except ImportError:
        pass
    return out


def _htm_bulk_once(recs: Sequence[Any], batch: int, *, bulk_load: bool = False) -> float:
    """Rows/s of ``SQLiteStore.add_many`` over ``recs`` in batches, on a fresh file (inside
    ``bulk_load()`` when asked, its index build at the end included)."""
    from htm_core.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bulk.db")
        t0 = time.perf_counter()
        with store.bulk_load() if bulk_load else contextlib.nullcontext():
            for begin in range(0, len(recs), batch):
                store.add_many(recs[begin:begin + batch])
        rate = len(recs) / (time.perf_counter() - t0)
        store.close()
    return rate


def raw_rows(ds: Dataset, n: int) -> list[tuple[Any, ...]]:
    """The rows ``add_many`` writes for the first ``n`` items of ``ds``, ready for SQL."""
    from htm_core.store.base import content_hash

    return [(i + 1, f"bench-{i}", ds.texts[i], content_hash(ds.texts[i]), 1, 1.0 + i % 9,
             len(ds.texts[i]) // 4, ds.created[i].timestamp(), ds.created[i].timestamp(), 0, "{}",
             ds.vectors[i].tobytes(), EMBEDDER, None) for i in range(n)]


def _raw_bulk_once(rows: Sequence[tuple[Any, ...]], batch: int, *, hash_index: bool = True) -> float:
    """Rows/s of plain ``sqlite3`` doing the SQL htm's ``add_many`` does: the floor.

    No Python work per memory. Per batch, in one committed transaction, the statements htm
    issues: the full-text trigger stood aside, one ``executemany`` of the rows into
    ``memories`` (with its indexes), one ``INSERT .. SELECT`` into the FTS5 index, one
    ``executemany`` of the operations-log rows; on a connection set up like htm's (WAL,
    ``synchronous=NORMAL``, the large-batch page cache). ``hash_index=False`` leaves out the
    ``content_hash`` index, as ``bulk_load`` does, and builds it at the end.
    """
    import sqlite3

    from htm_core.store.sqlite import _FTS_BATCH_KEY, _HASH_INDEX, _LARGE_BATCH_CACHE_KIB, _SCHEMA_V1

    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "raw.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA cache_size=-{_LARGE_BATCH_CACHE_KIB}")
        for statement in _SCHEMA_V1:
            conn.execute(statement)
        if not hash_index:
            conn.execute("DROP INDEX memories_hash")
        conn.execute("INSERT INTO robots(name, created_at) VALUES ('bench', 0)")
        t0 = time.perf_counter()
        for begin in range(0, len(rows), batch):
            part = rows[begin:begin + batch]
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT OR REPLACE INTO htm_meta(key, value) VALUES (?, '1')", (_FTS_BATCH_KEY,))
            conn.executemany(
                "INSERT INTO memories(id, key, content, content_hash, robot_id, importance, "
                "token_count, created_at, last_accessed, access_count, metadata, embedding, "
                "embedder, forgotten_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", part)
            conn.execute("INSERT INTO memories_fts(rowid, content) SELECT id, content FROM memories "
                         "WHERE id BETWEEN ? AND ?", (part[0][0], part[-1][0]))
            conn.execute("DELETE FROM htm_meta WHERE key = ?", (_FTS_BATCH_KEY,))
            now = time.time()
            conn.executemany("INSERT INTO operations(at, op, robot_id, memory_id, key, detail) "
                             "VALUES (?, 'add', 1, ?, ?, '{}')", [(now, r[0], r[1]) for r in part])
            conn.execute("COMMIT")
        if not hash_index:
            conn.execute(_HASH_INDEX)
        rate = len(rows) / (time.perf_counter() - t0)
        conn.close()
    return rate


def bench_bulk_into(n: int, rows: int = 20_000, batch: int = 1_000) -> dict[str, float]:
    """Rows/s of ``add_many`` into a copy of the cached ``n`` store, in batches of ``batch``.

    Three times: right after open (no search yet, so the HNSW graph is not loaded and
    nothing is folded into it); after one vector search (the persisted graph is loaded;
    every 5,000 new rows are folded into it in a background thread, as in a running app);
    and right after open inside ``bulk_load()`` (its index build at the end included).
    """
    from htm_core.store.base import SearchFilters
    from htm_core.store.sqlite import SQLiteStore

    src = store_path(n)
    ds = dataset(rows, seed=21)
    recs = records(ds, 0, rows, prefix="more")
    out: dict[str, float] = {}
    for label in ("after_open", "graph_loaded", "bulk_load"):
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / src.name
            shutil.copy(src, db)
            graph = src.with_name(src.name + "-vectors.usearch")
            if graph.exists():
                shutil.copy(graph, db.with_name(db.name + "-vectors.usearch"))
            store = SQLiteStore(db)
            if label == "graph_loaded":
                store.vector_search(ds.vectors[0], limit=10, filters=SearchFilters())
                index = store.mirror.index
                if index is not None and hasattr(index, "wait"):
                    index.wait(300)
            t0 = time.perf_counter()
            with store.bulk_load() if label == "bulk_load" else contextlib.nullcontext():
                for begin in range(0, rows, batch):
                    store.add_many(recs[begin:begin + batch])
            out[label] = rows / (time.perf_counter() - t0)
            store.close()
    return out


class _LCEmbeddings:
    """A LangChain ``Embeddings`` over precomputed vectors (no model cost)."""

    def __init__(self, table: VectorTableEmbedder) -> None:
        self.table = table

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.table.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.table.embed_query(text)


_CHILD = """
import json, sys, time
import numpy as np
from htm_core.store.sqlite import SQLiteStore
from htm_core.store.base import SearchFilters
from htm_core.recall import search
from benchmarks._common import rss_mb
queries = json.loads(open(sys.argv[2]).read())
base = rss_mb()
t1 = time.perf_counter()
store = SQLiteStore(sys.argv[1])
text, vec = queries[0]
hits = search(store, query=text, query_vector=lambda: vec, strategy="hybrid", limit=10,
              filters=SearchFilters())
t2 = time.perf_counter()
index = store.mirror.index
if index is not None and hasattr(index, "wait"):
    index.wait(300)
for text, vec in queries[1:]:
    search(store, query=text, query_vector=lambda: vec, strategy="hybrid", limit=10,
           filters=SearchFilters())
print(json.dumps({"open_first_recall": t2 - t1, "hits": len(hits), "rss_mb": rss_mb(),
                  "rss_before_open_mb": base}))
"""


def bench_open(n: int) -> dict[str, float]:
    """Open the cached ``n`` store in a fresh process and answer one hybrid recall; RSS.

    The child process imports htm and reads five queries from a file, so its RSS is the
    store's cost plus the interpreter and imports (reported separately), nothing else.
    """
    path = store_path(n)
    ds = dataset(n, queries=5)
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        qfile = Path(tmp) / "queries.json"
        qfile.write_text(json.dumps([[t, v.tolist()] for t, v in
                                     zip(ds.query_texts, ds.query_vectors, strict=True)]))
        out = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(qfile)],
                             capture_output=True, text=True, check=True, cwd=root)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _operation_rows(single: dict[str, Any], bulk: dict[str, Any], into: dict[str, Any] | None,
                    *, batch: int, runs: int, big_n: int) -> list[list[str]]:
    """The rows of the operations table: single add, bulk add_many in its variants and,
    at 20,000 memories and up, add_many into the largest store."""
    rows = [["single `add` + commit (median)", fmt_time(single["single_add"]), "–", "–", "–"],
            [f"bulk `add_many`, batches of {batch:,} (median of {runs})",
             f"{bulk['htm_bulk_per_s']:,.0f}/s (runs: "
             + ", ".join(f"{r:,.0f}" for r in sorted(bulk["htm_bulk_runs_per_s"])) + ")",
             f"{bulk['raw_sqlite_per_s']:,.0f}/s "
             f"(htm at {bulk['htm_bulk_per_s'] / bulk['raw_sqlite_per_s']:.0%})",
             f"{bulk.get('langchain_bulk_per_s', 0):,.0f}/s",
             f"{bulk.get('llamaindex_bulk_per_s', 0):,.0f}/s"],
            [f"the same inside `bulk_load()` (median of {runs})",
             f"{bulk['htm_bulk_load_per_s']:,.0f}/s (runs: "
             + ", ".join(f"{r:,.0f}" for r in sorted(bulk["htm_bulk_load_runs_per_s"])) + ")",
             f"{bulk['raw_sqlite_no_hash_index_per_s']:,.0f}/s without the `content_hash` index "
             f"(htm at {bulk['htm_bulk_load_per_s'] / bulk['raw_sqlite_no_hash_index_per_s']:.0%})",
             "–", "–"],
            [f"the same memories without vectors (no embedder: full text only), plain / "
             f"inside `bulk_load()` (median of {runs})",
             f"{bulk['htm_bulk_no_vectors_per_s']:,.0f}/s / "
             f"{bulk['htm_bulk_load_no_vectors_per_s']:,.0f}/s", "–", "–", "–"]]
    if into is not None:
        rows.append([f"bulk `add_many` of 20,000 into the {big_n:,} store, batches of 1,000: "
                     "after open / with its HNSW graph loaded / inside `bulk_load()`",
                     f"{into['after_open']:,.0f}/s / {into['graph_loaded']:,.0f}/s / "
                     f"{into['bulk_load']:,.0f}/s", "–", "–", "–"])
    return rows


def _print_goals(single: dict[str, Any], bulk: dict[str, Any], opens: list[dict[str, Any]]
                 ) -> None:
    """Each operation against its goal; open and RSS at 100,000 memories when measured."""
    print(goal_line("single add + commit", single["single_add"], 0.5e-3))
    print(goal_line("bulk add_many", bulk["htm_bulk_per_s"], 40_000, lower_is_better=False,
                    unit=lambda v: f"{v:,.0f}/s"))
    print(goal_line("bulk add_many inside bulk_load()", bulk["htm_bulk_load_per_s"], 40_000,
                    lower_is_better=False, unit=lambda v: f"{v:,.0f}/s"))
    print(goal_line("bulk add_many, memories without vectors", bulk["htm_bulk_no_vectors_per_s"],
                    40_000, lower_is_better=False, unit=lambda v: f"{v:,.0f}/s"))
    big = next((o for o in opens if o["size"] == 100_000), None)
    if big:
        print(goal_line("open 100k store + first recall", big["open_first_recall"], 1.0))
        print(goal_line("RSS, 100k memories", big["rss_mb"], 300, unit=lambda v: f"{v:.0f} MB"))


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for CI smoke runs")
    parser.add_argument("--sizes", default=None, help="comma-separated store sizes")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [500] if args.quick else [1_000, 10_000, 100_000])
    single = bench_single_add(20 if args.quick else 300)
    runs, batch = (1, 500) if args.quick else (5, 1_000)
    bulk = bench_bulk(1_000 if args.quick else 20_000, batch=batch, runs=runs)
    big_n = max(sizes)
    into = bench_bulk_into(big_n) if big_n >= 20_000 else None
    opens = []
    for n in sizes:
        opened = bench_open(n)
        opened["size"] = n
        opens.append(opened)
    print("## SQLite store operations (no embedding)\n")
    rows = _operation_rows(single, bulk, into, batch=batch, runs=runs, big_n=big_n)
    print(markdown_table(["operation", "htm (SQLite, durable)", "raw sqlite3, same rows and statements",
                          "LangChain in-memory", "LlamaIndex in-memory"], rows))
    print()
    print(markdown_table(
        ["memories", "open + first hybrid recall", "RSS after 5 recalls", "RSS before open"],
        [[f"{o['size']:,}", fmt_time(o["open_first_recall"]), f"{o['rss_mb']:.0f} MB",
          f"{o['rss_before_open_mb']:.0f} MB"] for o in opens]))
    print()
    _print_goals(single, bulk, opens)
    payload = {"single": single, "bulk": bulk, "bulk_into_largest": into, "opens": opens,
               "when": datetime.now().isoformat(timespec="seconds")}
    if not args.quick:
        save_results("store_ops", payload)
    return payload


if __name__ == "__main__":
    main()
