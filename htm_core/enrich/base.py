"""What an enricher is: the protocols every importance scorer, tagger and summariser meets.

All enrichers are structural (:class:`typing.Protocol`): any object with the right methods
qualifies, no base class needed.

- :class:`ImportanceScorer`: ``name`` and ``score(content) -> float`` (0 to 10);
  :class:`~htm_core.enrich.RuleImportanceScorer`, :class:`~htm_core.enrich.LLMImportanceScorer`.
- :class:`Tagger`: ``name`` and ``tag(content) -> list[str]``;
  :class:`~htm_core.enrich.RuleTagger`, :class:`~htm_core.enrich.LLMTagger`.
- :class:`BatchTagger`: ``tag_many(contents) -> list[list[str]]``; ``LLMTagger``.
- :class:`SummaryWriter`: ``summarise(texts) -> str``; :class:`~htm_core.enrich.Summariser`.
- :class:`ModelBacked`: ``usage``, an :class:`~htm_core.enrich.LLMUsage`; every LLM enricher.

The one rule that tells enrichers apart: an enricher is *model-backed* when it has a
``usage`` counter (it is a :class:`ModelBacked`). A model-backed enricher is slow and runs
in background jobs, never inside ``add``; any other enricher runs inline. A tagger that is
also a :class:`BatchTagger` gets a claimed batch of tag jobs in one request.

>>> from htm_core.enrich import LLMTagger, RuleTagger
>>> isinstance(RuleTagger(), Tagger), uses_model(RuleTagger())
(True, False)
>>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
>>> tagger = LLMTagger(FakeListChatModel(responses=["[]"]))
>>> isinstance(tagger, BatchTagger), uses_model(tagger)
(True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .llm import LLMUsage

__all__ = ["BatchTagger", "ImportanceScorer", "ModelBacked", "SummaryWriter", "Tagger", "uses_model"]


@runtime_checkable
class ImportanceScorer(Protocol):
    """Scores how important a memory is, from 0 to 10."""

    name: str

    def score(self, content: str) -> float:
        """The importance of ``content``."""
        ...


@runtime_checkable
class Tagger(Protocol):
    """Proposes hierarchical tags for a memory."""

    name: str

    def tag(self, content: str) -> list[str]:
        """Valid tags for ``content`` (possibly none)."""
        ...


@runtime_checkable
class BatchTagger(Protocol):
    """A tagger that can also tag several memories in one request."""

    def tag_many(self, contents: Sequence[str]) -> list[list[str]]:
        """Tags for each of ``contents``, in order."""
        ...


@runtime_checkable
class SummaryWriter(Protocol):
    """Writes one compact summary of several memories' texts."""

    def summarise(self, texts: Sequence[str]) -> str:
        """A summary of ``texts``."""
        ...


@runtime_checkable
class ModelBacked(Protocol):
    """An enricher that calls a model and counts its requests in ``usage``."""

    usage: LLMUsage


def uses_model(enricher: object) -> bool:
    """Whether ``enricher`` calls a model (and so must run in background jobs)."""
    return isinstance(enricher, ModelBacked)
