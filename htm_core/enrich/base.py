"""What an enricher is: the protocols every importance scorer, tagger and summariser meets.

All are structural (:class:`typing.Protocol`): :class:`ImportanceScorer` (``score``),
:class:`Tagger` (``tag``), :class:`BatchTagger` (``tag_many``), :class:`SummaryWriter`
(``summarise``) and :class:`ModelBacked` (a ``usage`` counter). The one rule that tells
enrichers apart (:func:`uses_model`): a model-backed enricher runs in background jobs,
never inside ``add``; any other runs inline. See docs/enrichment.md.
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
    """Whether ``enricher`` calls a model (and so must run in background jobs): whether it
    has a ``usage`` counter (it is a :class:`ModelBacked`). A tagger that is also a
    :class:`BatchTagger` gets a claimed batch of tag jobs in one request.

    >>> from htm_core.enrich import LLMTagger, RuleTagger
    >>> isinstance(RuleTagger(), Tagger), uses_model(RuleTagger())
    (True, False)
    >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
    >>> tagger = LLMTagger(FakeListChatModel(responses=["[]"]))
    >>> isinstance(tagger, BatchTagger), uses_model(tagger)
    (True, True)
    """
    return isinstance(enricher, ModelBacked)
