"""Score fusion against rank fusion: each arm's scores, normalised, in place of 1 / (k + rank).

::

    python -m benchmarks.score_fusion --locomo /work/shared/data/locomo-dev --set none
    python -m benchmarks.score_fusion --set both --variants "rrf + 0.2 min-max,cc max"

An experiment, not a library option. Hybrid recall fuses its arms by weighted Reciprocal
Rank Fusion (:mod:`htm_core.recall.fusion`): a hit counts ``weight × coverage / (60 +
rank)`` whatever its score, so a clear first hit and a near tie count the same. A convex
combination of the arms' normalised scores keeps that information (Bruch et al., "An
Analysis of Fusion Functions for Hybrid Retrieval", 2023). Each variant replaces the rank
term of the default fusion with

``(1 − mix) / (60 + rank) + lam × norm(score) / 61``

(``norm`` puts a hit of the arm's best score at 1, so a first hit weighs what RRF gives
rank 1) and keeps everything else of the default: the arms' weights, each full-text hit's
coverage of the query and the adaptive full-text weight, near-duplicates, neighbor credit.
The normalisations, over the arm's own hits (best first, whatever the sign of its scores):

- ``min-max``: the best hit 1, the last 0;
- ``max``: the score over the best score, a theoretical minimum of 0 (cosine and bm25
  scores of a hit are on the same side of 0 as the best one's, or cut to 0).

The variants run one at a time through the real recall path: the script swaps in its
fusion (:func:`fusing`) around :func:`benchmarks.recall_quality.evaluate` run with the
default configuration only. The report is the R@10 table per kind and the paired difference
of each variant against the default, question by question.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from htm_core.recall import pipeline
from htm_core.recall.briefs import Briefs
from htm_core.recall.config import RetrievalConfig
from htm_core.recall.fusion import full_text_shares

from .recall_quality import (
    ArmResult,
    evaluate,
    variant_experiment,
)

__all__ = ["VARIANTS", "Variant", "fused", "fusing", "main", "normalised"]

BASE = "htm hybrid (default)"
#: The RRF constant the default uses, and the rank-1 term a normalised score of 1 matches.
K = 60


@dataclass(frozen=True)
class Variant:
    """A fused term ``(1 − mix) / (K + rank) + lam × norm(score) / (K + 1)``."""

    norm: str
    lam: float
    mix: float = 1.0
    vector: float = 1.0
    text: float = 1.0


VARIANTS: dict[str, Variant] = {
    "cc min-max": Variant("min-max", 1.0),
    "cc min-max vector × 1.5": Variant("min-max", 1.0, vector=1.5),
    "cc min-max full text × 1.5": Variant("min-max", 1.0, text=1.5),
    "cc max": Variant("max", 1.0),
    "half cc half rrf": Variant("min-max", 0.5, mix=0.5),
    "rrf + 0.5 min-max": Variant("min-max", 0.5, mix=0.0),
    "rrf + 0.2 min-max": Variant("min-max", 0.2, mix=0.0),
}


def normalised(hits: Sequence[tuple[int, float]], how: str) -> dict[int, float]:
    """Each hit's score on 0..1 by ``how`` (``min-max`` or ``max``); ``hits`` best first.

    >>> normalised([(1, -4.0), (2, -3.0), (3, -2.0)], "min-max")
    {1: 1.0, 2: 0.5, 3: 0.0}
    >>> normalised([(1, 0.8), (2, 0.4), (3, -0.1)], "max")
    {1: 1.0, 2: 0.5, 3: 0.0}
    """
    if not hits:
        return {}
    best, worst = hits[0][1], hits[-1][1]
    if how == "min-max":
        span = best - worst
        return {mid: (s - worst) / span if span else 1.0 for mid, s in hits}
    if how == "max":
        return {mid: max(0.0, s / best) if best else 0.0 for mid, s in hits}
    raise ValueError(f"unknown normalisation {how!r}")


def fused(found: Mapping[str, Sequence[tuple[int, float]]], text: str,
          config: RetrievalConfig, briefs: Briefs, variant: Variant
          ) -> tuple[list[int], dict[int, float], dict[int, dict[str, int]]]:
    """What :func:`htm_core.recall.fusion.coverage_scores` returns, with ``variant``'s
    term in place of the rank term."""
    shares = full_text_shares(
        {mid for arm, hits in found.items() if arm.startswith("fulltext") for mid, _ in hits},
        text, briefs)
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for arm, hits in found.items():
        weight = config.weights.get(arm, 1.0)
        if arm.startswith("fulltext"):
            held = [shares[mid] for mid, _ in hits]
            weight *= (max(held) if config.adaptive and held else 1.0) * variant.text
        else:
            held = [1.0] * len(hits)
            weight *= variant.vector
        norm = normalised(hits, variant.norm)
        for rank, ((mid, _), share) in enumerate(zip(hits, held, strict=True), start=1):
            term = (1 - variant.mix) / (K + rank) + variant.lam * norm[mid] / (K + 1)
            scores[mid] = scores.get(mid, 0.0) + weight * share * term
            ranks.setdefault(mid, {})[arm] = rank
    ordered = sorted(scores, key=lambda m: (-scores[m], min(ranks[m].values()), m))
    return ordered, scores, ranks


@contextmanager
def fusing(variant: Variant) -> Iterator[None]:
    """Hybrid recall fuses by ``variant`` inside the block: the arms' hits with their
    scores are kept from :func:`pipeline.run_arms` for :func:`fused`."""
    run_arms, coverage_scores = pipeline.run_arms, vars(pipeline)["coverage_scores"]
    last: dict[str, Any] = {}

    def keeping(*args: Any, **kwargs: Any) -> Any:
        asked, found = run_arms(*args, **kwargs)
        last["found"] = found
        return asked, found

    def by_score(arms: Any, text: str, config: RetrievalConfig, briefs: Briefs) -> Any:
        return fused(last["found"], text, config, briefs, variant)

    swapped = {"run_arms": keeping, "coverage_scores": by_score}
    kept = {"run_arms": run_arms, "coverage_scores": coverage_scores}
    for name, fn in swapped.items():
        setattr(pipeline, name, fn)
    try:
        yield
    finally:
        for name, fn in kept.items():
            setattr(pipeline, name, fn)


def run(data: dict[str, Any], embedder: Any, variants: Sequence[str]
        ) -> tuple[list[dict[str, Any]], dict[str, ArmResult]]:
    """The default, then each variant, over every conversation of ``data``."""
    questions, base = evaluate(data, embedder=embedder, baselines=False, rows=["(default)"])
    results = {BASE: base[BASE]}
    for name in variants:
        with fusing(VARIANTS[name]):
            _, got = evaluate(data, embedder=embedder, baselines=False, rows=["(default)"])
        results[name] = ArmResult(name, got[BASE].ranked, got[BASE].seconds)
    return questions, results


def main(argv: list[str] | None = None) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """Run the variants on each set, print the tables; return each set's summaries."""
    return variant_experiment("Score fusion against RRF (experiment)", list(VARIANTS), run, argv)


if __name__ == "__main__":
    main()
