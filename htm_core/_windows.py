"""Long memories embedded in windows: a fact said in passing is found by its own sentences.

A memory of at least ``window_words`` spaces (:func:`is_long`) is also embedded in windows:
runs of whole sentences of up to ``window_words`` words, overlapping by a sentence. The vector
arm scores a memory by the better of its whole vector and its best window. A long memory gets
its windows inline right after ``add`` / ``update`` (:func:`windows_for`), else by the
catch-up (:func:`fill_windows_once`) that runs with the filling of missing vectors. See
docs/embeddings.md ("Long texts") and docs/decisions.md ("Windows of long memories").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from .enrich.documents import embed_text
from .errors import EmbeddingError
from .store.base import Windows

__all__ = ["DEFAULT_WINDOW_WORDS", "fill_windows_once", "is_long", "split_windows",
           "window_plan", "windows_for"]

logger = logging.getLogger(__name__)

#: The default window size in words (measured on both development sets: see
#: docs/recall-quality.md, "Windows").
DEFAULT_WINDOW_WORDS = 20

_CODE = re.compile(r"(```.*?```)", re.S)
#: Where sentences end: the whitespace after ``.``, ``!`` or ``?`` (group 1), or a run of
#: newlines. Matched from the mark rather than behind it (``(?<=[.!?])\s+``): the search
#: then skips to the next mark or newline instead of trying every character.
_SENTENCE_END = re.compile(r"[.!?](\s+)|\n+")

Embed = Callable[[list[str]], Sequence[Any]]


def is_long(text: str, window_words: int) -> bool:
    """Whether ``text`` gets windows: at least ``window_words`` spaces (the stores select
    the memories still missing windows by the same count, in SQL).

    >>> is_long("a b c", 2), is_long("a b", 2)
    (True, False)
    """
    return text.count(" ") >= window_words


def _pieces(text: str) -> list[str]:
    """``text`` cut at each sentence end (:data:`_SENTENCE_END`), stripped, empty ones
    left out."""
    out: list[str] = []
    at = 0
    for end in _SENTENCE_END.finditer(text):
        cut = end.start(1)
        piece = text[at:end.start() if cut < 0 else cut].strip()
        if piece:
            out.append(piece)
        at = end.end()
    last = text[at:].strip()
    if last:
        out.append(last)
    return out


def _sentences(text: str) -> list[str]:
    if "```" not in text:  # no code block: the text is one part
        return _pieces(text)
    out: list[str] = []
    for part in _CODE.split(text):
        if part.startswith("```"):
            out.append(part.strip())
        else:
            out.extend(_pieces(part))
    return out


Span = tuple[int, int]


def _packed(sizes: Sequence[int], window_words: int) -> list[tuple[int, int]]:
    """Runs ``[start, end)`` of sentences of ``sizes`` words packed into windows."""
    runs: list[tuple[int, int]] = []
    start, count = 0, len(sizes)
    while start < count:
        end, words = start + 1, sizes[start]
        while end < count and words + sizes[end] <= window_words:
            words += sizes[end]
            end += 1
        runs.append((start, end))
        if end >= count:
            break
        start = max(start + 1, end - 1)
    return runs if len(runs) > 1 else []


def _runs(text: str, window_words: int) -> tuple[list[str], list[tuple[int, int]]]:
    """The sentences of ``text`` and the runs of them that make its windows (none when the
    text is not long or makes a single window)."""
    if not is_long(text, window_words):
        return [], []
    sentences = _sentences(text)
    return sentences, _packed([len(s.split()) for s in sentences], window_words)


def window_plan(text: str, window_words: int) -> tuple[list[str], list[Span]]:
    """The windows of ``text`` (:func:`split_windows`) and where each lies in ``text``:
    ``(start, end)`` character offsets from its first sentence's first character to its
    last sentence's last (the text between its sentences may hold newlines where the
    window's own text has a space).

    >>> window_plan("One two three. Four five. Six seven eight nine.", 6)[1]
    [(0, 25), (15, 47)]
    """
    sentences, runs = _runs(text, window_words)
    if not runs:
        return [], []
    spans: list[Span] = []
    at = 0
    for sentence in sentences:  # each a stripped piece of text, in order
        begin = text.find(sentence, at)
        spans.append((begin, begin + len(sentence)))
        at = begin + len(sentence)
    return ([" ".join(sentences[a:b]) for a, b in runs],
            [(spans[a][0], spans[b - 1][1]) for a, b in runs])


def split_windows(text: str, window_words: int) -> list[str]:
    """The windows of ``text``: whole sentences packed up to ``window_words`` words, each
    window starting with the last sentence of the one before; empty when the text is not
    long (:func:`is_long`) or makes a single window (its whole vector says it all).

    >>> split_windows("One two three. Four five. Six seven eight nine.", 6)
    ['One two three. Four five.', 'Four five. Six seven eight nine.']
    """
    sentences, runs = _runs(text, window_words)
    return [" ".join(sentences[a:b]) for a, b in runs]


#: Window vectors of texts from their spans: ``(texts, spans of each) -> vectors of each``
#: (:meth:`~htm_core._embedding.EmbeddingService.window_vectors`).
Pooled = Callable[[list[str], list[list[Span]]], Sequence[Sequence[Any]]]


def windows_for(items: Sequence[tuple[int, str, str, dict[str, Any]]], embed: Embed,
                window_words: int, *, probe: Callable[[], Any] | None = None,
                pooled: Pooled | None = None) -> list[tuple[int, str, list[Any]]]:
    """``(id, content hash, window vectors)`` for each ``(id, content hash, content,
    metadata)`` whose content is long; the windows of all of them embedded in one call:
    ``embed`` of every window's text, or ``pooled`` of the texts and their windows' spans
    when given (an embedder that makes window vectors from its pass over the whole text).

    A text that makes a single window gets an empty list (the store marks it as needing
    none, so the catch-up does not try it again). When the embedder rejects the batch,
    each memory is tried alone; one whose windows it rejects on their own gets an empty
    list too (its whole vector alone scores it) unless ``probe`` fails as well: then the
    embedder is down and the error is raised, nothing is written.
    """
    spans = pooled is not None  # only an embedder that pools windows needs their spans
    plans = [(mid, digest, text, *(window_plan(text, window_words) if spans
                                   else (split_windows(text, window_words), [])))
             for mid, digest, text in ((mid, digest, embed_text(content, metadata))
                                       for mid, digest, content, metadata in items
                                       if is_long(content, window_words))]
    try:
        groups = _embedded(plans, embed, pooled)
    except EmbeddingError:
        if len(plans) == 1:
            if probe is not None:
                probe()  # raises when the embedder is down
            logger.warning("the windows of memory %s cannot be embedded; its whole vector "
                           "alone scores it", plans[0][0])
            return [(plans[0][0], plans[0][1], [])]
        return [row for mid, digest, content, metadata in items
                for row in windows_for([(mid, digest, content, metadata)], embed, window_words,
                                       probe=probe, pooled=pooled)]
    return [(mid, digest, vectors) for (mid, digest, *_), vectors in zip(plans, groups,
                                                                        strict=True)]


def _embedded(plans: Sequence[tuple[int, str, str, list[str], list[Span]]], embed: Embed,
              pooled: Pooled | None) -> list[list[Any]]:
    """The window vectors of each plan ``(id, hash, text, windows, spans)``, in one call."""
    windowed = [p for p in plans if p[3]]
    if pooled is not None:
        made = iter(list(pooled([p[2] for p in windowed], [p[4] for p in windowed]))
                    if windowed else [])
        return [list(next(made)) if p[3] else [] for p in plans]
    texts = [t for p in windowed for t in p[3]]
    vectors = list(embed(texts)) if texts else []
    out, at = [], 0
    for p in plans:
        out.append(vectors[at:at + len(p[3])])
        at += len(p[3])
    return out


def fill_windows_once(store: Windows, embed: Embed, window_words: int, limit: int, *,
                      probe: Callable[[], Any] | None = None,
                      pooled: Pooled | None = None) -> int:
    """Give up to ``limit`` long memories that have a vector but no windows their windows;
    return how many got them."""
    batch = store.missing_windows(window_words=window_words, limit=limit)
    if not batch:
        return 0
    done = windows_for(batch, embed, window_words, probe=probe, pooled=pooled)
    return store.set_windows(done)
