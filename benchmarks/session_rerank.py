"""Session-level re-rankings of the default hybrid's first 100 hits, measured offline
(docs/recall-quality.md, "Tried on LoCoMo and not kept"): diversity (a hit loses a share
of its score per better hit of its own session) and expansion (the first hits lend to the
rest of their session). Nothing here is part of the library.

    python -m benchmarks.session_rerank --locomo /work/shared/data/locomo-dev
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from htm_core import HTM, FrozenClock

from .recall_quality import CACHE, _turns, load_set, make_embedder, recall_at

#: One hit: (turn id, session id, fused score).
Hit = tuple[str, str, float]
Rerank = Callable[[list[Hit]], list[Hit]]


def ranked_hits(data: dict[str, Any], embedder: Any, depth: int = 100) -> list[dict[str, Any]]:
    """Every question with its evidence and the default hybrid's first ``depth`` hits."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="htm-sessions-") as tmp:
        for conv in data["conversations"]:
            clock = FrozenClock(datetime.fromisoformat(conv["sessions"][-1]["date"]))
            with HTM(robot="b", database_url=f"sqlite:///{tmp}/{conv['id']}.db",
                     embedder=embedder, clock=clock, working_memory_tokens=1_000_000) as htm:
                htm.add_many(_turns(conv))
                for q in (q for q in data["questions"] if q["conversation"] == conv["id"]):
                    clock.set(datetime.fromisoformat(q["now"]))
                    hits = htm.recall(q["question"], limit=depth)
                    rows.append({**q, "hits": [(h.memory.metadata["turn"],
                                                h.memory.metadata["session"], h.score)
                                               for h in hits]})
    return rows


def diversify(hits: list[Hit], share: float, free: int, pool: int = 50) -> list[Hit]:
    """Greedy: each next hit is the best score × ``share`` ** (its session's hits already
    taken beyond ``free - 1``), over the first ``pool``."""
    left, out, taken = list(hits[:pool]), [], dict[str, int]()
    while left:
        best = max(left, key=lambda h: h[2] * share ** max(0, taken.get(h[1], 0) - free + 1))
        out.append(best)
        left.remove(best)
        taken[best[1]] = taken.get(best[1], 0) + 1
    return out + hits[pool:]


def expand(hits: list[Hit], weight: float, total: bool, pool: int = 30) -> list[Hit]:
    """Each hit gains ``weight`` × what lifts the other hits of its session among the first
    ``pool`` above the ``pool``-th score: the best of them, or (``total``) their sum."""
    if not hits:
        return hits
    floor = hits[min(len(hits), pool) - 1][2]
    out = []
    for turn, session, score in hits:
        lifts = [s - floor for t, ss, s in hits[:pool] if ss == session and t != turn]
        bonus = sum(lifts) if total else max(lifts, default=0.0)
        out.append((turn, session, score + weight * max(bonus, 0.0)))
    return sorted(out, key=lambda h: -h[2])


RERANKS: dict[str, Rerank] = {
    "default": lambda h: h,
    "diversity 0.9": lambda h: diversify(h, 0.9, 1),
    "diversity 0.9 beyond the third": lambda h: diversify(h, 0.9, 3),
    "expansion, best, 0.1": lambda h: expand(h, 0.1, total=False),
    "expansion, sum, 0.05": lambda h: expand(h, 0.05, total=True),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, required=True, metavar="DIR")
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    embedder = make_embedder("minilm", args.cache)
    for name in ("locomo", "dev", "assistant"):
        rows = ranked_hits(load_set(name, locomo=args.locomo), embedder)
        embedder.save()
        for label, rerank in RERANKS.items():
            kinds: dict[str, list[float]] = {}
            for q in rows:
                got = recall_at([h[0] for h in rerank(q["hits"])], q["evidence"], 10)
                kinds.setdefault(q["kind"], []).append(got)
                if q["kind"] != "adversarial":
                    kinds.setdefault("all", []).append(got)
            print(f"{name} | {label} | " + " | ".join(
                f"{k} {statistics.fmean(v):.3f}" for k, v in sorted(kinds.items())))


if __name__ == "__main__":
    main()
