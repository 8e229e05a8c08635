"""LLM enrichers: an importance scorer and a hierarchical tagger over any chat model.

A *chat model* is any object with ``invoke(prompt)`` returning an object with ``.content``
(every LangChain chat model qualifies); htm imports no framework here. Every answer is
validated; a malformed one is rejected and asked again at most ``max_retries`` times, then
:class:`~htm_core.enrich.errors.InvalidModelOutputError`. Calls, tokens and rejections are
counted in :class:`LLMUsage`. These enrichers run in background jobs (:mod:`htm_core.jobs`),
never inside ``add``; docs/enrichment.md ("Validated output").
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..errors import InvalidTagError, ValidationError, missing_extra
from ..jobs.ratelimit import TokenBucket
from ..validation import check_importance, check_int, check_tags
from .errors import InvalidModelOutputError, ModelCallError

__all__ = [
    "DEFAULT_CHAT_MODEL",
    "ChatModel",
    "LLMImportanceScorer",
    "LLMTagger",
    "LLMUsage",
    "ollama_chat_model",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The Ollama model :func:`ollama_chat_model` uses when none is named.
DEFAULT_CHAT_MODEL = "llama3.2"


@runtime_checkable
class ChatModel(Protocol):
    """Anything with ``invoke(prompt)`` returning an object with ``.content``."""

    def invoke(self, input: Any, /) -> Any:
        """Answer ``input`` (a string or a list of messages)."""
        ...


def ollama_chat_model(model: str = DEFAULT_CHAT_MODEL, *, base_url: str | None = None,
                      temperature: float = 0.0, timeout: float | None = 120.0) -> Any:
    """A ``langchain_ollama.ChatOllama`` (extra ``ollama``), the default enrichment model.

    The server is found as for embeddings (:func:`htm_core.ollama.ollama_url`: the argument,
    ``HTM_OLLAMA_URL``, ``OLLAMA_HOST``, then ``http://127.0.0.1:11434``).
    """
    try:
        from langchain_ollama import ChatOllama
    except ImportError:
        raise missing_extra("langchain-ollama", "ollama") from None
    from ..ollama import ollama_url

    return ChatOllama(model=model, base_url=ollama_url(base_url), temperature=temperature,
                      client_kwargs={"timeout": timeout})


class LLMUsage:
    """Thread-safe counters for one or more enrichers (share one to add them up).

    Attributes: ``calls`` (model requests), ``input_tokens`` / ``output_tokens`` (summed from
    the usage the model reports; 0 when it reports none), ``invalid_outputs`` (answers
    rejected by validation), ``errors`` (requests that raised), ``succeeded`` (results
    returned), ``gave_up`` (results abandoned after the retries).
    """

    FIELDS = ("calls", "input_tokens", "output_tokens", "invalid_outputs", "errors",
              "succeeded", "gave_up")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self.FIELDS, 0)

    def add(self, **counts: int) -> None:
        """Add to the named counters."""
        with self._lock:
            for name, value in counts.items():
                self._counts[name] += value

    def snapshot(self) -> dict[str, int]:
        """The counters now, as a plain dict."""
        with self._lock:
            return dict(self._counts)

    def __getattr__(self, name: str) -> int:
        if name in LLMUsage.FIELDS:
            with self._lock:
                return self._counts[name]
        raise AttributeError(name)

    def record(self, message: Any) -> None:
        """Count one answered request and the tokens ``message`` reports, if any."""
        tokens_in, tokens_out = _usage_of(message)
        self.add(calls=1, input_tokens=tokens_in, output_tokens=tokens_out)


def _usage_of(message: Any) -> tuple[int, int]:
    usage = getattr(message, "usage_metadata", None)
    if isinstance(usage, dict) and ("input_tokens" in usage or "output_tokens" in usage):
        return int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    meta = getattr(message, "response_metadata", None)
    if isinstance(meta, dict):
        if "prompt_eval_count" in meta or "eval_count" in meta:
            return int(meta.get("prompt_eval_count") or 0), int(meta.get("eval_count") or 0)
        token_usage = meta.get("token_usage")
        if isinstance(token_usage, dict):
            return (int(token_usage.get("prompt_tokens") or 0),
                    int(token_usage.get("completion_tokens") or 0))
    return 0, 0


def text_of(message: Any) -> str:
    """The text of a model's answer: ``.content`` as a string, text blocks joined."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    raise ModelCallError(
        f"the chat model returned {type(message).__name__} without text content; pass a chat "
        "model whose invoke() returns a message with .content")


