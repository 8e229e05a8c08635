"""What memory kinds cost: the kind rules on the add path, and the upgrade to schema 8.

``intake``: the CPU time per memory of ``HTM``'s intake (every check, and the kind rules
when no kind is given) for 20,000 chat-like texts that no rule matches, for the same texts
each with a rule's word in it, and with ``kind`` given (the rules skipped); minimum of
``--rounds``. ``upgrade``: a SQLite store of ``--memories`` memories taken back to schema 7
(the kind columns and index dropped), then the wall time of ``migrate()`` to 8 (the
columns added, the index built).

    python -m benchmarks.kinds intake [--rounds 5]
    python -m benchmarks.kinds upgrade [--memories 200000]

``--quick``: 2,000 texts, one round; an upgrade of 2,000 memories (a smoke test).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from htm_core import HTM, HashingEmbedder

WORDS = ("the a we team report meeting cache deploy staging friday budget tests passed slow "
         "fast user asked about plan next step review code database index query").split()


def _texts(n: int, extra: str = "") -> list[str]:
    rng = random.Random(1)
    return [" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + f"{extra} {i}."
            for i in range(n)]


def intake(rounds: int, size: int = 20_000) -> None:
    plain, worded = _texts(size), _texts(size, " and my notes")
    with HTM(database_url=":memory:", embedder="hashing") as htm:
        runs = {"no rule's word (rules skipped early)": plain,
                "a rule's word ('my'): rules read": worded,
                "kind given (rules not run)": [{"content": t, "kind": "episodic"}
                                               for t in plain]}
        for name, items in runs.items():
            best = []
            for _ in range(rounds):
                start = time.process_time()
                htm._intake.batch(items)
                best.append(time.process_time() - start)
            print(f"{name}: {min(best) / len(items) * 1e6:.1f} µs a memory")


def upgrade(memories: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = str(Path(folder) / "big.db")
        with HTM(database_url=url, embedder=HashingEmbedder(dim=64)) as htm:
            with htm.store.bulk_load():  # type: ignore[attr-defined]
                for at in range(0, memories, 5_000):
                    size = min(5_000, memories - at)
                    htm.add_many(_texts(size, f" batch {at}"), working_memory=False)
            with htm.store.engine.begin() as conn:  # type: ignore[attr-defined]
                conn.execute(text("DROP INDEX memories_kind"))
                for table in ("memories", "memory_versions"):
                    for column in ("kind", "source", "confidence"):
                        conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
                conn.execute(text("UPDATE htm_meta SET value = '7' "
                                  "WHERE key = 'schema_version'"))
        start = time.perf_counter()
        with HTM(database_url=url, embedder=HashingEmbedder(dim=64)) as htm:
            took = time.perf_counter() - start
            assert htm.store.schema_version() == 8
        print(f"open + migrate 7 -> 8 of {memories:,} memories: {took:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("intake", "upgrade"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--memories", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    args = parser.parse_args()
    if args.what == "intake":
        intake(1, 2_000) if args.quick else intake(args.rounds)
    else:
        upgrade(2_000 if args.quick else args.memories)


if __name__ == "__main__":
    main()
