""":class:`RankedId`, one result of a search as the recall pipeline passes it along."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["RankedId"]

_NO_RANKS: Mapping[str, int] = MappingProxyType({})  # RankedId: none given, a new {} each


@dataclass(frozen=True)
class RankedId:
    """One result of a search: memory id, score (higher is better), rank in each arm.

    ``score`` orders the results of one search (for hybrid, the fused RRF score);
    ``similarity`` is the memory's cosine similarity to the (centered, for hybrid) query when
    a vector arm found it; ``relevance`` is the score on htm's one 0..1 scale, set by
    :func:`htm_core.scoring.finish` (what :attr:`htm_core.models.Hit.score` carries).
    """

    id: int
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)
    similarity: float | None = None
    relevance: float = 0.0

    def __init__(self, id: int, score: float, ranks: Mapping[str, int] = _NO_RANKS,
                 similarity: float | None = None, relevance: float = 0.0) -> None:
        # Not the generated one (object.__setattr__ per field): twice as fast, a few dozen a recall.
        self.__dict__.update(id=id, score=score, ranks={} if ranks is _NO_RANKS else ranks,
                             similarity=similarity, relevance=relevance)