class Rejected(ValueError):
    """A model answer failed validation (the message says why, and goes back to the model)."""


_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)


def strip_fence(text: str) -> str:
    """Remove one surrounding Markdown code fence, which models often add around JSON."""
    text = text.strip()
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


class LLMEnricher:
    """Shared machinery: ask, validate, re-ask with the reason, count.

    Args:
        chat_model: the model (``None``: :func:`ollama_chat_model`).
        max_retries: extra requests after a rejected answer (0-10).
        limiter: a :class:`~htm_core.jobs.TokenBucket` every request waits on.
        usage: counters to add to (share one across enrichers to sum them).
    """

    kind = "enrich"

    def __init__(self, chat_model: Any = None, *, max_retries: int = 2,
                 limiter: TokenBucket | None = None, usage: LLMUsage | None = None) -> None:
        check_int("max_retries", max_retries, 0, 10)
        self.chat_model = chat_model if chat_model is not None else ollama_chat_model()
        if not callable(getattr(self.chat_model, "invoke", None)):
            raise ValidationError(
                f"{type(self.chat_model).__name__} has no invoke(); pass a chat model such as "
                "langchain_ollama.ChatOllama(model=...)")
        self.max_retries = max_retries
        self.limiter = limiter
        self.usage = usage if usage is not None else LLMUsage()
        model_name = getattr(self.chat_model, "model", None) or getattr(self.chat_model, "model_name", None)
        self.name = f"llm:{model_name or type(self.chat_model).__name__}"

    @staticmethod
    def _retry_prompt(prompt: str, answer: str, reason: str) -> str:
        return (f"{prompt}\n\nYour previous answer was:\n{answer[:500]}\nIt was rejected: {reason}. "
                "Answer again, following the required format exactly and adding nothing else.")

    def _invoke(self, prompt: str) -> str:
        if self.limiter is not None:
            self.limiter.acquire()
        try:
            message = self.chat_model.invoke(prompt)
        except Exception as exc:
            self.usage.add(errors=1)
            raise ModelCallError(f"{self.kind}: the chat model failed: {exc}") from exc
        self.usage.record(message)
        return text_of(message)

    async def _ainvoke(self, prompt: str) -> str:
        if self.limiter is not None:
            await asyncio.to_thread(self.limiter.acquire)
        ainvoke = getattr(self.chat_model, "ainvoke", None)
        try:
            if ainvoke is not None:
                message = await ainvoke(prompt)
            else:
                message = await asyncio.to_thread(self.chat_model.invoke, prompt)
        except Exception as exc:
            self.usage.add(errors=1)
            raise ModelCallError(f"{self.kind}: the chat model failed: {exc}") from exc
        self.usage.record(message)
        return text_of(message)

    def _reject(self, answer: str, exc: Rejected, rejected: list[str]) -> str:
        self.usage.add(invalid_outputs=1)
        rejected.append(answer[:200])
        logger.info("%s: rejected model answer %r: %s", self.kind, answer[:200], exc)
        return str(exc)

    def _give_up(self, rejected: list[str], reason: str) -> InvalidModelOutputError:
        self.usage.add(gave_up=1)
        logger.warning("%s: %d malformed answers from %s, giving up; last: %s",
                       self.kind, len(rejected), self.name, reason)
        return InvalidModelOutputError(
            f"{self.kind}: {self.name} gave {len(rejected)} malformed answers ({reason}); nothing "
            "was stored. Use a stronger model, a lower temperature, or raise max_retries.", rejected)

    def run(self, prompt: str, parse: Callable[[str], T]) -> T:
        """Ask ``prompt`` until ``parse`` accepts the answer, at most ``max_retries + 1`` times."""
        rejected: list[str] = []
        ask, reason = prompt, ""
        for _ in range(self.max_retries + 1):
            answer = self._invoke(ask)
            try:
                value = parse(answer)
            except Rejected as exc:
                reason = self._reject(answer, exc, rejected)
                ask = self._retry_prompt(prompt, answer, reason)
                continue
            self.usage.add(succeeded=1)
            return value
        raise self._give_up(rejected, reason)

    async def arun(self, prompt: str, parse: Callable[[str], T]) -> T:
        """Async twin of :meth:`run` (``ainvoke`` when the model has it, else a thread)."""
        rejected: list[str] = []
        ask, reason = prompt, ""
        for _ in range(self.max_retries + 1):
            answer = await self._ainvoke(ask)
            try:
                value = parse(answer)
            except Rejected as exc:
                reason = self._reject(answer, exc, rejected)
                ask = self._retry_prompt(prompt, answer, reason)
                continue
            self.usage.add(succeeded=1)
            return value
        raise self._give_up(rejected, reason)


