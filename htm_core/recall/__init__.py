"""Recall: the hybrid retriever, read top to bottom in :mod:`htm_core.recall.pipeline`.

Its steps live beside it, each in a module named for its job: :mod:`.arms` (what each arm
asks the store), :mod:`.centering`, :mod:`.fusion` (Reciprocal Rank Fusion, weighted by
word :mod:`.coverage`), :mod:`.duplicates`, :mod:`.neighbors`, :mod:`.rerank`;
:mod:`.config` holds :class:`RetrievalConfig`, the options of every step. The windows of
long memories that the vector arm searches are made when a memory is embedded
(:mod:`htm_core._windows`); the store searches them inside the arm.
"""

from __future__ import annotations

from ..querytime import QueryTime, query_timeframe
from .arms import hybrid_arms
from .centering import centered_query
from .config import STRATEGIES, RetrievalConfig, check_recall_strategy
from .coverage import coverage
from .fusion import FusionFn, reciprocal_rank_fusion
from .pipeline import search
from .ranked import RankedId

__all__ = [
    "STRATEGIES",
    "FusionFn",
    "QueryTime",
    "RankedId",
    "RetrievalConfig",
    "centered_query",
    "check_recall_strategy",
    "coverage",
    "hybrid_arms",
    "query_timeframe",
    "reciprocal_rank_fusion",
    "search",
]
