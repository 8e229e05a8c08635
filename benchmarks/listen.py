"""What LISTEN/NOTIFY saves on the read path, on PostgreSQL, with the working-set version
read on every call (the default) and with ``?listen=true`` (the version remembered while
the listener heard nothing about the robot), taken in turns on fresh databases:

- ``working_version`` and ``recall_check`` (10 ids): the store's coherence reads alone;
- a third mode reads the version on every call on a database where the LISTEN/NOTIFY
  triggers are installed (another process listens): what the triggers cost a writer;
- HTM's read and write path per call (``benchmarks.coherence``'s figures).

Each round runs both modes; the table shows, per mode, the median over the rounds of each
round's median per call, and the ratio to the version check in the same run.

Run: ``python -m benchmarks.listen [--database-url URL] [--rounds 5] [--quick]`` (default
server: a throwaway pgserver).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import make_url

from ._common import (
    fmt_time,
    fresh_database,
    markdown_table,
    median_time,
    postgres_server,
    save_results,
)
from .coherence import run as coherence_run

MODES = ("version check", "version check, triggers installed", "listen=true")
FIGURES = ("working_version", "recall_check", "create_context", "recall", "retrieve", "add",
           "create_context_after_forget")


def _coherence_reads(url: str, *, calls: int) -> dict[str, float]:
    """Medians of the store's two coherence reads for a robot nothing else changes."""
    from htm_core import HTM

    with HTM(robot="bench", database_url=url, embedder="hashing") as htm:
        ids = [htm.add(f"note {i} about the harbour").id for i in range(10)]
        htm.create_context()
        store = htm._store
        time.sleep(0.1)  # the notifications of those adds arrive
        return {"working_version": median_time(lambda: store.working_version("bench"),
                                               runs=calls * 10),
                "recall_check": median_time(lambda: store.recall_check("bench", ids),
                                            runs=calls * 10)}


def _address(mode: str, database_url: str) -> str:
    if mode.startswith("version check"):
        if mode.endswith("triggers installed"):  # what the triggers cost a writer alone
            from htm_core.store.postgres import PostgresStore

            PostgresStore(database_url, listen=True).close()
        return database_url
    return make_url(database_url).update_query_dict({"listen": "true"}).render_as_string(
        hide_password=False)


def measure(server_url: str, *, rounds: int, memories: int,
            calls: int) -> dict[str, dict[str, float]]:
    """Per mode and figure, the median over ``rounds`` of each round's median per call."""
    samples: dict[str, dict[str, list[float]]] = {m: {f: [] for f in FIGURES} for m in MODES}
    for _ in range(rounds):
        for mode in MODES:
            with fresh_database(server_url, prefix="htm_bench_listen") as url:
                address = _address(mode, url)
                out = {**_coherence_reads(address, calls=calls),
                       **coherence_run(address, memories=memories, calls=calls)}
            for figure in FIGURES:
                if out[figure] is not None:
                    samples[mode][figure].append(float(out[figure]))
    return {m: {f: statistics.median(v) for f, v in figures.items() if v}
            for m, figures in samples.items()}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="the PostgreSQL server's URL")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny run, for CI smoke runs")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    with postgres_server(args.database_url) as server:
        result = measure(server, rounds=rounds, memories=200 if args.quick else 2_000,
                         calls=5 if args.quick else 40)
    base = result["version check"]
    figures = [f for f in FIGURES if all(f in r for r in result.values())]
    print(f"## Reads with and without the listener (median of {rounds} rounds, per call)\n")
    print(markdown_table(
        ["mode", *(f"{f} (× version check)" for f in figures)],
        [[mode, *(f"{fmt_time(r[f])} ({r[f] / base[f]:.2f}×)" for f in figures)]
         for mode, r in result.items()]))
    payload = {"rounds": rounds, "result": result}
    if not args.quick:
        save_results("listen", payload)
    return payload


if __name__ == "__main__":
    main()
