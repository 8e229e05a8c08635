"""Bounded load on PostgreSQL: N robot processes adding and recalling for a fixed time.

Each robot is its own OS process with its own ``HTM`` (HashingEmbedder, so the figure is
htm + PostgreSQL, not an embedding model) on one shared database. It adds unique memories
in a loop and recalls every ``--recall-every`` adds (full text for a word only its own last
memory holds, checked to be found, then hybrid), until the time is up. Afterwards the
database is read back and compared with what every process was told was stored.

Reported: operations per second over the whole run and the lowest one-second figure while
all robots were running (what the store *held*), add latency percentiles, the error count
by type, lost memories (an ``add`` that returned but is not in the database: must be 0),
duplicates (must be 0), recalls that missed the robot's own fresh memory (must be 0) and
working-memory budget overruns (must be 0). The exit status is 1 when any of those is
not 0.

The server is local only: by default a throwaway pgserver (PostgreSQL 16 + pgvector) on a
unix socket in a temporary directory; ``--url`` may name another server on 127.0.0.1,
localhost or a unix socket. A fresh database is created for the run and dropped after.

Run: ``python -m benchmarks.load [--quick] [--robots 4] [--seconds 30] [--url URL]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ._common import fresh_database, markdown_table, postgres_server, save_results

WORDS = ["falcon", "harbour", "lantern", "meadow", "quartz", "signal", "timber", "violet"]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", ""}


def content(robot: str, j: int) -> str:
    """The ``j``-th memory of ``robot``: unique, with a word only it holds (``tok<robot>x<j>``)."""
    return (f"{robot} observation {j}: the {WORDS[j % len(WORDS)]} near sector {j % 97} "
            f"tok{robot}x{j}")


def worker(robot: str, url: str, seconds: float, recall_every: int, budget: int,
           start: Any, results: Any) -> None:
    """One robot: add and recall until the time is up, then report what it saw."""
    from htm_core import HTM, HashingEmbedder
    from htm_core.errors import HTMError

    report: dict[str, Any] = {"robot": robot, "added": [], "adds": 0, "recalls": 0,
                              "errors": Counter(), "missed": 0, "wm_over": 0,
                              "per_second": Counter(), "add_latency": [], "fatal": None}
    try:
        with HTM(robot=robot, database_url=url, embedder=HashingEmbedder(),
                 working_memory_tokens=budget) as htm:
            start.wait()
            t0 = time.monotonic()
            deadline = t0 + seconds
            j = 0
            while (now := time.monotonic()) < deadline:
                text = content(robot, j)
                try:
                    began = time.perf_counter()
                    memory = htm.add(text)
                    report["add_latency"].append(time.perf_counter() - began)
                    report["added"].append(memory.key)
                    report["adds"] += 1
                    report["per_second"][int(now - t0)] += 1
                    if j % recall_every == recall_every - 1:
                        hits = htm.recall(f"tok{robot}x{j}", strategy="fulltext", limit=5)
                        if memory.key not in [h.memory.key for h in hits]:
                            report["missed"] += 1
                        htm.recall(f"{WORDS[j % len(WORDS)]} sector {j % 97}", limit=10)
                        report["recalls"] += 2
                        report["per_second"][int(now - t0)] += 2
                except HTMError as exc:
                    report["errors"][type(exc).__name__] += 1
                if htm.working_memory.tokens > htm.working_memory.max_tokens:
                    report["wm_over"] += 1
                j += 1
    except BaseException:
        report["fatal"] = traceback.format_exc()
    results.put(report)


@contextmanager
def local_server(url: str | None) -> Iterator[str]:
    """The server URL: ``url`` (checked to be local) or a throwaway pgserver."""
    if url:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        host = parsed.host or ""
        socket = parsed.query.get("host", "")
        if host not in LOCAL_HOSTS or (socket and not str(socket).startswith("/")):
            raise SystemExit(f"refusing {parsed.render_as_string()}: the load script only runs "
                             "against a server on 127.0.0.1, localhost or a unix socket")
        yield url
        return
    with postgres_server(prefix="htm-load-") as server:
        yield server


def run_load(url: str, *, robots: int, seconds: float, recall_every: int,
             budget: int) -> dict[str, Any]:
    """Run the robots against ``url`` and check the database afterwards."""
    from htm_core.store.postgres import PostgresStore

    PostgresStore(url).close()  # migrate once before the clock starts
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(robots)
    results = ctx.Queue()
    names = [f"load{i}" for i in range(robots)]
    procs = [ctx.Process(target=worker, args=(name, url, seconds, recall_every, budget, start,
                                              results)) for name in names]
    for p in procs:
        p.start()
    reports: list[dict[str, Any]] = []
    try:
        for _ in procs:
            reports.append(results.get(timeout=seconds + 300))
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    fatal = [r["fatal"] for r in reports if r["fatal"]]
    if fatal:
        raise SystemExit("a robot process failed:\n" + "\n".join(fatal))

    store = PostgresStore(url)
    try:
        stored = [m.key for batch in store.iter_memories(batch_size=2_000) for m in batch]
    finally:
        store.close()
    returned = [k for r in reports for k in r["added"]]
    stored_set = set(stored)
    per_second: Counter[int] = Counter()
    for r in reports:
        per_second.update(r["per_second"])
    full_seconds = [per_second[s] for s in range(int(seconds))]  # the last partial one left out
    errors: Counter[str] = Counter()
    for r in reports:
        errors.update(r["errors"])
    latencies = sorted(x for r in reports for x in r["add_latency"])
    adds = sum(r["adds"] for r in reports)
    recalls = sum(r["recalls"] for r in reports)
    return {
        "robots": robots, "seconds": seconds, "recall_every": recall_every,
        "adds": adds, "recalls": recalls,
        "ops_per_s": (adds + recalls) / seconds,
        "held_ops_per_s": min(full_seconds) if full_seconds else 0,
        "median_ops_per_s": statistics.median(full_seconds) if full_seconds else 0,
        "add_p50_ms": 1e3 * latencies[len(latencies) // 2] if latencies else None,
        "add_p95_ms": 1e3 * latencies[int(len(latencies) * 0.95)] if latencies else None,
        "errors": dict(errors), "error_count": sum(errors.values()),
        "lost": len([k for k in returned if k not in stored_set]),
        "duplicates": len(stored) - len(stored_set) + len(returned) - len(set(returned)),
        "unacknowledged": len(stored_set - set(returned)),
        "missed_own_recall": sum(r["missed"] for r in reports),
        "wm_over_budget": sum(r["wm_over"] for r in reports),
        "stored": len(stored),
    }


def print_report(result: dict[str, Any]) -> None:
    print(f"## Load on PostgreSQL: {result['robots']} robot processes for "
          f"{result['seconds']:g} s (recall every {result['recall_every']} adds)\n")
    rows = [[f"{result['adds']:,}", f"{result['recalls']:,}", f"{result['ops_per_s']:,.0f}",
             f"{result['held_ops_per_s']:,}", f"{result['add_p50_ms']:.1f} ms",
             f"{result['add_p95_ms']:.1f} ms", str(result["error_count"]), str(result["lost"]),
             str(result["duplicates"]), str(result["missed_own_recall"]),
             str(result["wm_over_budget"])]]
    print(markdown_table(["adds", "recalls", "ops/s (mean)", "ops/s held (worst second)",
                          "add p50", "add p95", "errors", "lost", "duplicates",
                          "recall missed own", "WM over budget"], rows))
    if result["errors"]:
        print("\nerrors: " + ", ".join(f"{k} × {v}" for k, v in sorted(result["errors"].items())))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 robots for 3 s, for CI")
    parser.add_argument("--robots", type=int, default=None, help="robot processes (default 4)")
    parser.add_argument("--seconds", type=float, default=None, help="duration (default 30)")
    parser.add_argument("--recall-every", type=int, default=5, help="adds between recalls")
    parser.add_argument("--budget", type=int, default=2_000, help="working-memory tokens")
    parser.add_argument("--url", default=None,
                        help="a local PostgreSQL server (default: a throwaway pgserver)")
    args = parser.parse_args(argv)
    robots = args.robots or (2 if args.quick else 4)
    seconds = args.seconds or (3.0 if args.quick else 30.0)
    if robots < 1 or seconds <= 0 or args.recall_every < 1 or args.budget < 1:
        parser.error("--robots, --seconds, --recall-every and --budget must be positive")
    with local_server(args.url) as server, fresh_database(server, prefix="htm_load") as url:
        result = run_load(url, robots=robots, seconds=seconds, recall_every=args.recall_every,
                          budget=args.budget)
    print_report(result)
    if not args.quick:
        save_results("load", {"load": result})
    failed = result["error_count"] or result["lost"] or result["duplicates"] \
        or result["missed_own_recall"] or result["wm_over_budget"]
    if failed:
        print("\nFAILED: errors, lost or duplicated memories, missed recalls or WM overruns",
              file=sys.stderr)
        raise SystemExit(1)
    return result


if __name__ == "__main__":
    main()
