"""Exact tag filters and key prefixes (htm_core/identity.py): what they cost, and which
index serves them.

Loads ``--size`` memories, each with its own user tag, a session tag below it and a node
tag (as adapters write them: one ``tags`` row per id), then times ``htm.list`` by one
user's tag (the tag and the tags below it: an equality and a range in code point order)
and by a key prefix selecting about 1 in 9 keys, and prints the plan of each query.
On PostgreSQL it repeats both after creating indexes in code point order
(``tags (name COLLATE "C")``, ``memories (key COLLATE "C")``), which a range under
``COLLATE "C"`` needs when the database's collation is not ``C``. SQLite needs none: its
``BINARY`` collation is code point order, so the unique indexes on ``tags.name`` and
``memories.key`` serve the ranges.

Run: ``python -m benchmarks.identity_filters [--size 20000] [--url postgresql://...]``
(without ``--url``: ``HTM_BENCH_DATABASE_URL``, else a throwaway pgserver).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from ._common import fmt_time, fresh_database, median_time, postgres_server

C_INDEXES = ('CREATE INDEX IF NOT EXISTS tags_name_c ON tags (name COLLATE "C")',
             'CREATE INDEX IF NOT EXISTS memories_key_c ON memories (key COLLATE "C")')


def _load(url: str, size: int) -> Any:
    from htm_core import HTM, HashingEmbedder

    htm = HTM(database_url=url, embedder=HashingEmbedder(), working_memory_tokens=1_000)
    items = [{"content": f"note {i} of user u{i}", "key": f"k{i}",
              "tags": [f"chat:user:u{i}", f"chat:user:u{i}:session:s{i % 7}",
                       f"llama_index:node:n{i}"]} for i in range(size)]
    for start in range(0, size, 5_000):
        htm.add_many(items[start:start + 5_000], working_memory=False)
    return htm


def _plans(htm: Any, explain: str) -> list[str]:
    from sqlalchemy import text

    from htm_core.store import SearchFilters
    from htm_core.store._sql.dialect import POSTGRES, SQLITE
    from htm_core.store._sql.filters import filter_sql, prefix_sql

    store, out = htm.store, []
    dialect = SQLITE if store.backend == "sqlite" else POSTGRES
    for build in (lambda p: filter_sql(dialect, SearchFilters(tags=("chat:user:u5",)), p),
                  lambda p: prefix_sql(dialect, "m.key", "p", "k19", p)):
        params: dict[str, Any] = {}
        where = build(params)
        with store.engine.connect() as conn:
            rows = conn.execute(text(f"{explain} SELECT m.id FROM memories m WHERE {where}"),
                                params).all()
        out.append("\n".join(str(r[-1]) for r in rows))
    return out


def _measure(htm: Any, label: str, explain: str, runs: int) -> None:
    by_tag = median_time(lambda: htm.list(tags=["chat:user:u5"], limit=100), runs=runs)
    by_prefix = median_time(lambda: htm.list(key_prefix="k19", limit=100), runs=runs)
    print(f"{label}: list(tags=[one user]) {fmt_time(by_tag)}, "
          f"list(key_prefix=1/9 of keys, limit=100) {fmt_time(by_prefix)}")
    for plan in _plans(htm, explain):
        print("   " + plan.replace("\n", "\n   "))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--url", default=os.environ.get("HTM_BENCH_DATABASE_URL"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        htm = _load(str(Path(folder) / "htm.db"), args.size)
        _measure(htm, f"SQLite, {args.size:,} memories", "EXPLAIN QUERY PLAN", args.runs)
        htm.close()
    with postgres_server(args.url) as server, fresh_database(server) as url:
        htm = _load(url, args.size)
        with htm.store.engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
        _measure(htm, f"PostgreSQL, {args.size:,} memories", "EXPLAIN", args.runs)
        with htm.store.engine.begin() as conn:
            for ddl in (*C_INDEXES, "ANALYZE"):
                conn.exec_driver_sql(ddl)
        _measure(htm, "PostgreSQL with indexes in code point order", "EXPLAIN", args.runs)
        htm.close()


if __name__ == "__main__":
    main()
