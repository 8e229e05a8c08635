"""Enrichment, off the hot path: importance, tags, summaries, document chunking, jobs.

Every enricher here is optional. The rule-based ones (:class:`RuleImportanceScorer`,
:class:`RuleTagger`) are deterministic and need no model; the LLM-backed ones
(:class:`LLMImportanceScorer`, :class:`LLMTagger`, :class:`Summariser`) validate every answer
and run in background jobs (:mod:`htm_core.jobs`: a :class:`JobRunner` over a :class:`JobQueue`),
never inside ``add``.
"""

from ..jobs import BatchHandler, InMemoryJobQueue, Job, JobQueue, JobRunner, SQLJobQueue, TokenBucket
from .base import BatchTagger, ImportanceScorer, ModelBacked, SummaryWriter, Tagger, uses_model
from .chunking import Chunk, chunk_markdown
from .documents import ChunkRecord, DocumentDiff, DocumentPlan, diff_document, plan_document
from .errors import (
    EnrichmentError,
    InvalidModelOutputError,
    JobQueueError,
    ModelCallError,
    UnknownJobKindError,
)
from .importance import RuleImportanceScorer
from .kinds import enrichment_handlers, importance_job, summary_job, tag_job
from .llm import ChatModel, LLMImportanceScorer, LLMTagger, LLMUsage, ollama_chat_model
from .pipeline import Enrichment
from .summarise import Summariser
from .tagging import RuleTagger

__all__ = [
    "BatchHandler",
    "BatchTagger",
    "ChatModel",
    "Chunk",
    "ChunkRecord",
    "DocumentDiff",
    "DocumentPlan",
    "Enrichment",
    "EnrichmentError",
    "ImportanceScorer",
    "InMemoryJobQueue",
    "InvalidModelOutputError",
    "Job",
    "JobQueue",
    "JobQueueError",
    "JobRunner",
    "LLMImportanceScorer",
    "LLMTagger",
    "LLMUsage",
    "ModelBacked",
    "ModelCallError",
    "RuleImportanceScorer",
    "RuleTagger",
    "SQLJobQueue",
    "Summariser",
    "SummaryWriter",
    "Tagger",
    "TokenBucket",
    "UnknownJobKindError",
    "chunk_markdown",
    "diff_document",
    "enrichment_handlers",
    "importance_job",
    "ollama_chat_model",
    "plan_document",
    "summary_job",
    "tag_job",
    "uses_model",
]
