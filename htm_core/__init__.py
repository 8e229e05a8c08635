"""htm: a two-tier memory for LLM applications.

A token-budgeted working memory that is always ready for the prompt, over a long-term
memory that never forgets and is searched by hybrid (vector + full-text) recall.

>>> from htm_core import HTM
>>> with HTM(database_url=":memory:", embedder="hashing") as htm:
...     _ = htm.add("User prefers Vim keybindings", importance=9.0, key="pref-vim")
...     htm.recall("vim", limit=1)[0].memory.key
'pref-vim'
"""

from importlib.metadata import PackageNotFoundError, version

from ._async import run_async
from .clock import FrozenClock
from .embeddings import Embedder, HashingEmbedder, LocalEmbedder
from .enrich.errors import EnrichmentError, InvalidModelOutputError, ModelCallError
from .errors import (
    DISTRIBUTION,
    ClosedError,
    ConfirmationRequiredError,
    ConflictError,
    DatabaseCorruptError,
    DatabaseUnavailableError,
    DimensionMismatchError,
    DiskFullError,
    DuplicateKeyError,
    EmbedderMismatchError,
    EmbeddingError,
    HTMError,
    IncompleteExportError,
    InvalidBudgetError,
    InvalidContentError,
    InvalidImportanceError,
    InvalidKeyError,
    InvalidMetadataError,
    InvalidTagError,
    InvalidTimeError,
    InvalidTokensError,
    JobQueueError,
    MemoryTooLargeError,
    MissingDependencyError,
    NotFoundError,
    ReadOnlyError,
    SchemaError,
    StoreError,
    TimeframeError,
    UnknownJobKindError,
    UnknownPolicyError,
    UnknownStrategyError,
    UnsupportedError,
    UnsupportedFilterError,
    ValidationError,
)
from .htm import HTM
from .models import Context, Hit, Memory, Operation, Page, Robot, Stats
from .options import EmbeddingOptions, EnrichmentOptions, Observability, WorkingMemoryOptions
from .recall import RetrievalConfig
from .tokens import CallableCounter, TiktokenCounter, TokenCounter
from .working import WorkingMemory

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

__all__ = [
    "HTM",
    "CallableCounter",
    "ClosedError",
    "ConfirmationRequiredError",
    "ConflictError",
    "Context",
    "DatabaseCorruptError",
    "DatabaseUnavailableError",
    "DimensionMismatchError",
    "DiskFullError",
    "DuplicateKeyError",
    "Embedder",
    "EmbedderMismatchError",
    "EmbeddingError",
    "EmbeddingOptions",
    "EnrichmentError",
    "EnrichmentOptions",
    "FrozenClock",
    "HTMError",
    "HashingEmbedder",
    "Hit",
    "IncompleteExportError",
    "InvalidBudgetError",
    "InvalidContentError",
    "InvalidImportanceError",
    "InvalidKeyError",
    "InvalidMetadataError",
    "InvalidModelOutputError",
    "InvalidTagError",
    "InvalidTimeError",
    "InvalidTokensError",
    "JobQueueError",
    "LocalEmbedder",
    "Memory",
    "MemoryTooLargeError",
    "MissingDependencyError",
    "ModelCallError",
    "NotFoundError",
    "Observability",
    "Operation",
    "Page",
    "ReadOnlyError",
    "RetrievalConfig",
    "Robot",
    "SchemaError",
    "Stats",
    "StoreError",
    "TiktokenCounter",
    "TimeframeError",
    "TokenCounter",
    "UnknownJobKindError",
    "UnknownPolicyError",
    "UnknownStrategyError",
    "UnsupportedError",
    "UnsupportedFilterError",
    "ValidationError",
    "WorkingMemory",
    "WorkingMemoryOptions",
    "__version__",
    "run_async",
]
