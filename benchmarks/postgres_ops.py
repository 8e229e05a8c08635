"""PostgreSQL (pgvector HNSW) rows: bulk loads, add_many, single add, recall, recall@10.

Starts a throwaway PostgreSQL 16 + pgvector with ``pgserver`` (or uses
``HTM_BENCH_DATABASE_URL``), loads the same seeded data as the SQLite benchmarks into a
fresh database per size, and measures (rows carry precomputed vectors; no embedding):

- the load: ``add_many`` in batches of ``--batch`` (1,000) inside ``store.bulk_load()``,
  i.e. binary COPY with the HNSW and GIN indexes dropped: rows/s of the COPY phase, the
  time of the index build at the end, and rows/s of the whole load including that build;
- ``add_many`` into the loaded store with its indexes live (every row updates the HNSW
  graph), over ``--append`` rows in batches of 1,000, once through COPY and once through
  the statement path (``copy_min_rows`` set out of reach);
- single ``add`` + commit, top-10 vector search, hybrid search with the default
  ``RetrievalConfig`` and with ``RetrievalConfig.plain()``, and recall@10 of the vector arm
  against exact search. Query embedding is excluded.

The throwaway server gets ``shared_buffers`` of a quarter of the machine's memory (at most
8 GB): pgserver keeps PostgreSQL's 128 MB default, in which a 100k store's table and HNSW
graph already do not fit, so every search would read pages from the OS cache. The store's
HNSW parameters are the store's defaults (m = 16, ef_construction = 64, ``ef_search`` = 64)
below 1,000,000 memories, and what docs/postgres.md recommends from there up
(ef_construction = 128, ``ef_search`` = 200: recall@10 ≥ 0.95 on this data).

Run: ``python -m benchmarks.postgres_ops [--quick] [--sizes 1000,10000] [--long]``
(``--long`` adds 1,000,000 memories: tens of minutes and several GB of disk).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._common import (
    dataset,
    fmt_time,
    fresh_database,
    goal_line,
    hybrid_searcher,
    markdown_table,
    median_time,
    postgres_server,
    save_results,
    shared_buffers_mb,
)
from .store_ops import records


def _bulk_load(store: Any, ds: Any, n: int, batch: int, memory_mb: int) -> dict[str, float]:
    """``add_many`` in batches inside ``bulk_load()``: the COPY phase, the index build and
    the whole load; then a checkpoint, outside the timings."""
    recs = records(ds, 0, n)
    loading = store.bulk_load(maintenance_work_mem_mb=memory_mb)
    t0 = time.perf_counter()
    loading.__enter__()
    for begin in range(0, n, batch):
        store.add_many(recs[begin:begin + batch])
    t1 = time.perf_counter()
    loading.__exit__(None, None, None)
    t2 = time.perf_counter()
    del recs
    # The load and the index build leave gigabytes of dirty pages at 1M; flush them now
    # rather than have the checkpoint land in the middle of the timed queries.
    with store.engine.connect() as conn:
        conn.exec_driver_sql("CHECKPOINT")
    return {"copy_per_s": n / (t1 - t0), "index_build_s": t2 - t1, "load_per_s": n / (t2 - t0)}


def _cycle(qs: list[tuple[str, list[float]]]) -> Callable[[], tuple[str, list[float]]]:
    """The queries in turn, from the second, round and round."""
    state = {"i": 0}

    def nxt() -> tuple[str, list[float]]:
        state["i"] += 1
        return qs[state["i"] % len(qs)]
    return nxt


def _latencies(store: Any, queries: int, qs: list[tuple[str, list[float]]],
               nxt: Callable[[], tuple[str, list[float]]]) -> dict[str, float]:
    """Single add + commit, vector top-10, and hybrid with the default and plain configs."""
    from htm_core.recall import RetrievalConfig
    from htm_core.store.base import SearchFilters

    out: dict[str, float] = {}
    extra = iter(records(dataset(queries + 60, seed=17), 0, queries + 60, prefix="single"))
    out["single_add"] = median_time(lambda: store.add_many([next(extra)]), runs=queries,
                                    warmup=3)
    out["vector"] = median_time(
        lambda: store.vector_search(nxt()[1], limit=10, filters=SearchFilters()), runs=queries)

    hybrid = hybrid_searcher(store, nxt)
    # Warm both configurations over every query first: right after a load the full-text
    # pages are cold, and whichever ran first paid for reading them (at 1M the first
    # measured config took 7x longer than the same config measured again).
    for config in (None, RetrievalConfig.plain()):
        for _ in qs:
            hybrid(config)
    out["hybrid"] = median_time(hybrid, runs=queries)
    out["hybrid_plain"] = median_time(lambda: hybrid(RetrievalConfig.plain()), runs=queries)
    return out


def _exact_neighbors(store: Any, ds: Any, n: int, qs: list[tuple[str, list[float]]]
                     ) -> list[set[int]]:
    """Each query's exact top 10, as the store's ids."""
    id_of = {}
    for part in store.iter_memories(batch_size=5_000):
        id_of.update({m.key: m.id for m in part})
    ids = np.array([id_of[f"bench-{i}"] for i in range(n)])
    return [set(ids[np.argsort(-(ds.vectors @ np.asarray(vec, dtype=np.float32)))[:10]]
                .tolist()) for _text, vec in qs]


def _found(store: Any, qs: list[tuple[str, list[float]]], exact_ids: list[set[int]],
           **kwargs: Any) -> float:
    """Recall@10 of the store's vector search against exact, with ``kwargs`` passed on."""
    from htm_core.store.base import SearchFilters

    found = sum(len(exact & {m for m, _ in store.vector_search(
        vec, limit=10, filters=SearchFilters(), **kwargs)})
        for exact, (_text, vec) in zip(exact_ids, qs, strict=True))
    return found / (10 * len(qs))


