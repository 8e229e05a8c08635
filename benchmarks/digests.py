"""Digest benchmark: what consolidating costs, and what digests add to ``HTM.forget``.

On a SQLite file with ``days`` days of ``per_day`` memories (hashing embedder): the time
to consolidate a month (every day, week and month digest, extractive), then the median
time of ``HTM.forget`` of a memory no digest is built on (the hook's one query) and of one
every digest of its day, week and month is built on (each rebuilt without it).

Run: ``python -m benchmarks.digests [--quick]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from htm_core import HTM, FrozenClock, HashingEmbedder

from ._common import fmt_time, markdown_table

START = datetime(2024, 6, 3, tzinfo=timezone.utc)  # a Monday: 2024-06 is 3 June to 30 June


def _filled(path: Path, days: int, per_day: int) -> HTM:
    htm = HTM(database_url=str(path), embedder=HashingEmbedder(),
              clock=FrozenClock(START + timedelta(days=40)))
    items = [{"content": f"Day {d} note {n}: Ada went through item {n * 7 + d} of the plan.",
              "key": f"k{d}-{n}", "created_at": START + timedelta(days=d, minutes=5 * n)}
             for d in range(days) for n in range(per_day)]
    for i in range(0, len(items), 1000):
        htm.add_many(items[i:i + 1000], working_memory=False)
    return htm


def _forgets(htm: HTM, keys: list[str]) -> float:
    times = []
    for key in keys:
        started = time.perf_counter()
        htm.forget(key, confirm=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(days: int, per_day: int, forgets: int) -> list[list[str]]:
    """The table's rows: what was timed, and its time."""
    with tempfile.TemporaryDirectory() as tmp:
        with _filled(Path(tmp) / "plain.db", days, per_day) as htm:
            plain = _forgets(htm, [f"k{d % days}-{d}" for d in range(forgets)])
        with _filled(Path(tmp) / "digests.db", days, per_day) as htm:
            started = time.perf_counter()
            made = htm.consolidate("month", at="2024-06")
            month = time.perf_counter() - started
            built_on = [key for digest in made if digest.metadata["digest"]["kind"] == "day"
                        for key in (s["key"] for s in digest.metadata["digest"]["sources"])]
            rebuilt = _forgets(htm, built_on[:forgets])
    return [[f"consolidate a month ({len(made)} digests of {days * per_day} memories)",
             fmt_time(month)],
            ["forget, no digest built on it (median)", fmt_time(plain)],
            ["forget, its day, week and month rebuilt (median)", fmt_time(rebuilt)]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small run (smoke test)")
    args = parser.parse_args()
    days, per_day, forgets = (7, 20, 5) if args.quick else (28, 200, 50)
    print(markdown_table(["what", "time"], run(days, per_day, forgets)))


if __name__ == "__main__":
    main()
