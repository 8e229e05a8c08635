"""The strategies that write a digest with a chat model, and :func:`strategy_named`.

``simple`` asks once; ``hierarchical`` summarises chunks that fit the model's input, then
summaries of summaries, until everything fits one last request; ``map-reduce`` summarises
the chunks concurrently, then combines them in one request. Every request goes through
:class:`~htm_core.enrich.llm.LLMEnricher` (the rate limit, the usage counters, and the
re-asking of an answer that is empty or over its token target). docs/consolidation.md
compares them with the default, ``extractive``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..enrich.errors import EnrichmentError
from ..enrich.llm import LLMEnricher, LLMUsage, Rejected, ollama_chat_model, strip_fence
from ..errors import (
    InvalidBudgetError,
    InvalidContentError,
    UnknownStrategyError,
    ValidationError,
)
from ..jobs.ratelimit import TokenBucket
from ..tokens import TokenCounter, resolve_counter
from ..validation import check_content, check_int
from .base import Digest, DigestStrategy, SourceItem, check_target, source_items, sources_of
from .extractive import ExtractiveSummariser, cut_to, split_sentences

__all__ = ["DIGEST_PROMPT", "STRATEGIES", "DigestWriter", "HierarchicalSummariser",
           "MapReduceSummariser", "SimpleSummariser", "chat_model_of", "strategy_named"]

#: The names :func:`strategy_named` knows; ``extractive`` needs no model.
STRATEGIES = ("extractive", "simple", "hierarchical", "map-reduce")

DIGEST_PROMPT = """\
Below are {n} {what}, in the order they happened. Write one digest of them in at most
{words} words ({tokens} tokens), keeping names, numbers, dates, decisions, preferences and
open tasks, and dropping small talk and repetition. Write the digest only, as plain prose
with no heading or preamble.

{items}"""


@dataclass(frozen=True)
class _Answer:
    """A completion's text as a chat message's ``content``."""

    content: str


class _CompletionModel:
    """A model with ``complete(prompt)`` (a LlamaIndex LLM) seen as a chat model."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.model = getattr(getattr(llm, "metadata", None), "model_name", None)

    def invoke(self, prompt: Any, /) -> _Answer:
        return _Answer(str(getattr(self.llm.complete(prompt), "text", "")))


def chat_model_of(model: Any) -> Any:
    """A chat model for the enrichers' seam: a LangChain chat model (or anything with
    ``invoke``) as it is, a LlamaIndex LLM (``complete``) wrapped, or ``"ollama"`` /
    ``"ollama:<model>"`` for :func:`~htm_core.enrich.llm.ollama_chat_model`."""
    if model is None:
        raise ValidationError("a chat model is needed: pass a LangChain chat model, a "
                              "LlamaIndex LLM, or 'ollama' (optionally 'ollama:<model>')")
    if isinstance(model, str) and (model == "ollama" or model.startswith("ollama:")):
        name = model.partition(":")[2]
        return ollama_chat_model(name) if name else ollama_chat_model()
    if callable(getattr(model, "invoke", None)):
        return model
    if callable(getattr(model, "complete", None)):
        return _CompletionModel(model)
    raise ValidationError(
        f"{type(model).__name__} is not a chat model; pass a LangChain chat model, a "
        "LlamaIndex LLM, or 'ollama' (optionally 'ollama:<model>')")


