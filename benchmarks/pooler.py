"""The cost of running behind a transaction-mode pooler: HTM's read and write path per call
(``benchmarks.coherence``'s figures) on three addresses of the same server, taken in turns.

- ``direct``: the server's own URL (prepared statements, session ``hnsw.ef_search``);
- ``direct, pooler=transaction``: the same URL with ``?pooler=transaction`` (no prepared
  statements, the recall path's reads in a transaction): what the option itself costs;
- ``PgBouncer, pooler=transaction``: through Debian's PgBouncer in transaction mode
  (``tests.pgbouncer`` starts it on a loopback port unless ``--pooler-url`` is given):
  the option plus the pooler's hop.

Each round runs every address on a fresh database; the table shows, per address, the
median over the rounds of each round's median per call.

Run: ``python -m benchmarks.pooler [--database-url URL] [--pooler-url URL] [--rounds 5]
[--quick]`` (default server: a throwaway pgserver).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy.engine import make_url

from ._common import (
    fmt_ratio,
    fmt_time,
    fresh_database,
    markdown_table,
    postgres_server,
    save_results,
)
from .coherence import run as coherence_run

MODES = ("direct", "direct, pooler=transaction", "PgBouncer, pooler=transaction")
FIGURES = ("create_context", "recall", "retrieve", "add")


@contextlib.contextmanager
def _pooler(server_url: str, given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    from tests.pgbouncer import session_pooler

    yield from session_pooler(server_url)


def _address(mode: str, database_url: str, pooler_url: str) -> str:
    if mode == "direct":
        return database_url
    url = make_url(database_url)
    if not mode.startswith("direct"):
        url = make_url(pooler_url).set(database=url.database)
    return url.update_query_dict({"pooler": "transaction"}).render_as_string(
        hide_password=False)


def measure(server_url: str, pooler_url: str, *, rounds: int, memories: int,
            calls: int) -> dict[str, dict[str, float]]:
    """Per mode and figure, the median over ``rounds`` of each round's median per call."""
    samples: dict[str, dict[str, list[float]]] = {m: {f: [] for f in FIGURES} for m in MODES}
    for _ in range(rounds):
        for mode in MODES:
            with fresh_database(server_url, prefix="htm_bench_pooler") as url:
                out = coherence_run(_address(mode, url, pooler_url), memories=memories,
                                    calls=calls)
            for figure in FIGURES:
                samples[mode][figure].append(float(out[figure]))
    return {m: {f: statistics.median(v) for f, v in figures.items()}
            for m, figures in samples.items()}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="the PostgreSQL server's URL")
    parser.add_argument("--pooler-url", default=None,
                        help="a transaction-mode PgBouncer in front of that server "
                             "(default: one started for the run)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny run, for CI smoke runs")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    with postgres_server(args.database_url) as server, _pooler(server, args.pooler_url) as pool:
        result = measure(server, pool, rounds=rounds, memories=200 if args.quick else 2_000,
                         calls=5 if args.quick else 40)
    base = result["direct"]
    print(f"## Behind a transaction-mode pooler (median of {rounds} rounds, per call)\n")
    print(markdown_table(
        ["address", *(f"{f} (× direct)" for f in FIGURES)],
        [[mode, *(f"{fmt_time(r[f])} ({fmt_ratio(r[f] / base[f])})" for f in FIGURES)]
         for mode, r in result.items()]))
    payload = {"rounds": rounds, "result": result}
    if not args.quick:
        save_results("pooler", payload)
    return payload


if __name__ == "__main__":
    main()
