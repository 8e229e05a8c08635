"""Working-memory benchmark: add-that-evicts and context assembly against the seed algorithms.

The seed design kept working memory as a plain list and, on every add that overflowed,
sorted all resident nodes by (importance, added_at) and evicted from the front; context
assembly sorted all nodes by the strategy's score and took them greedily. htm keeps sorted
indexes instead (see ``htm_core.working``). Both run here on the same seeded items.

Run: ``python -m benchmarks.working_memory [--quick]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from htm_core.working import WorkingMemory

from ._common import fmt_ratio, fmt_time, goal_line, markdown_table, save_results

TOKENS_PER_ITEM = (5, 60)  # uniform token counts in this range


@dataclass
class SeedNode:
    """One node of the seed's list-based working memory."""

    key: str
    content: str
    tokens: int
    importance: float
    added_at: float
    last_accessed: float


class SeedWorkingMemory:
    """The seed's reference algorithm: sort everything on every eviction and assembly."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.nodes: dict[str, SeedNode] = {}
        self.tokens = 0
        self._t = 0.0

    def add(self, key: str, content: str, tokens: int, importance: float) -> list[str]:
        self._t += 1.0
        evicted = []
        if self.tokens + tokens > self.max_tokens:
            order = sorted(self.nodes.values(), key=lambda n: (n.importance, n.added_at))
            for node in order:
                if self.tokens + tokens <= self.max_tokens:
                    break
                del self.nodes[node.key]
                self.tokens -= node.tokens
                evicted.append(node.key)
        self.nodes[key] = SeedNode(key, content, tokens, importance, self._t, self._t)
        self.tokens += tokens
        return evicted

    def assemble(self, max_tokens: int, now: float) -> str:
        def score(n: SeedNode) -> float:
            return n.importance / (1.0 + max(0.0, now - n.last_accessed) / 3600.0)

        budget = int(max_tokens * 0.9)
        chosen, left = [], budget
        for node in sorted(self.nodes.values(), key=score, reverse=True):
            if node.tokens <= left:
                chosen.append(node.content)
                left -= node.tokens
        return "\n\n".join(chosen)


class TickClock:
    """A clock that moves one second per call, so items have distinct times."""

    def __init__(self) -> None:
        from datetime import datetime, timedelta, timezone

        self._start = datetime(2024, 5, 15, tzinfo=timezone.utc)
        self._delta = timedelta
        self.n = 0

    def __call__(self):  # type: ignore[no-untyped-def]
        self.n += 1
        return self._start + self._delta(seconds=self.n)


def _items(n: int, seed: int) -> tuple[list[int], list[float]]:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(TOKENS_PER_ITEM[0], TOKENS_PER_ITEM[1] + 1, n).tolist()
    importance = np.round(rng.uniform(0, 10, n), 1).tolist()
    return tokens, importance


def _per_call(fn, args: Sequence[tuple]) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for a in args:
        t0 = time.perf_counter()
        fn(*a)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def bench_size(resident: int, *, adds: int, seed_adds: int, assemblies: int) -> dict[str, float]:
    """Fill both memories to ``resident`` items, then time evicting adds and assemblies."""
    total = resident + adds + seed_adds
    tokens, importance = _items(total, seed=resident)
    budget = sum(tokens[:resident])
    wm = WorkingMemory(max_tokens=budget, clock=TickClock())
    seed = SeedWorkingMemory(budget)
    for i in range(resident):
        wm.add(f"k{i}", f"memory {i}", tokens=tokens[i], importance=importance[i])
        seed.add(f"k{i}", f"memory {i}", tokens[i], importance[i])
    new = [(f"k{i}", f"memory {i}", tokens[i], importance[i]) for i in range(resident, total)]
    htm_add = _per_call(lambda k, c, t, imp: wm.add(k, c, tokens=t, importance=imp), new[:adds])
    seed_add = _per_call(seed.add, new[adds:adds + seed_adds])
    out = {"resident": resident, "htm_add": htm_add, "seed_add": seed_add}
    for strategy in ("balanced", "important", "recent"):
        out[f"htm_assemble_{strategy}"] = _per_call(
            lambda s=strategy: wm.assemble(s, max_tokens=8_000), [()] * assemblies)
    out["seed_assemble"] = _per_call(lambda: seed.assemble(8_000, now=seed._t),
                                     [()] * max(3, assemblies // 10))
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for CI smoke runs")
    parser.add_argument("--save", action="store_true", help="save the results even with --quick")
    args = parser.parse_args(argv)
    sizes = [200, 1_000] if args.quick else [1_000, 10_000, 20_000, 100_000]
    rows = []
    for n in sizes:
        seed_adds = 5 if args.quick else (50 if n <= 20_000 else 10)
        r = bench_size(n, adds=200 if args.quick else 5_000, seed_adds=seed_adds,
                       assemblies=10 if args.quick else 200)
        rows.append(r)
    table = markdown_table(
        ["resident", "htm add (evicts)", "seed sort-all add", "speed-up",
         "htm assemble 8k (balanced)", "important", "recent", "seed sort-all assemble", "speed-up"],
        [[f"{r['resident']:,}", fmt_time(r["htm_add"]), fmt_time(r["seed_add"]),
          fmt_ratio(r["seed_add"] / r["htm_add"]), fmt_time(r["htm_assemble_balanced"]),
          fmt_time(r["htm_assemble_important"]), fmt_time(r["htm_assemble_recent"]),
          fmt_time(r["seed_assemble"]), fmt_ratio(r["seed_assemble"] / r["htm_assemble_balanced"])]
         for r in rows])
    print("## Working memory (medians per call)\n")
    print(table)
    at20k = next((r for r in rows if r["resident"] == 20_000), None)
    if at20k:
        print()
        print(goal_line("add that evicts, 20k resident", at20k["htm_add"], 10e-6))
        print(goal_line("assemble 8k budget, 20k resident", at20k["htm_assemble_balanced"], 200e-6))
    if args.save or not args.quick:
        save_results("working_memory", {"rows": rows})
    return {"rows": rows}


if __name__ == "__main__":
    main()
