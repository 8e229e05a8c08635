"""The grouped settings of :class:`~htm_core.HTM`: working memory, embedding, enrichment and
observability, each a frozen value to build once and pass to several ``HTM`` objects.

Every field is also a keyword of ``HTM`` itself (``HTM(embed_batch_size=16)`` is
``HTM(embedding=EmbeddingOptions(batch_size=16))``); giving a group and one of its
keywords together is a :class:`~htm_core.errors.ValidationError`. See docs/configuration.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import ValidationError

__all__ = ["EmbeddingOptions", "EnrichmentOptions", "Observability", "WorkingMemoryOptions",
           "group"]


@dataclass(frozen=True, kw_only=True)
class WorkingMemoryOptions:
    """The working memory: its budget (None: ``HTM_WORKING_MEMORY_TOKENS``, else 128,000),
    eviction policy, the share of a context left free, and the token counter."""

    tokens: int | None = None
    eviction: str | None = None
    context_margin: float | None = None
    token_counter: Any = None


@dataclass(frozen=True, kw_only=True)
class EmbeddingOptions:
    """The embedder (an object, or ``"auto"``, ``"hashing"``, ``"local"``,
    ``"ollama[:model]"``), texts per call, vectors made by a background worker, and
    whether a store embedded by another embedder may be opened (to re-embed it)."""

    embedder: Any = None
    batch_size: int = 64
    background: bool = False
    allow_mismatch: bool = False


@dataclass(frozen=True, kw_only=True)
class EnrichmentOptions:
    """The enrichers (rule-based ones run inline, model-backed ones as background jobs)
    and the job runner's options (``workers``, ``requests_per_second``, ...)."""

    importance_scorer: Any = None
    tagger: Any = None
    summariser: Any = None
    runner: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class Observability:
    """OpenTelemetry export: through the global providers (``export=True``) or the ones
    given; in-process counters are kept either way."""

    export: bool = False
    meter_provider: Any = None
    tracer_provider: Any = None


G = TypeVar("G", WorkingMemoryOptions, EmbeddingOptions, EnrichmentOptions, Observability)


def group(kind: type[G], given: G | None, name: str, shortcuts: Mapping[str, tuple[str, Any]]
          ) -> G:
    """The group ``name`` of an ``HTM``: ``given``, or one made from the keywords that
    stand for its fields (``shortcuts``: keyword -> (field, value); None is not given)."""
    chosen = {keyword: pair for keyword, pair in shortcuts.items() if pair[1] is not None}
    if given is None:
        return kind(**{field: value for field, value in chosen.values()})
    if not isinstance(given, kind):
        raise ValidationError(f"{name} must be {kind.__name__}(...), got {type(given).__name__}")
    if chosen:
        raise ValidationError(
            f"give {', '.join(chosen)} either as keywords or inside {name}={kind.__name__}(...), "
            "not both")
    return given

