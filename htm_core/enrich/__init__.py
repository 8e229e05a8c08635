"""Enrichment, off the hot path: importance scoring, tagging and document chunking.

Every enricher here is optional. The rule-based ones are deterministic and need no
model; LLM-backed ones run in background jobs, never inside ``add``.
"""

from .chunking import Chunk, chunk_markdown
from .importance import ImportanceScorer, RuleImportanceScorer
from .tagging import RuleTagger, Tagger

__all__ = [
    "Chunk",
    "ImportanceScorer",
    "RuleImportanceScorer",
    "RuleTagger",
    "Tagger",
    "chunk_markdown",
]