def _ef_sweep(store: Any, qs: list[tuple[str, list[float]]], exact_ids: list[set[int]],
              ef_values: Sequence[int], nxt: Callable[[], tuple[str, list[float]]],
              queries: int) -> list[dict[str, float]]:
    """Recall@10 and latency of the vector arm at each extra ``ef_search``."""
    from htm_core.store.base import SearchFilters

    sweep = []
    for ef in ef_values:
        recall = _found(store, qs, exact_ids, ef_search=ef)

        def at_ef(ef: int = ef) -> None:
            store.vector_search(nxt()[1], limit=10, filters=SearchFilters(), ef_search=ef)
        sweep.append({"ef_search": ef, "recall_at_10": recall,
                      "vector": median_time(at_ef, runs=queries)})
    return sweep


def _live_adds(store: Any, append: int) -> dict[str, float]:
    """add_many with the indexes live, through COPY and through statements (after the
    queries: the extra rows are not in the exact neighbor sets)."""
    out: dict[str, float] = {}
    more = dataset(2 * append, seed=23)
    for name, threshold, first in (("live_copy_per_s", store.copy_min_rows, 0),
                                   ("live_statement_per_s", 2**31 - 1, append)):
        store.copy_min_rows = threshold
        appended = records(more, first, first + append, prefix=name)
        t0 = time.perf_counter()
        for begin in range(0, append, 1_000):
            store.add_many(appended[begin:begin + 1_000])
        out[name] = append / (time.perf_counter() - t0)
    return out


def bench_size(server_url: str, n: int, *, queries: int, batch: int, append: int,
               memory_mb: int, ef_values: Sequence[int] = (),
               hnsw: dict[str, int] | None = None, ef_search: int = 64) -> dict[str, Any]:
    """Load ``n`` memories into a fresh database and time the operations."""
    from htm_core.store.postgres import PostgresStore

    ds = dataset(n, queries=queries)
    out: dict[str, Any] = {"size": n, "batch": batch, "ef_search": ef_search, **(hnsw or {})}
    with fresh_database(server_url) as url:
        store = PostgresStore(url, hnsw_m=(hnsw or {}).get("hnsw_m", 16),
                              hnsw_ef_construction=(hnsw or {}).get("hnsw_ef_construction", 64),
                              ef_search=ef_search)
        out.update(_bulk_load(store, ds, n, batch, memory_mb))
        qs = [(ds.query_texts[i], ds.query_vectors[i].tolist()) for i in range(queries)]
        nxt = _cycle(qs)
        out.update(_latencies(store, queries, qs, nxt))
        exact_ids = _exact_neighbors(store, ds, n, qs)
        out["recall_at_10"] = _found(store, qs, exact_ids)
        out["ef_sweep"] = _ef_sweep(store, qs, exact_ids, ef_values, nxt, queries)
        out.update(_live_adds(store, append))
        store.close()
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for CI smoke runs")
    parser.add_argument("--sizes", default=None, help="comma-separated store sizes")
    parser.add_argument("--long", action="store_true", help="add the 1,000,000-memory run")
    parser.add_argument("--batch", type=int, default=1_000, help="add_many batch size of the load")
    parser.add_argument("--append", type=int, default=None,
                        help="rows added with live indexes per path (default 5,000; 100 with --quick)")
    parser.add_argument("--ef-search", default=None,
                        help="extra ef_search values for recall@10 / latency (default 100,200,400"
                             " from 100,000 memories up, and 600,800 at 1,000,000)")
    parser.add_argument("--hnsw-m", type=int, default=16, help="HNSW m of the store")
    parser.add_argument("--ef-construction", type=int, default=None,
                        help="HNSW ef_construction of the store (default 64; 128 from "
                             "1,000,000 memories up)")
    parser.add_argument("--store-ef-search", type=int, default=None,
                        help="the store's ef_search for the vector, hybrid and recall columns "
                             "(default 64; 200 from 1,000,000 memories up)")
    parser.add_argument("--shared-buffers-mb", type=int, default=None,
                        help="shared_buffers of the throwaway server (default a quarter of the "
                             "memory, at most 8 GB)")
    parser.add_argument("--memory-mb", type=int, default=None,
                        help="maintenance_work_mem of the index build (default 1,024; 4,096 at 1M)")
    return parser


