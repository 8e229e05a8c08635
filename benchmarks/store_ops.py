"""Long-term store operations on SQLite: single add, bulk add, open + first recall, RSS.

Embedding is excluded (vectors are precomputed; see ``benchmarks.embedding`` for the
model's cost). Baselines in the same run: LangChain ``InMemoryVectorStore`` and LlamaIndex
``SimpleVectorStore`` fed the same precomputed vectors.

Run: ``python -m benchmarks.store_ops [--quick] [--sizes 1000,10000,100000]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
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
    index = store._index
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


def bench_bulk(n: int, batch: int) -> dict[str, float]:
    """Throughput of ``store.add_many`` in batches of ``batch``, and of the baselines."""
    from htm_core.store.sqlite import SQLiteStore

    ds = dataset(n, seed=13)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bulk.db")
        recs = records(ds, 0, n)
        t0 = time.perf_counter()
        for begin in range(0, n, batch):
            store.add_many(recs[begin:begin + batch])
        out["htm_bulk_per_s"] = n / (time.perf_counter() - t0)
        store.close()
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


def bench_raw_floor(n: int, batch: int) -> float:
    """Rows/s of plain ``sqlite3`` executemany of the same rows into htm's schema.

    The floor of the embedded backend on this machine: one INSERT per row with the FTS5
    trigger and indexes, no Python work per memory, committed per batch.
    """
    import sqlite3

    from htm_core.store.sqlite import _SCHEMA_V1

    ds = dataset(n, seed=13)
    rows = [(i + 1, f"bench-{i}", ds.texts[i], f"{i:064x}", 1, 1.0, 10, float(i), float(i), 0, "{}",
             ds.vectors[i].tobytes(), EMBEDDER, None) for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "raw.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA_V1:
            conn.execute(statement)
        conn.execute("INSERT INTO robots(name, created_at) VALUES ('bench', 0)")
        t0 = time.perf_counter()
        for begin in range(0, n, batch):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO memories(id, key, content, content_hash, robot_id, importance, "
                "token_count, created_at, last_accessed, access_count, metadata, embedding, "
                "embedder, forgotten_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows[begin:begin + batch])
            conn.execute("COMMIT")
        rate = n / (time.perf_counter() - t0)
        conn.close()
    return rate


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
from htm_core.retrieval import search
from benchmarks._common import rss_mb
queries = json.loads(open(sys.argv[2]).read())
base = rss_mb()
t1 = time.perf_counter()
store = SQLiteStore(sys.argv[1])
text, vec = queries[0]
hits = search(store, query=text, query_vector=lambda: vec, strategy="hybrid", limit=10,
              filters=SearchFilters())
t2 = time.perf_counter()
index = store._index
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


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for CI smoke runs")
    parser.add_argument("--sizes", default=None, help="comma-separated store sizes")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [500] if args.quick else [1_000, 10_000, 100_000])
    single = bench_single_add(20 if args.quick else 300)
    bulk = bench_bulk(1_000 if args.quick else 20_000, batch=500 if args.quick else 1_000)
    bulk["raw_sqlite_per_s"] = bench_raw_floor(1_000 if args.quick else 20_000,
                                               batch=500 if args.quick else 1_000)
    opens = []
    for n in sizes:
        opened = bench_open(n)
        opened["size"] = n
        opens.append(opened)
    print("## SQLite store operations (no embedding)\n")
    rows = [["single `add` + commit (median)", fmt_time(single["single_add"]), "–", "–", "–"],
            ["bulk `add_many`, batches of 1,000", f"{bulk['htm_bulk_per_s']:,.0f}/s",
             f"{bulk['raw_sqlite_per_s']:,.0f}/s "
             f"(htm at {bulk['htm_bulk_per_s'] / bulk['raw_sqlite_per_s']:.0%})",
             f"{bulk.get('langchain_bulk_per_s', 0):,.0f}/s",
             f"{bulk.get('llamaindex_bulk_per_s', 0):,.0f}/s"]]
    print(markdown_table(["operation", "htm (SQLite, durable)", "raw sqlite3 executemany, same rows",
                          "LangChain in-memory", "LlamaIndex in-memory"], rows))
    print()
    print(markdown_table(
        ["memories", "open + first hybrid recall", "RSS after 5 recalls", "RSS before open"],
        [[f"{o['size']:,}", fmt_time(o["open_first_recall"]), f"{o['rss_mb']:.0f} MB",
          f"{o['rss_before_open_mb']:.0f} MB"] for o in opens]))
    print()
    print(goal_line("single add + commit", single["single_add"], 0.5e-3))
    print(goal_line("bulk add_many", bulk["htm_bulk_per_s"], 40_000, lower_is_better=False,
                    unit=lambda v: f"{v:,.0f}/s"))
    big = next((o for o in opens if o["size"] == 100_000), None)
    if big:
        print(goal_line("open 100k store + first recall", big["open_first_recall"], 1.0))
        print(goal_line("RSS, 100k memories", big["rss_mb"], 300, unit=lambda v: f"{v:.0f} MB"))
    payload = {"single": single, "bulk": bulk, "opens": opens,
               "when": datetime.now().isoformat(timespec="seconds")}
    if not args.quick:
        save_results("store_ops", payload)
    return payload


if __name__ == "__main__":
    main()