class DigestWriter(LLMEnricher):
    """One request: texts in, a digest of at most ``target`` tokens out (validated).

    An answer that is empty or counts more than the target is rejected and asked again
    with the reason, at most ``max_retries`` more times; then ``InvalidModelOutputError``.
    """

    kind = "digest"

    def __init__(self, chat_model: Any, *, token_counter: Any = None, max_retries: int = 2,
                 limiter: TokenBucket | None = None, usage: LLMUsage | None = None) -> None:
        super().__init__(chat_model_of(chat_model), max_retries=max_retries, limiter=limiter,
                         usage=usage)
        self.counter: TokenCounter = resolve_counter(token_counter)

    def prompt(self, texts: Sequence[str], target: int, what: str = "notes") -> str:
        """The request for a digest of ``texts`` within ``target`` tokens."""
        items = "\n".join(f"- {' '.join(text.split())}" for text in texts)
        return DIGEST_PROMPT.format(n=len(texts), what=what, words=max(1, target * 3 // 4),
                                    tokens=target, items=items)

    def parse(self, answer: str, target: int) -> str:
        """Accept a non-empty digest of at most ``target`` tokens (whitespace collapsed)."""
        text = " ".join(strip_fence(answer).split())
        if not text:
            raise Rejected("the digest is empty")
        try:
            check_content(text)
        except InvalidContentError as exc:
            raise Rejected(f"the digest cannot be stored: {exc}") from None
        tokens = self.counter.count(text)
        if tokens > target:
            raise Rejected(f"the digest has {tokens} tokens; write at most {target} tokens "
                           f"(about {max(1, target * 3 // 4)} words)")
        return text

    def write(self, texts: Sequence[str], target: int, what: str = "notes") -> str:
        """The digest of ``texts``; raises ``InvalidModelOutputError`` after the retries."""
        return self.run(self.prompt(texts, target, what), lambda answer: self.parse(answer, target))


@dataclass(frozen=True)
class _Piece:
    """A text to summarise, its size and the positions of the items it stands for."""

    text: str
    tokens: int
    sources: frozenset[int]


def _split(text: str, limit: int, count: Callable[[str], int]) -> list[str]:
    """``text`` in consecutive parts of at most ``limit`` tokens (at sentence ends, else
    cut at a word)."""
    parts: list[str] = []
    size = 0  # the last part's tokens, summed over its sentences (a space counted as one)
    for sentence in split_sentences(text):
        while (tokens := count(sentence)) > limit:
            head = cut_to(sentence, limit, count)[:-1].rstrip() or sentence[:1]
            parts.append(head)
            size, sentence = limit, sentence[len(head):].lstrip()
        if parts and size + 1 + tokens <= limit:
            parts[-1], size = f"{parts[-1]} {sentence}", size + 1 + tokens
        elif sentence:
            parts.append(sentence)
            size = tokens
    return parts


def _pieces(items: Sequence[SourceItem], limit: int, count: Callable[[str], int]) -> list[_Piece]:
    """The non-blank items as pieces of at most ``limit`` tokens each."""
    return [_Piece(part, count(part), frozenset({i})) for i, item in enumerate(items)
            for part in _split(item.text, limit, count)]


def _union(chunk: Iterable[_Piece]) -> frozenset[int]:
    return frozenset(i for piece in chunk for i in piece.sources)


def _pack(pieces: Sequence[_Piece], limit: int) -> list[list[_Piece]]:
    """Consecutive pieces grouped greedily into chunks of at most ``limit`` tokens."""
    chunks: list[list[_Piece]] = []
    used = limit + 1
    for piece in pieces:
        if used + piece.tokens > limit:
            chunks.append([])
            used = 0
        chunks[-1].append(piece)
        used += piece.tokens
    return chunks


class _ModelStrategy:
    """What the model strategies share: the writer, the input limit and the final digest."""

    name = "model"

    def __init__(self, chat_model: Any, *, token_counter: Any = None, max_input_tokens: int = 6000,
                 max_retries: int = 2, limiter: TokenBucket | None = None,
                 usage: LLMUsage | None = None) -> None:
        self.writer = DigestWriter(chat_model, token_counter=token_counter,
                                   max_retries=max_retries, limiter=limiter, usage=usage)
        self.counter = self.writer.counter
        self.usage = self.writer.usage
        self.max_input_tokens = check_int("max_input_tokens", max_input_tokens, 16)

    def _digest(self, text: str, items: Sequence[SourceItem], used: Iterable[int]) -> Digest:
        return Digest(text, sources_of(items, used), self.counter.count(text), self.name)

    def _prepare(self, items: Iterable[Any], target_tokens: int
                 ) -> tuple[int, list[SourceItem], list[_Piece]]:
        target = check_target(target_tokens)
        ordered = source_items(items)
        return target, ordered, _pieces(ordered, self.max_input_tokens, self.counter.count)

    def _final(self, pieces: Sequence[_Piece], target: int, items: Sequence[SourceItem],
               what: str = "notes") -> Digest:
        text = self.writer.write([p.text for p in pieces], target, what) if pieces else ""
        return self._digest(text, items, (i for p in pieces for i in p.sources))


class SimpleSummariser(_ModelStrategy):
    """One request over all the sources; they must fit ``max_input_tokens`` together.

    Args:
        chat_model: a LangChain chat model, a LlamaIndex LLM or ``"ollama"``
            (:func:`chat_model_of`).
        token_counter: counts the target and the input (default ``cl100k_base``).
        max_input_tokens: the most source tokens one request may carry.
        max_retries / limiter / usage: as for every LLM enricher.
    """

    name = "simple"

    def summarise(self, items: Iterable[Any], target_tokens: int) -> Digest:
        """A digest of ``items`` of at most ``target_tokens`` tokens, in one request."""
        target, ordered, pieces = self._prepare(items, target_tokens)
        total = sum(p.tokens for p in pieces)
        if total > self.max_input_tokens:
            raise InvalidBudgetError(
                f"the sources hold {total} tokens, more than max_input_tokens="
                f"{self.max_input_tokens} fit in one request; use the 'hierarchical' or "
                "'map-reduce' strategy, or raise max_input_tokens if the model takes more")
        return self._final(pieces, target, ordered)


class HierarchicalSummariser(_ModelStrategy):
    """Summaries of chunks, then summaries of those, until all fit one last request.

    Each chunk holds at most ``max_input_tokens``; a chunk's summary is at most half its
    size (and at most the target). After ``max_rounds`` rounds of chunk summaries the
    rest must fit the last request; a round that does not shrink the text, or summaries
    that still do not fit, raise :class:`~htm_core.enrich.EnrichmentError`.
    Other arguments as for :class:`SimpleSummariser`.
    """

    name = "hierarchical"

    def __init__(self, chat_model: Any, *, max_rounds: int = 6, **options: Any) -> None:
        super().__init__(chat_model, **options)
        self.max_rounds = check_int("max_rounds", max_rounds, 1, 20)

    def summarise(self, items: Iterable[Any], target_tokens: int) -> Digest:
        """A digest of ``items`` of at most ``target_tokens`` tokens."""
        target, ordered, pieces = self._prepare(items, target_tokens)
        for round_ in range(self.max_rounds + 1):
            total = sum(p.tokens for p in pieces)
            if total <= self.max_input_tokens:
                return self._final(pieces, target, ordered, "summaries" if round_ else "notes")
            if round_ == self.max_rounds:
                break
            shorter = [self._summary(chunk, target) for chunk in _pack(pieces, self.max_input_tokens)]
            if sum(p.tokens for p in shorter) >= total:
                raise EnrichmentError(
                    f"hierarchical: a round of summaries did not shorten the text ({total} "
                    "tokens); raise max_input_tokens or use a model that follows the length limit")
            pieces = shorter
        raise EnrichmentError(
            f"hierarchical: the summaries still hold {sum(p.tokens for p in pieces)} tokens after "
            f"{self.max_rounds} round{'s' * (self.max_rounds != 1)}, more than "
            f"max_input_tokens={self.max_input_tokens}; raise max_rounds or max_input_tokens")

    def _summary(self, chunk: Sequence[_Piece], target: int) -> _Piece:
        size = sum(p.tokens for p in chunk)
        text = self.writer.write([p.text for p in chunk], min(target, max(size // 2, 16)))
        return _Piece(text, self.counter.count(text), _union(chunk))


class MapReduceSummariser(_ModelStrategy):
    """The chunks summarised concurrently (at most ``max_workers`` requests at a time),
    then one request combines their summaries into the digest.

    Each chunk's summary gets an equal share of ``max_input_tokens`` (at most the target),
    so the combining request fits; when the share would be under 16 tokens, ``summarise``
    raises ``InvalidBudgetError`` before any request. Other arguments as for
    :class:`SimpleSummariser`.
    """

    name = "map-reduce"

    def __init__(self, chat_model: Any, *, max_workers: int = 4, **options: Any) -> None:
        super().__init__(chat_model, **options)
        self.max_workers = check_int("max_workers", max_workers, 1, 64)

    def summarise(self, items: Iterable[Any], target_tokens: int) -> Digest:
        """A digest of ``items`` of at most ``target_tokens`` tokens."""
        target, ordered, pieces = self._prepare(items, target_tokens)
        chunks = _pack(pieces, self.max_input_tokens)
        if len(chunks) <= 1:
            return self._final(pieces, target, ordered)
        share = min(target, self.max_input_tokens // len(chunks))
        if share < 16:
            raise InvalidBudgetError(
                f"{len(chunks)} chunks leave each summary {share} tokens of max_input_tokens="
                f"{self.max_input_tokens} for the combining request; raise max_input_tokens or "
                "use the 'hierarchical' strategy")

        def summary(chunk: list[_Piece]) -> _Piece:
            text = self.writer.write([p.text for p in chunk], share)
            return _Piece(text, self.counter.count(text), _union(chunk))

        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(chunks)),
                                thread_name_prefix="htm-digest") as pool:
            mapped = list(pool.map(summary, chunks))
        return self._final(mapped, target, ordered, "summaries of consecutive parts")


def strategy_named(name: str, *, chat_model: Any = None, token_counter: Any = None,
                   **options: Any) -> DigestStrategy:
    """The strategy called ``name`` (one of :data:`STRATEGIES`).

    ``extractive`` takes only ``token_counter``; the others need ``chat_model`` (see
    :func:`chat_model_of`) and take their class's options (``max_input_tokens``,
    ``max_rounds``, ``max_workers``, ``max_retries``, ``limiter``, ``usage``).

    >>> strategy_named("extractive").name
    'extractive'
    """
    key = name.strip().lower().replace("_", "-") if isinstance(name, str) else ""
    if key == "extractive":
        return ExtractiveSummariser(token_counter, **options)
    makers = {"simple": SimpleSummariser, "hierarchical": HierarchicalSummariser,
              "map-reduce": MapReduceSummariser}
    maker = makers.get(key)
    if maker is None:
        raise UnknownStrategyError(
            f"unknown digest strategy {name!r}; use one of {', '.join(STRATEGIES)}")
    if chat_model is None:
        raise ValidationError(
            f"the {key!r} strategy writes with a chat model: pass chat_model= (a LangChain chat "
            "model, a LlamaIndex LLM, or 'ollama'), or use 'extractive', which needs none")
    strategy: DigestStrategy = maker(chat_model, token_counter=token_counter, **options)
    return strategy
