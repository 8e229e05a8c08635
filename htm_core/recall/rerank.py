"""The reranking seam of ``recall(..., rerank=...)``: a cross-encoder or a LangChain
document compressor reorders the first candidates of any strategy.

``rerank`` is a callable ``rerank(query, texts) -> scores`` or an object with
``compress_documents(documents, query)`` (a LangChain ``BaseDocumentCompressor``; langchain
is not imported). It sees the first ``max(2 × limit, 20)`` candidates (at most 10,000); its
scores order the hits and become their scores, squashed to 0..1 by the logistic function
when any falls outside. See docs/recall-quality.md ("Reranking").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ValidationError
from ..scoring import Reranker, _Known, relevance_floor
from .ranked import RankedId

__all__ = ["check_rerank", "rerank_depth"]


def rerank_depth(limit: int) -> int:
    """How many candidates a reranker sees for ``limit`` hits."""
    return min(max(2 * limit, 20), 10_000)


@dataclass
class RerankDocument:
    """What a document compressor receives: LangChain's ``Document`` shape, duck-typed."""

    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    type: str = "Document"


def _squashed(scores: list[float]) -> list[float]:
    if all(0.0 <= s <= 1.0 for s in scores):
        return scores
    return [1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, s)))) for s in scores]


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise ValidationError(f"rerank returned {value!r} as a score; a reranker must return "
                              "one finite number per text")
    return number


def _by_scores(function: Any) -> Reranker:
    def rerank(query: str, ranked: Sequence[RankedId], known: Mapping[int, _Known]
               ) -> list[RankedId]:
        if not ranked:
            return []
        got = function(query, [known[r.id].content for r in ranked])
        scores = [_number(s) for s in (got.tolist() if hasattr(got, "tolist") else list(got))]
        if len(scores) != len(ranked):
            raise ValidationError(f"rerank returned {len(scores)} scores for {len(ranked)} "
                                  "texts; it must return one score per text, in order")
        squashed = _squashed(scores)
        order = sorted(range(len(ranked)), key=lambda i: -scores[i])  # stable on ties
        return [replace(ranked[i], relevance=squashed[i]) for i in order]
    return rerank


def _by_compressor(compressor: Any) -> Reranker:
    def rerank(query: str, ranked: Sequence[RankedId], known: Mapping[int, _Known]
               ) -> list[RankedId]:
        if not ranked:
            return []
        docs = [RerankDocument(known[r.id].content, {"htm_id": r.id,
                                                     "key": getattr(known[r.id], "key", None)},
                               id=str(r.id)) for r in ranked]
        returned = list(compressor.compress_documents(docs, query))
        by_id = {r.id: r for r in ranked}
        picked: list[RankedId] = []
        scores: list[float | None] = []
        for doc in returned:
            metadata = getattr(doc, "metadata", None) or {}
            mid = metadata.get("htm_id")
            if mid not in by_id or any(p.id == mid for p in picked):
                raise ValidationError("rerank: the document compressor returned a document "
                                      "that is not one of those it was given (keep "
                                      "metadata['htm_id'] when copying documents)")
            picked.append(by_id[mid])
            score = metadata.get("relevance_score")
            scores.append(None if score is None else _number(score))
        if picked and all(s is not None for s in scores):
            squashed = _squashed([float(s) for s in scores if s is not None])
            return [replace(r, relevance=s) for r, s in zip(picked, squashed, strict=True)]
        return relevance_floor(picked)  # its order, htm's evidence, never increasing
    return rerank


def check_rerank(rerank: Any) -> Reranker | None:
    """``recall``'s ``rerank``: None, a document compressor or a ``(query, texts)`` callable."""
    if rerank is None:
        return None
    if callable(getattr(rerank, "compress_documents", None)):
        return _by_compressor(rerank)
    if callable(rerank):
        return _by_scores(rerank)
    raise ValidationError(
        f"rerank must be a callable (query, texts) -> scores or a document compressor "
        f"(an object with compress_documents(documents, query)), got {type(rerank).__name__}")
