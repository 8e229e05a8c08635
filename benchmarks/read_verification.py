"""The cost of checking each memory a SQLite read serves against its stored SHA-256.

Every SQLite read of a memory (``get``, the hits of ``recall``, exports) hashes its text and
compares it with ``content_hash``. This measures ``store.get`` of a present key and
``HTM.recall`` (hybrid, 10 hits) with the check and with a copy of the reader that skips it,
in alternating rounds of one run, and prints the median ratio (checked / unchecked).

    python -m benchmarks.read_verification [--memories 20000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import htm_core.store.sqlite._records as sqlite_records
from htm_core import HTM, HashingEmbedder

WORDS = ("kernel garden invoice violin sailing pasta tennis printer espresso glacier "
         "lantern harbor quartz meadow ferry canyon").split()


def _unchecked(key: str, memory_id: int, content: str, stored_hash: str, where: str) -> None:
    """``check_stored_text`` that checks nothing (the baseline)."""


def _time(fn: Callable[[int], Any], calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        fn(i)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    checked = sqlite_records.check_stored_text
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "htm.db"
        with HTM(database_url=str(db), embedder=HashingEmbedder(),
                 working_memory_tokens=2_000) as htm:
            htm.add_many([{"content": " ".join(WORDS[(i * j) % 16] for j in range(1, 40))
                           + f" note {i}", "key": f"k{i}"} for i in range(args.memories)],
                         working_memory=False)
            store = htm.store
            queries = [f"{WORDS[i % 16]} {WORDS[(i * 7) % 16]}" for i in range(50)]
            work = {
                "get": (lambda i: store.get(f"k{(i * 7919) % args.memories}"), 2_000),
                "recall": (lambda i: htm.recall(queries[i % 50], limit=10), 30),
            }
            ratios: dict[str, list[float]] = {name: [] for name in work}
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in work}
            for name, (fn, calls) in work.items():
                _time(fn, calls)  # warm up
                for r in range(args.rounds):
                    measured = {}
                    for variant in (("off", "on") if r % 2 else ("on", "off")):  # both orders
                        sqlite_records.check_stored_text = (
                            checked if variant == "on" else _unchecked)
                        measured[variant] = _time(fn, calls)
                    sqlite_records.check_stored_text = checked
                    ratios[name].append(measured["on"] / measured["off"])
                    times[name].append((measured["off"], measured["on"]))
    for name in work:
        off = statistics.median(t[0] for t in times[name])
        on = statistics.median(t[1] for t in times[name])
        print(f"{name:7s} unchecked {off:8.1f} µs  checked {on:8.1f} µs  "
              f"median ratio {statistics.median(ratios[name]):.3f}")


if __name__ == "__main__":
    main()
