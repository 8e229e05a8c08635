"""The cost of checking each memory a SQLite read serves against its stored SHA-256.

Every SQLite read of a memory (``get``, the hits of ``recall``, exports) hashes its text and
compares it with ``content_hash``. This measures ``store.get`` of a present key and
``HTM.recall`` (hybrid, 10 hits) with the check and with a copy of the reader that skips it,
in alternating rounds of one run, and prints the median ratio (checked / unchecked).

    python -m benchmarks.read_verification [--memories 20000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from htm_core import HTM, HashingEmbedder
from htm_core.clock import utc_from_timestamp
from htm_core.models import Memory
from htm_core.store.sqlite._records import _SQLiteRecords

WORDS = ("kernel garden invoice violin sailing pasta tennis printer espresso glacier "
         "lantern harbor quartz meadow ferry canyon").split()


def _unchecked(self: Any, row: Sequence[Any], tags: Sequence[str],
               embedding: bytes | None = None) -> Memory:
    """``_SQLiteRecords._to_memory`` without the checksum comparison (the baseline)."""
    (mid, key, content, content_hash, robot, importance, token_count, created_at,
     last_accessed, access_count, metadata, embedder, forgotten_at, version) = row[:14]
    return Memory(
        id=mid, key=key, content=content, content_hash=content_hash,
        robot=robot, importance=importance, token_count=token_count,
        created_at=utc_from_timestamp(created_at),
        last_accessed=utc_from_timestamp(last_accessed),
        access_count=access_count, tags=tuple(tags),
        metadata=json.loads(metadata) if metadata != "{}" else {},
        embedder=embedder,
        embedding=np.frombuffer(embedding, dtype=np.float32).tolist() if embedding else None,
        forgotten_at=utc_from_timestamp(forgotten_at) if forgotten_at else None,
        version=int(version),
    )


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
    checked = _SQLiteRecords._to_memory
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
                        _SQLiteRecords._to_memory = (  # type: ignore[method-assign]
                            checked if variant == "on" else _unchecked)
                        measured[variant] = _time(fn, calls)
                    _SQLiteRecords._to_memory = checked  # type: ignore[method-assign]
                    ratios[name].append(measured["on"] / measured["off"])
                    times[name].append((measured["off"], measured["on"]))
    for name in work:
        off = statistics.median(t[0] for t in times[name])
        on = statistics.median(t[1] for t in times[name])
        print(f"{name:7s} unchecked {off:8.1f} µs  checked {on:8.1f} µs  "
              f"median ratio {statistics.median(ratios[name]):.3f}")


if __name__ == "__main__":
    main()
