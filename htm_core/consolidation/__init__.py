"""Consolidation: the parts digests are made of, none of them touching a store.

:mod:`~htm_core.consolidation.periods` (days, ISO weeks and months in a time zone),
:mod:`~htm_core.consolidation.kinds` (what a memory is, and rules that recognise it),
:mod:`~htm_core.consolidation.extractive` (the default digest, no LLM) and
:mod:`~htm_core.consolidation.summarisers` (the chat-model strategies). See
docs/consolidation.md.
"""

from __future__ import annotations

from .base import Digest, DigestStrategy, SourceItem, source_items
from .extractive import ExtractiveSummariser, split_sentences
from .kinds import DEFAULT_KIND, KINDS, RuleKindClassifier, check_kind, check_kinds
from .periods import (
    PERIOD_KINDS,
    Period,
    children,
    parent,
    parse_period,
    period_of,
    periods_between,
    zone_of,
)
from .summarisers import (
    STRATEGIES,
    DigestWriter,
    HierarchicalSummariser,
    MapReduceSummariser,
    SimpleSummariser,
    chat_model_of,
    strategy_named,
)

__all__ = [
    "DEFAULT_KIND",
    "KINDS",
    "PERIOD_KINDS",
    "STRATEGIES",
    "Digest",
    "DigestStrategy",
    "DigestWriter",
    "ExtractiveSummariser",
    "HierarchicalSummariser",
    "MapReduceSummariser",
    "Period",
    "RuleKindClassifier",
    "SimpleSummariser",
    "SourceItem",
    "chat_model_of",
    "check_kind",
    "check_kinds",
    "children",
    "parent",
    "parse_period",
    "period_of",
    "periods_between",
    "source_items",
    "split_sentences",
    "strategy_named",
    "zone_of",
]
