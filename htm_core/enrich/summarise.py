"""Summaries of what fell out of the context window, written by a chat model in a job.

When memories are evicted from working memory, a ``summary`` job carries their keys and
texts; :class:`Summariser` turns them into one compact paragraph (validated: non-empty, at
most ``max_chars``), which the application stores as a new memory whose metadata names its
sources (``source_keys``), so the context can carry "what happened before" in a few tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InvalidBudgetError, InvalidContentError
from ..jobs.ratelimit import TokenBucket
from ..validation import check_content, check_int
from .llm import LLMEnricher, LLMUsage, Rejected, strip_fence

__all__ = ["SUMMARY_PROMPT", "Summariser"]

SUMMARY_PROMPT = """\
Below are {n} earlier messages or notes from a conversation that no longer fit in the
context window. Write one compact summary of them in at most {max_words} words, keeping
names, numbers, decisions, preferences and open tasks, and dropping small talk. Write the
summary only, as plain prose with no heading or preamble.

{items}"""


class Summariser(LLMEnricher):
    """Writes a compact summary of several memories' texts.

    Args:
        chat_model: the model (``None``: the default Ollama model).
        max_chars: the longest summary accepted (a longer answer is rejected and re-asked).
        max_input_chars: the texts are cut to this many characters in total before asking.
        max_retries / limiter / usage: as for every LLM enricher.

    >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
    >>> model = FakeListChatModel(responses=["Alice moved the launch to Friday."])
    >>> Summariser(model).summarise(["Alice: hi", "Alice: let's move the launch to Friday"])
    'Alice moved the launch to Friday.'
    """

    kind = "summary"

    def __init__(self, chat_model: Any = None, *, max_chars: int = 800, max_input_chars: int = 12_000,
                 max_retries: int = 2, limiter: TokenBucket | None = None,
                 usage: LLMUsage | None = None) -> None:
        super().__init__(chat_model, max_retries=max_retries, limiter=limiter, usage=usage)
        check_int("max_chars", max_chars, 40)
        if check_int("max_input_chars", max_input_chars, 40) < max_chars:
            raise InvalidBudgetError(
                f"max_input_chars must be an integer of at least max_chars, got {max_input_chars!r}")
        self.max_chars = max_chars
        self.max_input_chars = max_input_chars

    def prompt(self, texts: Sequence[str]) -> str:
        """The prompt for ``texts`` (each checked; all cut to ``max_input_chars`` in total)."""
        if isinstance(texts, str) or not texts:
            raise InvalidContentError("give a non-empty list of texts to summarise")
        items, used = [], 0
        for text in texts:
            text = check_content(text).strip()
            room = self.max_input_chars - used
            if room <= 0:
                break
            item = text if len(text) <= room else text[:room] + " …"
            items.append(f"- {item}")
            used += len(item)
        return SUMMARY_PROMPT.format(n=len(items), max_words=max(10, self.max_chars // 7),
                                     items="\n".join(items))

    def parse(self, answer: str) -> str:
        """Accept a non-empty summary of at most ``max_chars`` characters."""
        summary = " ".join(strip_fence(answer).split())
        if not summary:
            raise Rejected("the summary is empty")
        if len(summary) > self.max_chars:
            raise Rejected(f"the summary has {len(summary)} characters; write at most {self.max_chars}")
        return summary

    def summarise(self, texts: Sequence[str]) -> str:
        """A summary of ``texts``; raises ``InvalidModelOutputError`` after the retries."""
        return self.run(self.prompt(texts), self.parse)

    async def asummarise(self, texts: Sequence[str]) -> str:
        """Async twin of :meth:`summarise`."""
        return await self.arun(self.prompt(texts), self.parse)
