"""PostgreSQL (pgvector HNSW) rows: bulk add, single add, vector and hybrid recall, recall@10.

Starts a throwaway PostgreSQL 16 + pgvector with ``pgserver`` (or uses
``HTM_BENCH_DATABASE_URL``), loads the same seeded data as the SQLite benchmarks into a
fresh database per size, and measures: bulk ``add_many`` throughput (batches of 1,000,
no embedding), single ``add`` + commit, top-10 vector search, hybrid search with the
default ``RetrievalConfig`` and with ``RetrievalConfig.plain()``, and recall@10 of the
vector arm against exact search. Query embedding is excluded.

Run: ``python -m benchmarks.postgres_ops [--quick] [--sizes 1000,10000] [--long]``
(``--long`` adds 1,000,000 memories: tens of minutes and several GB of disk).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._common import (
    dataset,
    fmt_time,
    fresh_database,
    goal_line,
    markdown_table,
    median_time,
    postgres_server,
    save_results,
)
from .store_ops import records


def bench_size(server_url: str, n: int, *, queries: int) -> dict[str, Any]:
    """Load ``n`` memories into a fresh database and time the operations."""
    from htm_core.retrieval import RetrievalConfig, search
    from htm_core.store.base import SearchFilters
    from htm_core.store.postgres import PostgresStore

    ds = dataset(n, queries=queries)
    out: dict[str, Any] = {"size": n}
    with fresh_database(server_url) as url:
        store = PostgresStore(url)
        recs = records(ds, 0, n)
        t0 = time.perf_counter()
        for begin in range(0, n, 1_000):
            store.add_many(recs[begin:begin + 1_000])
        out["bulk_per_s"] = n / (time.perf_counter() - t0)
        extra = iter(records(dataset(queries + 60, seed=17), 0, queries + 60, prefix="single"))
        out["single_add"] = median_time(lambda: store.add_many([next(extra)]), runs=queries,
                                        warmup=3)
        qs = [(ds.query_texts[i], ds.query_vectors[i].tolist()) for i in range(queries)]
        state = {"i": 0}

        def nxt() -> tuple[str, list[float]]:
            state["i"] += 1
            return qs[state["i"] % len(qs)]
        out["vector"] = median_time(
            lambda: store.vector_search(nxt()[1], limit=10, filters=SearchFilters()), runs=queries)

        def hybrid(config: Any = None) -> None:
            text, vec = nxt()
            search(store, query=text, query_vector=lambda: vec, strategy="hybrid", limit=10,
                   filters=SearchFilters(), config=config)
        out["hybrid"] = median_time(hybrid, runs=queries)
        out["hybrid_plain"] = median_time(lambda: hybrid(RetrievalConfig.plain()), runs=queries)
        id_of = {}
        for part in store.iter_memories(batch_size=5_000):
            id_of.update({m.key: m.id for m in part})
        ids = np.array([id_of[f"bench-{i}"] for i in range(n)])
        hits = 0
        for _text, vec in qs:
            got = {m for m, _ in store.vector_search(vec, limit=10, filters=SearchFilters())}
            exact = ids[np.argsort(-(ds.vectors @ np.asarray(vec, dtype=np.float32)))[:10]]
            hits += len(got & set(exact.tolist()))
        out["recall_at_10"] = hits / (10 * len(qs))
        store.close()
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for CI smoke runs")
    parser.add_argument("--sizes", default=None, help="comma-separated store sizes")
    parser.add_argument("--long", action="store_true", help="add the 1,000,000-memory run")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [300] if args.quick else [1_000, 10_000, 100_000])
    if args.long:
        sizes.append(1_000_000)
    rows = []
    with postgres_server(os.environ.get("HTM_BENCH_DATABASE_URL")) as url:
        for n in sizes:
            rows.append(bench_size(url, n, queries=5 if args.quick else 30))
    print("## PostgreSQL + pgvector HNSW (medians; query embedding excluded)\n")
    print(markdown_table(
        ["memories", "bulk add_many", "single add + commit", "vector top-10", "hybrid (default)",
         "hybrid (plain RRF)", "recall@10 vs exact"],
        [[f"{r['size']:,}", f"{r['bulk_per_s']:,.0f}/s", fmt_time(r["single_add"]),
          fmt_time(r["vector"]), fmt_time(r["hybrid"]), fmt_time(r["hybrid_plain"]),
          f"{r['recall_at_10']:.3f}"] for r in rows]))
    print()
    for r in rows:
        if r["size"] == 100_000:
            print(goal_line("hybrid top-10, PostgreSQL, 100k", r["hybrid"], 5e-3))
        if r["size"] == 1_000_000:
            print(goal_line("hybrid top-10, PostgreSQL, 1M", r["hybrid"], 15e-3))
    last = rows[-1]
    print(goal_line("single add + commit, PostgreSQL", last["single_add"], 10e-3))
    print(goal_line("bulk add_many, PostgreSQL", last["bulk_per_s"], 20_000, lower_is_better=False,
                    unit=lambda v: f"{v:,.0f}/s"))
    if not args.quick:
        save_results("postgres_ops", {"rows": rows})
    return {"rows": rows}


if __name__ == "__main__":
    main()
