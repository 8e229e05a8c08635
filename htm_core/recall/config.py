"""How recall ranks: :class:`RetrievalConfig` (the options of every step of
:mod:`htm_core.recall.pipeline`) and the recall strategies."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .._windows import DEFAULT_WINDOW_WORDS
from ..errors import UnknownStrategyError, ValidationError
from .fusion import FusionFn, reciprocal_rank_fusion

__all__ = ["STRATEGIES", "RetrievalConfig", "check_recall_strategy"]

STRATEGIES = ("hybrid", "vector", "fulltext", "tiered")


@dataclass(frozen=True, kw_only=True)
class RetrievalConfig:
    """How hybrid recall fuses its arms (the defaults are the best measured setting).

    Attributes:
        rrf_k: the RRF constant (60, as in the original paper).
        candidates: each arm contributes its top ``candidates × limit`` (at least 50).
        fusion: ``fusion(arms, k) -> list[RankedId]``; replace to try another fusion
            (``weights`` apply to the built-in RRF only).
        weights: per-arm RRF weights: ``vector``, ``fulltext``, and the time-window arms
            ``vector@time``, ``fulltext@time`` and ``atypical@time`` (0 switches it off).
        time_boost: resolve time expressions in the query and add the time-window arms.
        atypical_only_without_rare_words: the ``atypical@time`` arm runs only for a query
            that, less its time phrase, has no rare word: none found in at least one and
            at most a tenth of the memories the recall's filters admit (its scope; the
            rule by which the full-text arm drops a speaker's name as too common, asked of
            the store: :meth:`~htm_core.store.base.Search.rare_terms`). "What did Zoe do
            last May?" has only the window to go on and gets the arm; in "When did Zoe go
            camping in May?" the words say what is wanted, and the window's least typical
            memories would crowd it. The store is asked only when a time phrase was
            found. ``False``: the arm runs for every query naming a time.
        neighbors: how many adjacent memories on each side lend a hit their score (0: off).
        neighbor_weight: the share of a better neighbor's score a memory gains (raised to
            the power of the distance).
        neighbor_gap: seconds; memories further apart in time are not neighbors.
        neighbor_words: a memory longer than this many words borrows proportionally less
            (``neighbor_words / words``): a short reply needs the turn before it to mean
            anything, a long message stands on its own. ``None``: every memory borrows alike.
        coverage: a full-text hit counts in proportion to the share of the query's words
            it contains, so a hit on one incidental word weighs little.
        adaptive: scale each full-text arm (``fulltext``, ``fulltext@time``) by the
            coverage of its best hit, so an arm that only matched an incidental word of the
            query weighs little (it helped both development sets; ``False``: the configured
            weights as they are).
        centering: remove the store's mean direction from the query before the vector arm
            (and the time-window vector arm) runs, windows of long memories included (the
            same query, centered on the memories' mean); ``strategy="vector"`` is never
            centered, its scores stay plain cosine similarities.
        no_terms_floor: a query with no searchable words (stop words, emoji or
            punctuation only) returns only the memories whose cosine similarity to it is at
            least this (the vector arm alone, not centered), so it never fills working
            memory with arbitrary memories.
        typical_penalty: with centering, the centered query also loses this share of the
            store's mean direction, so each memory's similarity drops by ``typical_penalty
            × its similarity to the average memory``: small talk and boilerplate that look
            like everything else give way to memories that say something (0: off).
        duplicates: memories among the first fused candidates whose word stems are at
            least this similar (Jaccard; 1.0, the default: the same stems) are one group:
            its newest member takes the group's best place, the others follow every other
            candidate (``None``: off; see :mod:`htm_core.recall.duplicates`).
        window_words: long memories embedded in windows (:mod:`htm_core._windows`): a memory
            with at least this many spaces also gets one vector per window of whole
            sentences up to this many words, and the vector arms score each memory by the
            better of its whole vector and its best window. ``None``: no windows are made
            (by the ``HTM`` holding this config) nor searched.

    >>> RetrievalConfig.plain().neighbors
    0
    """

    rrf_k: int = 60
    candidates: int = 5
    fusion: FusionFn = reciprocal_rank_fusion
    weights: Mapping[str, float] = field(default_factory=lambda: {
        "vector": 1.0, "fulltext": 1.0, "vector@time": 6.0, "fulltext@time": 6.0,
        "atypical@time": 6.0})
    time_boost: bool = True
    atypical_only_without_rare_words: bool = True
    neighbors: int = 1
    neighbor_weight: float = 0.3
    neighbor_gap: float = 3600.0
    neighbor_words: int | None = 60
    adaptive: bool = True
    coverage: bool = True
    centering: bool = True
    no_terms_floor: float = 0.5
    duplicates: float | None = 1.0
    typical_penalty: float = 0.2
    window_words: int | None = DEFAULT_WINDOW_WORDS

    def __post_init__(self) -> None:
        if self.rrf_k < 1 or self.candidates < 1:
            raise ValidationError("RetrievalConfig: rrf_k and candidates must be at least 1")
        if self.neighbors < 0 or not 0.0 <= self.neighbor_weight <= 1.0 or self.neighbor_gap < 0:
            raise ValidationError(
                "RetrievalConfig: neighbors must be >= 0, neighbor_weight in [0, 1] and "
                "neighbor_gap >= 0 seconds")
        if self.window_words is not None and (
                isinstance(self.window_words, bool) or not isinstance(self.window_words, int)
                or self.window_words < 2):
            raise ValidationError("RetrievalConfig: window_words must be None or an integer "
                                  "of at least 2 (words per window)")
        if self.neighbor_words is not None and self.neighbor_words < 1:
            raise ValidationError("RetrievalConfig: neighbor_words must be None or at least 1")
        if any(not math.isfinite(w) or w < 0 for w in self.weights.values()):
            raise ValidationError("RetrievalConfig: weights must be finite and >= 0")
        if not 0.0 <= self.typical_penalty <= 1.0 or (
                self.duplicates is not None and not 0.0 < self.duplicates <= 1.0):
            raise ValidationError("RetrievalConfig: typical_penalty must be in [0, 1] and "
                                  "duplicates None or a similarity in (0, 1]")
        if not -1.0 <= self.no_terms_floor <= 1.0:
            raise ValidationError("RetrievalConfig: no_terms_floor must be a cosine "
                                  "similarity, in [-1, 1]")

    @classmethod
    def plain(cls) -> RetrievalConfig:
        """Plain RRF of the two arms (top 2 × limit each, equal weights), no time boost, no
        neighbors, no centering: the design's hybrid recall."""
        return cls(candidates=2, time_boost=False, neighbors=0, coverage=False, centering=False,
                   weights={"vector": 1.0, "fulltext": 1.0}, duplicates=None, typical_penalty=0.0,
                   adaptive=False)

    def with_options(self, **changes: Any) -> RetrievalConfig:
        """A copy with some fields changed (validated like a new config)."""
        return replace(self, **changes)


def check_recall_strategy(strategy: str) -> str:
    """Return ``strategy`` if it is a recall strategy, else raise ``UnknownStrategyError``."""
    if strategy not in STRATEGIES:
        raise UnknownStrategyError(
            f"unknown recall strategy {strategy!r}; use one of {', '.join(STRATEGIES)}"
        )
    return strategy
