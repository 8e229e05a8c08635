"""End to end on PostgreSQL, through ``HTM``: loads, against pgvector and plain psycopg.

Two runs, each on a fresh database of a throwaway pgserver (PostgreSQL 16 + pgvector; or
``--url``), with ready vectors (an embedder returning lists of floats):

- ``bulk``: ``HTM.add_many`` (working memory on; ``--working-memory off`` for
  ``add_many(..., working_memory=False)``, the documented way to import) in batches inside
  ``store.bulk_load()``: the load phase (memories/s, and the client's CPU time per memory) and the index build
  on the way out, against PostgreSQL's and pgvector's own ``CREATE INDEX`` of the same
  indexes (HNSW and GIN, their definitions read from ``pg_indexes``) over the same rows,
  same run.
- ``live``: ``HTM.add_many`` into a live store (HNSW and GIN maintained row by row) against
  plain psycopg inserting the same rows (``executemany``, one transaction per batch) into a
  table made ``LIKE memories INCLUDING ALL`` (the same columns, generated ``tsvector`` and
  indexes).

Run: ``python -m benchmarks.e2e_postgres {bulk,live} [--quick] [--sizes N] [--url URL]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from ._common import (
    fresh_database,
    goal_line,
    markdown_table,
    postgres_server,
    save_results,
    shared_buffers_mb,
)
from .e2e import ROBOT, embedder_for, items, make_dataset


def _connect(url: str) -> Any:
    import psycopg
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(url.replace("postgresql+psycopg", "postgresql"))
    register_vector(conn)
    return conn


def bench_bulk(server: str, n: int, *, kind: str, batch: int, memory_mb: int,
               working_memory: bool = True) -> dict[str, Any]:
    from htm_core import HTM

    ds = make_dataset(kind, n)
    todo = items(ds, 0, n)
    with fresh_database(server) as url:
        with HTM(robot=ROBOT, database_url=url, embedder=embedder_for(ds)) as htm:
            htm.token_counter.count("warm-up")  # the counter's ranks load on the first count
            loading = htm.store.bulk_load(maintenance_work_mem_mb=memory_mb)  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            loading.__enter__()
            c0 = time.process_time()
            for b in range(0, n, batch):
                htm.add_many(todo[b:b + batch], working_memory=working_memory)
            c1 = time.process_time()
            t1 = time.perf_counter()
            loading.__exit__(None, None, None)
            t2 = time.perf_counter()
        with _connect(url) as conn:
            conn.autocommit = True
            defs = [r[0] for r in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'memories' AND "
                "(indexdef ILIKE '%USING hnsw%' OR indexdef ILIKE '%USING gin%')")]
            names = [r[0] for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' AND "
                "(indexdef ILIKE '%USING hnsw%' OR indexdef ILIKE '%USING gin%')")]
            conn.execute(f"SET maintenance_work_mem = '{int(memory_mb)}MB'")
            conn.execute("CHECKPOINT")
            for name in names:
                conn.execute(f'DROP INDEX "{name}"')
            t3 = time.perf_counter()
            for definition in defs:
                conn.execute(definition)
            t4 = time.perf_counter()
    return {"size": n, "data": kind, "batch": batch, "working_memory": working_memory,
            "load_per_s": n / (t1 - t0),
            "load_client_cpu_us": 1e6 * (c1 - c0) / n,
            "build_s": t2 - t1, "create_index_s": t4 - t3, "indexes": defs,
            "build_ratio": (t2 - t1) / (t4 - t3)}


_PLAIN_COLUMNS = ("key, content, content_hash, robot_id, importance, token_count, created_at, "
                  "last_accessed, access_count, metadata, embedding, embedder")


def bench_live(server: str, n: int, *, kind: str, batch: int) -> dict[str, Any]:
    import json

    from htm_core import HTM
    from htm_core.store.base import content_hash
    from htm_core.tokens import TiktokenCounter

    ds = make_dataset(kind, n)
    todo = items(ds, 0, n)
    emb = embedder_for(ds)
    warm = "warm-up: the first vector creates the HNSW index"
    emb.add([warm], ds.query_vectors[:1])
    with fresh_database(server) as url:
        with HTM(robot=ROBOT, database_url=url, embedder=emb) as htm:
            htm.add(warm, key="warm-up")
            t0 = time.perf_counter()
            for b in range(0, n, batch):
                htm.add_many(todo[b:b + batch])
            htm_rate = n / (time.perf_counter() - t0)
        count = TiktokenCounter().count
        rows = [(f"plain-{i}", ds.texts[i], content_hash(ds.texts[i]), 1.0 + i % 9,
                 count(ds.texts[i]), ds.created[i], ds.created[i], 0, json.dumps({}),
                 ds.vectors[i], "VectorTableEmbedder") for i in range(n)]
        with _connect(url) as conn:
            rid = conn.execute("SELECT id FROM robots WHERE name = %s", (ROBOT,)).fetchone()[0]
            conn.execute("CREATE TABLE plain (LIKE memories INCLUDING ALL)")
            conn.commit()
            t0 = time.perf_counter()
            with conn.cursor() as cur:
                for b in range(0, n, batch):
                    cur.executemany(
                        f"INSERT INTO plain ({_PLAIN_COLUMNS}) VALUES "
                        "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        [(k, c, h, rid, imp, tok, ca, la, ac, md, vec, name)
                         for k, c, h, imp, tok, ca, la, ac, md, vec, name in rows[b:b + batch]])
                    conn.commit()
            plain_rate = n / (time.perf_counter() - t0)
    return {"size": n, "data": kind, "batch": batch, "htm_per_s": htm_rate,
            "plain_per_s": plain_rate, "ratio": htm_rate / plain_rate}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["bulk", "live"])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for CI smoke runs")
    parser.add_argument("--sizes", default=None, help="comma-separated sizes")
    parser.add_argument("--data", choices=["clustered", "words"], default="clustered")
    parser.add_argument("--batch", type=int, default=1_000, help="add_many batch size")
    parser.add_argument("--memory-mb", type=int, default=1_024,
                        help="maintenance_work_mem of the index builds")
    parser.add_argument("--working-memory", choices=["on", "off"], default="on",
                        help="bulk: the loaded memories enter working memory (on) or not")
    parser.add_argument("--url", default=None, help="PostgreSQL server URL (default: pgserver)")
    parser.add_argument("--save", action="store_true", help="write benchmarks/results/*.json")
    args = parser.parse_args(argv)
    default = [300] if args.quick else ([100_000] if args.what == "bulk" else [10_000])
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else default
    rows = []
    with postgres_server(args.url, shared_buffers=None if args.quick else min(
            2_048, shared_buffers_mb())) as server:
        for n in sizes:
            if args.what == "bulk":
                rows.append(bench_bulk(server, n, kind=args.data, batch=args.batch,
                                       memory_mb=args.memory_mb,
                                       working_memory=args.working_memory == "on"))
            else:
                rows.append(bench_live(server, n, kind=args.data,
                                       batch=min(args.batch, max(1, n // 10))))
    if args.what == "bulk":
        print(f"## HTM.add_many inside bulk_load(), PostgreSQL ({args.data} data, "
              f"working memory {args.working_memory})\n")
        print(markdown_table(
            ["memories", "load phase", "client CPU per memory", "index build (bulk_load exit)",
             "CREATE INDEX, same rows (HNSW + GIN)", "build / CREATE INDEX"],
            [[f"{r['size']:,}", f"{r['load_per_s']:,.0f}/s",
              f"{r['load_client_cpu_us']:.0f} µs", f"{r['build_s']:.2f} s",
              f"{r['create_index_s']:.2f} s", f"{r['build_ratio']:.2f}"] for r in rows]))
        big = rows[-1]
        print()
        print(goal_line(f"load phase, {big['size']:,}", big["load_per_s"], 20_000,
                        lower_is_better=False, unit=lambda v: f"{v:,.0f}/s"))
        print(goal_line("index build / CREATE INDEX", big["build_ratio"], 1.1,
                        unit=lambda v: f"{v:.2f}×"))
    else:
        print(f"## HTM.add_many into a live PostgreSQL store ({args.data} data)\n")
        print(markdown_table(
            ["memories", "batch", "HTM.add_many", "plain psycopg executemany", "HTM / plain"],
            [[f"{r['size']:,}", str(r["batch"]), f"{r['htm_per_s']:,.0f}/s",
              f"{r['plain_per_s']:,.0f}/s", f"{r['ratio']:.2f}"] for r in rows]))
        print()
        print(goal_line("HTM / plain psycopg", rows[-1]["ratio"], 0.8, lower_is_better=False,
                        unit=lambda v: f"{v:.2f}×"))
    result = {"rows": rows}
    if args.save and not args.quick:
        save_results(f"e2e_postgres_{args.what}_{args.data}", result)
    return result


if __name__ == "__main__":
    main()
