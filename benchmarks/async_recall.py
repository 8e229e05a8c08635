"""Concurrent recalls from one event loop on PostgreSQL, and what bounds their throughput.

One process, one ``HTM`` over a store of ``--memories`` memories; in each round:

- ``sequential``: the recalls one after another: wall time and this process's CPU time
  per recall (``time.process_time``, every thread), and the server's CPU time per recall
  (the PostgreSQL processes' ``/proc`` times, when the server runs on this machine);
- ``arecall x N``: ``N`` recalls started together with ``asyncio.gather`` through the async
  twins, on one event loop: once with ``HTM(native_async=False)`` (each runs the sync
  recall in a worker thread of the loop's default executor) and once natively (each runs
  in a greenlet on the loop's thread, its reads awaited on psycopg's async driver): recalls
  per second. All rounds run in one event loop, after an untimed batch of each arm; the
  two arms take turns going first.

Two ceilings follow from the CPU times, whatever an async path does: one Python process
runs its Python code on one core at a time (the GIL), so it cannot exceed ``1 / client
CPU`` recalls per second; and the machine cannot exceed ``cores / (client + server CPU)``.
The table gives both beside the measured throughputs, so the most a native async path
could add is read off as ``ceiling / arecall``.

Run: ``python -m benchmarks.async_recall [--database-url URL] [--memories 2000]
[--concurrency 200] [--rounds 5] [--quick]`` (default server: a throwaway pgserver).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._common import dataset, fmt_ratio, fresh_database, markdown_table, postgres_server, save_results


def _ticks(pid: int) -> tuple[int, int]:
    """(own user+system ticks, waited-for children's ticks) of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def server_cpu(postmaster: int | None) -> float:
    """CPU seconds used so far by the PostgreSQL server whose postmaster is ``postmaster``:
    the postmaster, its ended children and its live ones (0.0 when it is not local)."""
    if postmaster is None:
        return 0.0
    own, ended = _ticks(postmaster)
    total = own + ended
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                    total += _ticks(int(entry.name))[0]
            except (OSError, ValueError, IndexError):
                continue
    return total / os.sysconf("SC_CLK_TCK")


def _postmaster(url: str) -> int | None:
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
        folder = str(conn.execute("SHOW data_directory").fetchone()[0])  # type: ignore[index]
    try:
        return int(Path(folder, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


async def _round(htm: Any, threaded: Any, queries: Sequence[str], concurrency: int,
                 postmaster: int | None, native_first: bool) -> dict[str, float]:
    wall, cpu, srv = time.perf_counter(), time.process_time(), server_cpu(postmaster)
    for q in queries:  # nothing else runs on the loop meanwhile
        htm.recall(q, limit=10)
    n = len(queries)
    out = {"sequential_ms": (time.perf_counter() - wall) / n * 1000,
           "client_cpu_ms": (time.process_time() - cpu) / n * 1000,
           "server_cpu_ms": (server_cpu(postmaster) - srv) / n * 1000}
    batch = [queries[i % n] for i in range(concurrency)]
    arms = [("arecall", threaded), ("native", htm)]
    for key, memory in arms[::-1] if native_first else arms:
        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(memory.arecall(q, limit=10) for q in batch))
        out[f"{key}_per_s"] = concurrency / (time.perf_counter() - wall)
        out[f"{key}_cpu_ms"] = (time.process_time() - cpu) / concurrency * 1000
    return out


async def _rounds(htm: Any, threaded: Any, queries: Sequence[str], concurrency: int,
                  postmaster: int | None, rounds: int) -> list[dict[str, float]]:
    """Every round in one event loop (the native path's connections, like the thread
    twins' pool, are made once), after one untimed batch of each; the two arms take turns
    going first."""
    batch = [queries[i % len(queries)] for i in range(concurrency)]
    for memory in (threaded, htm):
        await asyncio.gather(*(memory.arecall(q, limit=10) for q in batch))
    return [await _round(htm, threaded, queries, concurrency, postmaster, k % 2 == 1)
            for k in range(rounds)]


def measure(url: str, *, memories: int, concurrency: int, rounds: int) -> dict[str, float]:
    """Per figure, the median over ``rounds``."""
    from htm_core import HTM, HashingEmbedder

    data = dataset(memories, queries=50)
    postmaster = _postmaster(url)
    with HTM("async-bench", database_url=url, embedder=HashingEmbedder()) as htm, \
            HTM("async-bench", store=htm.store, embedder=HashingEmbedder(),
                native_async=False) as threaded:
        htm.add_many(data.texts, working_memory=False)
        for q in data.query_texts[:10]:
            htm.recall(q)
        samples = asyncio.run(_rounds(htm, threaded, data.query_texts, concurrency,
                                      postmaster, rounds))
    result = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    result["sequential_per_s"] = 1000 / result["sequential_ms"]
    result["gil_ceiling_per_s"] = 1000 / result["client_cpu_ms"]
    cores = os.cpu_count() or 1
    result["machine_ceiling_per_s"] = cores * 1000 / (result["client_cpu_ms"]
                                                      + result["server_cpu_ms"])
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="the PostgreSQL server's URL")
    parser.add_argument("--memories", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny run, for CI smoke runs")
    args = parser.parse_args(argv)
    rounds, memories = (1, 200) if args.quick else (args.rounds, args.memories)
    with postgres_server(args.database_url) as server, \
            fresh_database(server, prefix="htm_bench_async") as url:
        r = measure(url, memories=memories, concurrency=args.concurrency, rounds=rounds)
    seq = r["sequential_per_s"]
    print(f"## {args.concurrency} concurrent recalls, {memories:,} memories "
          f"(median of {rounds} rounds)\n")
    print(markdown_table(["", "recalls/s", "× sequential"], [
        [name, f"{r[key]:,.0f}", fmt_ratio(r[key] / seq)] for name, key in (
            ("sequential", "sequential_per_s"),
            (f"arecall × {args.concurrency} (thread twins)", "arecall_per_s"),
            (f"arecall × {args.concurrency} (native)", "native_per_s"),
            ("ceiling of one process (1 / client CPU)", "gil_ceiling_per_s"),
            (f"ceiling of the machine ({os.cpu_count()} cores / all CPU)",
             "machine_ceiling_per_s"))]))
    print(f"\nper recall: {r['client_cpu_ms']:.2f} ms client CPU, "
          f"{r['server_cpu_ms']:.2f} ms server CPU, {r['sequential_ms']:.2f} ms wall; "
          f"client CPU per concurrent recall: {r['arecall_cpu_ms']:.2f} ms (thread twins), "
          f"{r['native_cpu_ms']:.2f} ms (native)")
    payload = {"rounds": rounds, "memories": memories, "concurrency": args.concurrency,
               "result": r}
    if not args.quick:
        save_results("async_recall", payload)
    return payload


if __name__ == "__main__":
    main()