_NUMBER = re.compile(r"^\s*\**\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*\**\s*\.?\s*$")

IMPORTANCE_PROMPT = """\
Rate how important it is to remember the text below in future conversations with this user,
on a scale from 0 to 10: 0 is small talk, 3 an ordinary remark, 6 a useful fact, 8 a stated
preference, decision or commitment, 10 something critical that must never be forgotten.
Answer with the number only (for example: 7), nothing else.

Text:
\"\"\"
{content}
\"\"\""""


def parse_importance(answer: str) -> float:
    """Accept a bare number from 0 to 10 (``7``, ``7.5``, ``7/10``); reject anything else.

    >>> parse_importance(" 7/10 ")
    7.0
    """
    match = _NUMBER.match(strip_fence(answer))
    if not match:
        raise Rejected("the answer must be a single number from 0 to 10, with no other words")
    try:
        return check_importance(float(match.group(1)))
    except ValidationError:
        raise Rejected(f"{match.group(1)} is outside 0 to 10") from None


class LLMImportanceScorer(LLMEnricher):
    """Importance 0-10 from a chat model; an :class:`~htm_core.enrich.ImportanceScorer`.

    >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
    >>> scorer = LLMImportanceScorer(FakeListChatModel(responses=["a lot!", "8"]))
    >>> scorer.score("Remember that I am allergic to peanuts")
    8.0
    >>> scorer.usage.invalid_outputs
    1
    """

    kind = "importance"

    def score(self, content: str) -> float:
        """The importance of ``content``; raises ``InvalidModelOutputError`` after the retries."""
        return self.run(IMPORTANCE_PROMPT.format(content=content), parse_importance)

    async def ascore(self, content: str) -> float:
        """Async twin of :meth:`score`."""
        return await self.arun(IMPORTANCE_PROMPT.format(content=content), parse_importance)


TAG_PROMPT = """\
Assign hierarchical tags to the memory below so it can be found again by topic.
A tag is a path of lowercase segments joined by colons, most general first, such as
"database:postgresql:indexes" or "user:preferences:editor". Segments use only letters,
digits, "_", "-" or "."; at most {max_depth} segments per tag; give 1 to {max_tags} tags.
{hint}Answer with a JSON list of strings only, for example ["programming:python:testing"].

Memory:
\"\"\"
{content}
\"\"\""""


