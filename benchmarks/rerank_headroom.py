"""What a reranker of hybrid recall's first hits could reach at best.

::

    python -m benchmarks.rerank_headroom --locomo /work/shared/data/locomo-dev

The default hybrid recall's first 100 hits of every question, and for each depth N the R@10
they would give if a perfect reranker put the evidence among the first N hits first:
``min(|evidence ∩ first N|, 10) / |evidence|`` per question, averaged per kind. A real
reranker (a cross-encoder, an LLM, through ``recall(rerank=...)``) reaches a share of the
gap between the default's row and its depth's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from .recall_quality import (
    ALL_KINDS,
    _in_row,
    evaluate,
    experiment_parser,
    experiment_sets,
    load_set,
    make_embedder,
)

__all__ = ["DEPTHS", "headroom", "main"]

#: The depths reranked: 10 is the default's own R@10, 20 what ``recall(rerank=...)``
#: reranks for 10 hits.
DEPTHS = (10, 20, 25, 50, 100)
BASE = "htm hybrid (default)"


def headroom(questions: Sequence[dict[str, Any]], ranked: dict[str, list[str]],
             depths: Sequence[int] = DEPTHS) -> dict[str, dict[int, float]]:
    """Per kind (and ``all``), the best R@10 a reranker of the first N of ``ranked`` gives."""
    out: dict[str, dict[int, float]] = {}
    for kind in (*ALL_KINDS, "all"):
        asked = [q for q in questions if _in_row(kind, q) and q["id"] in ranked]
        if asked:
            out[kind] = {n: statistics.fmean(
                min(len(set(q["evidence"]) & set(ranked[q["id"]][:n])), 10)
                / len(set(q["evidence"])) for q in asked) for n in depths}
    return out


def main(argv: list[str] | None = None) -> dict[str, dict[str, dict[int, float]]]:
    """Print the table per set; return it (set -> kind -> depth -> R@10)."""
    parser = experiment_parser("Best R@10 of a reranker of the first hits")
    args = parser.parse_args(argv)
    sets = experiment_sets(parser, args)
    embedder = make_embedder(args.embedder, args.cache)
    out: dict[str, dict[str, dict[int, float]]] = {}
    for name in sets:
        questions, results = evaluate(load_set(name, locomo=args.locomo), embedder=embedder,
                                      baselines=False, rows=["(default)"], depth=max(DEPTHS))
        out[name] = table = headroom(questions, results[BASE].ranked)
        print(f"\n**{name}: best R@10 when the default's first N hits are reranked**\n")
        print("| kind | " + " | ".join(f"N = {n}" for n in DEPTHS) + " |")
        print("|---|" + "---:|" * len(DEPTHS))
        for kind, row in table.items():
            print(f"| {kind} | " + " | ".join(f"{row[n]:.3f}" for n in DEPTHS) + " |")
    return out


if __name__ == "__main__":
    main()
