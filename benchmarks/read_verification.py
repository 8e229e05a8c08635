"""The cost of checking each memory a SQLite read serves against its stored checksum.

Every SQLite read of a memory (``get``, the hits of ``recall``, exports) compares the CRC-32
of its text with ``content_crc`` (``check_stored_text``). This measures ``store.get`` of a
present key (2,000 distinct keys a round) and ``HTM.recall`` (hybrid, 10 hits) three ways,
in rotating order within each round of one run: with a check that checks nothing (the
baseline), with the check as shipped, and with a check that compares the SHA-256 instead
(what a read did before the CRC column, for reference). It prints the medians and the
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

import htm_core.store.sqlite.rows as sqlite_records
from htm_core import HTM, HashingEmbedder
from htm_core.store.values import content_hash

WORDS = ("kernel garden invoice violin sailing pasta tennis printer espresso glacier "
         "lantern harbor quartz meadow ferry canyon").split()


def _unchecked(key: str, memory_id: int, content: str, stored_crc: int | None,
               stored_hash: str, url: str) -> None:
    """A check that checks nothing (the baseline)."""


def _sha256(key: str, memory_id: int, content: str, stored_crc: int | None,
            stored_hash: str, url: str) -> None:
    """The SHA-256 comparison (the reference)."""
    if content_hash(content) != stored_hash:
        raise AssertionError(key)


VARIANTS: dict[str, Callable[..., None]] = {
    "off": _unchecked, "crc": sqlite_records.check_stored_text, "sha256": _sha256}


def _time(fn: Callable[[int], Any], calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        fn(i)
    return (time.perf_counter() - start) / calls * 1e6


def _rounds(fn: Callable[[int], Any], calls: int, rounds: int) -> dict[str, list[float]]:
    """Per variant, the µs a call of each round (the order rotates every round)."""
    names = list(VARIANTS)
    _time(fn, calls)  # warm up
    times: dict[str, list[float]] = {name: [] for name in names}
    try:
        for r in range(rounds):
            for name in names[r % 3:] + names[:r % 3]:
                sqlite_records.check_stored_text = VARIANTS[name]  # type: ignore[assignment]
                times[name].append(_time(fn, calls))
    finally:
        sqlite_records.check_stored_text = VARIANTS["crc"]  # type: ignore[assignment]
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
            work = {
                "get": (lambda i: store.get(f"k{(i * 7919) % args.memories}"),
                        min(2_000, args.memories)),
                "recall": (lambda i: htm.recall(queries[i % 50], limit=10), 30),
            }
            results = {name: _rounds(fn, calls, args.rounds)
                       for name, (fn, calls) in work.items()}
    for name, times in results.items():
        line = f"{name:7s} unchecked {statistics.median(times['off']):8.1f} µs"
        for variant in ("crc", "sha256"):
            ratio = statistics.median(t / o for t, o in zip(times[variant], times["off"], strict=True))
            line += f"  {variant} {statistics.median(times[variant]):8.1f} µs ({ratio:.3f})"
        print(line)


if __name__ == "__main__":
    main()
