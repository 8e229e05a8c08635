"""HTM-level read and write path, through the public API: what coherence costs per call.

One robot with 2,000 stored memories and a full working memory of about 300 items (an
8,000-token budget) times, as medians per call: ``create_context()`` (balanced, the
default), ``recall(query)`` (hybrid, top 10; hits enter working memory, committed),
``retrieve(key)`` and ``add(text)`` (which evicts). Then a second ``HTM`` on the same store,
another robot, forgets a memory this robot holds before each ``create_context()``: the
figure for a reader that must reload its working memory (the rare path).

Every call goes through ``HTM`` exactly as an application makes it, so the same script
measures any version of htm; run it before and after a change on the same machine.

Run: ``python -m benchmarks.coherence [--database-url URL] [--quick]``
(default: a fresh SQLite file in a temporary folder).
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._common import fmt_time, markdown_table, median_time

WORDS = ("falcon harbour lantern meadow quartz signal timber violet copper river orchard "
         "beacon glacier ember summit canyon").split()


def _text(i: int) -> str:
    return (f"note {i}: the {WORDS[i % 16]} team met near the {WORDS[(i * 7) % 16]} "
            f"at {WORDS[(i * 3) % 16]} hour {i % 24} to plan item {i}")


def run(url: str, *, memories: int, calls: int) -> dict[str, Any]:
    from htm_core import HTM

    robot = f"bench-{uuid.uuid4().hex[:6]}"
    out: dict[str, Any] = {"url": url.split("@")[-1], "memories": memories}
    with HTM(robot=robot, database_url=url, embedder="hashing",
             working_memory_tokens=8_000) as htm, \
            HTM(robot=f"{robot}-other", database_url=url, embedder="hashing") as other:
        htm.add_many([{"content": _text(i), "key": f"{robot}-{i}"} for i in range(memories)],
                     working_memory=False)
        for i in range(0, memories, max(1, memories // 400)):  # fill working memory
            htm.recall(f"plan item {i}", limit=2, strategy="fulltext")
        out["resident"] = len(htm.working_memory)
        queries = iter([f"{WORDS[i % 16]} hour {i % 24}" for i in range(10 * calls)])
        keys = iter([f"{robot}-{i}" for i in range(10 * calls)])
        fresh = iter(range(memories, memories + 10 * calls))
        out["create_context"] = median_time(htm.create_context, runs=calls * 5)
        out["recall"] = median_time(lambda: htm.recall(next(queries)), runs=calls)
        out["retrieve"] = median_time(lambda: htm.retrieve(next(keys)), runs=calls)
        out["add"] = median_time(lambda: htm.add(_text(next(fresh))), runs=calls)
        resident = iter(list(htm.working_memory.keys()))

        def after_forget() -> None:
            other.forget(next(resident), confirm=True)

        samples = []
        for _ in range(min(calls, len(htm.working_memory) - 1)):
            after_forget()
            samples.append(median_time(htm.create_context, runs=1, warmup=0))
        samples.sort()
        out["create_context_after_forget"] = samples[len(samples) // 2] if samples else None
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None,
                        help="a PostgreSQL URL (default: a fresh SQLite file)")
    parser.add_argument("--quick", action="store_true", help="tiny run, for CI smoke runs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or str(Path(tmp) / "coherence.db")
        r = run(url, memories=200 if args.quick else 2_000, calls=5 if args.quick else 60)
    print("## HTM read and write path (medians per call)\n")
    print(markdown_table(
        ["backend", "memories", "resident", "create_context", "recall (hybrid, top 10)",
         "retrieve", "add", "create_context after another robot's forget"],
        [["PostgreSQL" if "postgres" in url else "SQLite", f"{r['memories']:,}",
          f"{r['resident']:,}", fmt_time(r["create_context"]), fmt_time(r["recall"]),
          fmt_time(r["retrieve"]), fmt_time(r["add"]),
          fmt_time(r["create_context_after_forget"])]]))
    return {"rows": [r]}


if __name__ == "__main__":
    main()