class LLMTagger(LLMEnricher):
    """Hierarchical tags from a chat model; a :class:`~htm_core.enrich.Tagger`.

    The answer must be a JSON list of tag strings (a surrounding code fence is tolerated;
    tags are lower-cased and inner spaces become ``-``). Every tag must pass
    :func:`htm_core.validation.check_tags`, have at most ``max_depth`` segments, and there
    may be at most ``max_tags``; otherwise the whole answer is rejected and re-asked.

    Args:
        chat_model: the model (``None``: :func:`ollama_chat_model`).
        max_retries: extra requests after a rejected answer.
        existing_tags: the ontology hint, tags the model should reuse when they fit: a
            list, or a callable returning one (called per request, e.g. the store's tags).
        max_hint_tags: at most this many existing tags go into the prompt.
        max_tags / max_depth: limits on the answer.

    >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
    >>> model = FakeListChatModel(responses=['```json\\n["Database:PostgreSQL:indexes"]\\n```'])
    >>> LLMTagger(model).tag("Our pgvector HNSW index is slow")
    ['database:postgresql:indexes']
    """

    kind = "tags"

    def __init__(self, chat_model: Any = None, *, max_retries: int = 2,
                 existing_tags: Iterable[str] | Callable[[], Iterable[str]] | None = None,
                 max_hint_tags: int = 50, max_tags: int = 5, max_depth: int = 4,
                 limiter: TokenBucket | None = None, usage: LLMUsage | None = None) -> None:
        super().__init__(chat_model, max_retries=max_retries, limiter=limiter, usage=usage)
        check_int("max_hint_tags", max_hint_tags, 0)
        check_int("max_tags", max_tags)
        check_int("max_depth", max_depth)
        self._existing = existing_tags if callable(existing_tags) else list(check_tags(existing_tags))
        self.max_hint_tags = max_hint_tags
        self.max_tags = max_tags
        self.max_depth = max_depth

    def existing_tags(self) -> list[str]:
        """The ontology hint for the next request (at most ``max_hint_tags``)."""
        source = self._existing() if callable(self._existing) else self._existing
        return list(source)[: self.max_hint_tags]

    def prompt(self, content: str) -> str:
        """The prompt sent for ``content``."""
        existing = self.existing_tags()
        hint = ""
        if existing:
            hint = ("Reuse these existing tags exactly when they fit, and only invent a new tag "
                    "when none does: " + ", ".join(existing) + "\n")
        return TAG_PROMPT.format(max_depth=self.max_depth, max_tags=self.max_tags, hint=hint,
                                 content=content)

    def parse(self, answer: str) -> list[str]:
        """Validate one answer: the tags, or :class:`Rejected` saying what is wrong."""
        try:
            data = json.loads(strip_fence(answer))
        except json.JSONDecodeError:
            raise Rejected("the answer is not a JSON list of strings") from None
        if not isinstance(data, list) or not all(isinstance(tag, str) for tag in data):
            raise Rejected("the answer must be a JSON list of strings")
        if len(data) > self.max_tags:
            raise Rejected(f"{len(data)} tags given; give at most {self.max_tags}")
        normalised = [re.sub(r"\s+", "-", tag.strip().lower()) for tag in data]
        try:
            tags = list(check_tags(normalised))
        except InvalidTagError as exc:
            raise Rejected(str(exc)) from None
        deep = [tag for tag in tags if tag.count(":") + 1 > self.max_depth]
        if deep:
            raise Rejected(f"{deep[0]!r} has more than {self.max_depth} segments")
        return tags

    def tag(self, content: str) -> list[str]:
        """Valid tags for ``content``; raises ``InvalidModelOutputError`` after the retries."""
        return self.run(self.prompt(content), self.parse)

    def prompt_many(self, contents: Sequence[str]) -> str:
        """The prompt sent for several memories at once (numbered from 1)."""
        numbered = "\n\n".join(f'Memory {i}:\n"""\n{text}\n"""' for i, text in enumerate(contents, 1))
        single = self.prompt("").rsplit("Memory:", 1)[0]
        return (single.replace("Answer with a JSON list of strings only, for example "
                               '["programming:python:testing"].',
                               "Answer with a JSON object only, mapping each memory's number to its "
                               'list of tags, for example {"1": ["programming:python"], "2": []}.')
                + numbered)

    def parse_many(self, answer: str, n: int) -> list[list[str]]:
        """Validate an answer for ``n`` memories: a JSON object ``{"1": [...], ..., "n": [...]}``."""
        try:
            data = json.loads(strip_fence(answer))
        except json.JSONDecodeError:
            raise Rejected("the answer is not a JSON object") from None
        if not isinstance(data, dict):
            raise Rejected("the answer must be a JSON object mapping memory numbers to tag lists")
        expected = {str(i) for i in range(1, n + 1)}
        if set(data) != expected:
            raise Rejected(f"the object must have exactly the keys {sorted(expected, key=int)}")
        return [self.parse(json.dumps(data[str(i)])) for i in range(1, n + 1)]

    def tag_many(self, contents: Sequence[str]) -> list[list[str]]:
        """Tags for several memories in one request (one answer validated as a whole).

        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> model = FakeListChatModel(responses=['{"1": ["database:sqlite"], "2": []}'])
        >>> LLMTagger(model).tag_many(["sqlite is locked", "hello"])
        [['database:sqlite'], []]
        """
        contents = list(contents)
        if len(contents) <= 1:
            return [self.tag(text) for text in contents]
        return self.run(self.prompt_many(contents), lambda answer: self.parse_many(answer, len(contents)))

    async def atag(self, content: str) -> list[str]:
        """Async twin of :meth:`tag`."""
        return await self.arun(self.prompt(content), self.parse)
