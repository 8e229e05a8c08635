"""``HTM.recall`` on queries naming a time: the ``atypical@time`` arm only without a rare
word (the default: the store counts the query's words) against the arm for every time
phrase (``RetrievalConfig(atypical_only_without_rare_words=False)``).

One store of ``--size`` chat turns (a fifth of them holding one of a few activity words),
36 questions naming an activity and a time ("When did Ada go camping last May?") and 4
naming only a time ("What did Ada do last May?"); both configurations recall every question
once to warm up, then in alternating blocks, ``--runs`` rounds; the medians are printed.
SQLite by default; ``--postgres [URL]`` on a fresh database of that server (a throwaway
pgserver without a URL).

Run: ``python -m benchmarks.time_phrase_recall [--postgres [URL]] [--size 600] [--runs 3]
[--quick]``
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone
from pathlib import Path

from htm_core import HTM
from htm_core.clock import FrozenClock
from htm_core.embeddings import HashingEmbedder
from htm_core.recall import RetrievalConfig

ACTIVITIES = ("camping painting pottery kayak museum guitar sunset beach novel garden "
              "puppy bakery").split()
FILLER = ("had a quiet evening with tea watched the rain called my sister cooked soup read "
          "chapters").split()
CONFIGS = {"rare-word gate (default)": RetrievalConfig(),
           "arm for every time phrase": RetrievalConfig(atypical_only_without_rare_words=False)}


def turns(size: int, seed: int = 3) -> list[dict[str, object]]:
    """``size`` turns of Ada and Bo, 14 hours apart from 1 January 2023."""
    rng = random.Random(seed)
    start = datetime(2023, 1, 1, tzinfo=timezone.utc)
    return [{"content": f"{'Ada' if i % 2 else 'Bo'}: " + " ".join(
                rng.sample(FILLER, 6) + ([rng.choice(ACTIVITIES)] if i % 5 == 0 else []))
             + f" {i}", "key": f"t{i}", "created_at": start + timedelta(hours=14 * i)}
            for i in range(size)]


def questions() -> list[str]:
    return ([f"When did Ada go {a} last {m}?" for a in ACTIVITIES
             for m in ("May", "June", "summer")]
            + [f"What did Ada do last {m}?" for m in ("May", "June", "July", "March")])


def run(url: str, size: int, runs: int) -> dict[str, float]:
    """The median milliseconds of ``HTM.recall`` per configuration."""
    clock = FrozenClock(datetime(2024, 1, 10, tzinfo=timezone.utc))
    with ExitStack() as stack:
        htms = {name: stack.enter_context(HTM(robot="bench", database_url=url, clock=clock,
                                              embedder=HashingEmbedder(), retrieval=config))
                for name, config in CONFIGS.items()}
        next(iter(htms.values())).add_many(turns(size))
        asked = questions()
        seconds: dict[str, list[float]] = {name: [] for name in htms}
        for round_ in range(runs + 1):
            for name, htm in htms.items():
                for q in asked:
                    t0 = time.perf_counter()
                    htm.recall(q, limit=10)
                    if round_:  # the first round warms up
                        seconds[name].append(time.perf_counter() - t0)
    return {name: statistics.median(s) * 1000 for name, s in seconds.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=600)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", nargs="?", const="", metavar="URL")
    parser.add_argument("--quick", action="store_true", help="100 memories, one round")
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.runs = 100, 1
    with ExitStack() as stack:
        if args.postgres is None:
            url = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "t.db")
        else:
            from ._common import fresh_database, postgres_server

            server = stack.enter_context(postgres_server(args.postgres or None))
            url = stack.enter_context(fresh_database(server))
        medians = run(url, args.size, args.runs)
    backend = "SQLite" if args.postgres is None else "PostgreSQL"
    print(f"HTM.recall p50, {len(questions())} questions naming a time, {args.size} "
          f"memories, {backend}:")
    for name, ms in medians.items():
        print(f"- {name}: {ms:.2f} ms")


if __name__ == "__main__":
    main()