def _bench_sizes(args: argparse.Namespace, sizes: list[int], append: int, buffers: int
                 ) -> list[dict[str, Any]]:
    """One row per size, each with the defaults that fit its size, on one server."""
    rows = []
    with postgres_server(os.environ.get("HTM_BENCH_DATABASE_URL"), shared_buffers=buffers) as url:
        for n in sizes:
            memory = args.memory_mb or (4_096 if n >= 1_000_000 else 1_024)
            efs = [int(e) for e in args.ef_search.split(",")] if args.ef_search else (
                [100, 200, 400, 600, 800] if n >= 1_000_000 else
                [100, 200, 400] if n >= 100_000 else [])
            rows.append(bench_size(url, n, queries=5 if args.quick else 30, batch=args.batch,
                                   append=append, memory_mb=memory, ef_values=efs,
                                   hnsw={"hnsw_m": args.hnsw_m,
                                         "hnsw_ef_construction": args.ef_construction or (
                                             128 if n >= 1_000_000 else 64)},
                                   ef_search=args.store_ef_search or (
                                       200 if n >= 1_000_000 else 64)))
    return rows


def _print_tables(rows: list[dict[str, Any]], hnsw_m: int, buffers: int) -> None:
    """The table of every size, then the vector arm at each extra ef_search."""
    builds = sorted({str(r["hnsw_ef_construction"]) for r in rows})
    print(f"## PostgreSQL + pgvector HNSW, m = {hnsw_m}, ef_construction = "
          f"{' / '.join(builds)}, shared_buffers = {buffers:,} MB "
          "(medians; query embedding excluded)\n")
    print(markdown_table(
        ["memories", "ef_search", "bulk_load: COPY phase", "index build", "bulk_load incl. build",
         "add_many, live index (COPY)", "add_many, live index (statements)",
         "single add + commit", "vector top-10", "hybrid (default)", "hybrid (plain RRF)",
         "recall@10 vs exact"],
        [[f"{r['size']:,}", str(r["ef_search"]), f"{r['copy_per_s']:,.0f}/s", fmt_time(r["index_build_s"]),
          f"{r['load_per_s']:,.0f}/s", f"{r['live_copy_per_s']:,.0f}/s",
          f"{r['live_statement_per_s']:,.0f}/s", fmt_time(r["single_add"]),
          fmt_time(r["vector"]), fmt_time(r["hybrid"]), fmt_time(r["hybrid_plain"]),
          f"{r['recall_at_10']:.3f}"] for r in rows]))
    print()
    sweep = [(r["size"], e) for r in rows for e in r["ef_sweep"]]
    if sweep:
        print("### Vector arm by ef_search (the default is the store's, above)\n")
        print(markdown_table(["memories", "ef_search", "vector top-10", "recall@10 vs exact"],
                             [[f"{n:,}", str(e["ef_search"]), fmt_time(e["vector"]),
                               f"{e['recall_at_10']:.3f}"] for n, e in sweep]))
        print()


def _print_goals(rows: list[dict[str, Any]]) -> None:
    """The goals: hybrid latency at 100k and 1M, then single add and load rates at the
    largest size."""
    for r in rows:
        if r["size"] == 100_000:
            print(goal_line("hybrid top-10, PostgreSQL, 100k", r["hybrid"], 5e-3))
        if r["size"] == 1_000_000:
            print(goal_line("hybrid top-10, PostgreSQL, 1M", r["hybrid"], 15e-3))
    last = rows[-1]
    print(goal_line("single add + commit, PostgreSQL", last["single_add"], 10e-3))
    size = f"{last['size']:,}"

    def rate(label: str, value: float) -> str:
        return goal_line(f"{label}, PostgreSQL, {size}", value, 20_000, lower_is_better=False,
                         unit=lambda v: f"{v:,.0f}/s")
    print(rate("bulk add_many (COPY, indexes deferred)", last["copy_per_s"]))
    print(rate("bulk load including the index build", last["load_per_s"]))
    print(rate("add_many with the HNSW index live (COPY)", last["live_copy_per_s"]))


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    args = _parser().parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [300] if args.quick else [1_000, 10_000, 100_000])
    if args.long:
        sizes.append(1_000_000)
    append = args.append if args.append is not None else (100 if args.quick else 5_000)
    buffers = args.shared_buffers_mb or (256 if args.quick else shared_buffers_mb())
    rows = _bench_sizes(args, sizes, append, buffers)
    _print_tables(rows, args.hnsw_m, buffers)
    _print_goals(rows)
    if not args.quick:
        save_results("postgres_ops", {"shared_buffers_mb": buffers, "rows": rows})
    return {"rows": rows}


if __name__ == "__main__":
    main()
