"""The cost of checking each memory a SQLite read serves against its stored checksum.

Every SQLite read of a memory (``get``, the hits of ``recall``, exports) checks its text:
the first read of a memory in a store object hashes it (SHA-256, compared with
``content_hash``), later reads of the same memory compare a CRC-32 remembered from the read
that passed (``StoredTextCheck``). This measures ``store.get`` of a present key and
``HTM.recall`` (hybrid, 10 hits) three ways, in rotating order within each round of one
run: with a check that checks nothing (the baseline), with a fresh check (every read a
first read), and with a warm one (every read a re-read). It prints the medians and the
median ratios against the baseline.

    python -m benchmarks.read_verification [--memories 5000] [--rounds 21]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from htm_core import HTM, HashingEmbedder
from htm_core.store.values import StoredTextCheck

WORDS = ("kernel garden invoice violin sailing pasta tennis printer espresso glacier "
         "lantern harbor quartz meadow ferry canyon").split()
VARIANTS = ("off", "first", "again")


class _Unchecked(StoredTextCheck):
    """A check that checks nothing (the baseline)."""

    def __call__(self, key: str, memory_id: int, content: str, stored_hash: str) -> None:
        return None


def _time(fn: Callable[[int], Any], calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        fn(i)
    return (time.perf_counter() - start) / calls * 1e6


def _rounds(store: Any, fn: Callable[[int], Any], calls: int, rounds: int
            ) -> dict[str, list[float]]:
    """Per variant, the µs a call of each round. The warm check is filled by a warm-up
    that makes every call once; a fresh check is made before each round that uses it."""
    where = store._check_text.where
    warm = StoredTextCheck(where)
    store._check_text = warm
    _time(fn, calls)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        for variant in VARIANTS[r % 3:] + VARIANTS[:r % 3]:
            store._check_text = {"off": _Unchecked(where), "first": StoredTextCheck(where),
                                 "again": warm}[variant]
            times[variant].append(_time(fn, calls))
    store._check_text = warm
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "htm.db"
        with HTM(database_url=str(db), embedder=HashingEmbedder(),
                 working_memory_tokens=2_000) as htm:
            htm.add_many([{"content": " ".join(WORDS[(i * j) % 16] for j in range(1, 40))
                           + f" note {i}", "key": f"k{i}"} for i in range(args.memories)],
                         working_memory=False)
            store = htm.store
            queries = [f"{WORDS[i % 16]} {WORDS[(i * 7) % 16]}" for i in range(50)]
            # 2,000 distinct keys a round: with a fresh check, every read is a first read.
            work = {
                "get": (lambda i: store.get(f"k{(i * 7919) % args.memories}"),
                        min(2_000, args.memories)),
                "recall": (lambda i: htm.recall(queries[i % 50], limit=10), 30),
            }
            results = {name: _rounds(store, fn, calls, args.rounds)
                       for name, (fn, calls) in work.items()}
    for name, times in results.items():
        base = statistics.median(times["off"])
        line = f"{name:7s} unchecked {base:8.1f} µs"
        for variant in ("first", "again"):
            ratio = statistics.median(t / o for t, o in zip(times[variant], times["off"]))
            line += (f"  {variant} read {statistics.median(times[variant]):8.1f} µs"
                     f" ({ratio:.3f})")
        print(line)


if __name__ == "__main__":
    main()
