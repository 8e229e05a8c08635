"""The default digest, made without an LLM: the sources' most central sentences.

Each source is cut into sentences. A sentence's relevance is its centrality (its words'
TF-IDF vector against the centroid of all sentences', blended with its item's embedding
against the centroid of all items' when every item has one) plus a bonus for names and
numbers. Sentences are picked by maximal marginal relevance (relevance minus similarity to
those already picked), near-duplicates dropped, until the token target is reached; the
picked ones are given back in source order, with the items they came from. Words are htm's
full-text words (:mod:`htm_core.text`); CJK runs count as character pairs.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..text import fold, parse_query
from ..tokens import TokenCounter, resolve_counter
from .base import Digest, SourceItem, check_target, source_items, sources_of

__all__ = ["ExtractiveSummariser", "split_sentences"]

#: Weight of relevance against redundancy when picking (maximal marginal relevance).
MMR_LAMBDA = 0.7
#: Two sentences this similar (cosine of their words) are one if :func:`_near` agrees.
DUPLICATE = 0.9
#: Weight of the item embeddings' centrality, when every item has an embedding.
VECTOR_WEIGHT = 0.5
#: Added to the relevance of a sentence with a name (a capitalised word after its first),
#: and of one with a number: they carry what a digest must keep.
NAME_BONUS = 0.25
NUMBER_BONUS = 0.25

_LINES = re.compile(r"\n\s*")
_ENDED = re.compile(r"[.!?…。！？][\"'”’)\]]?$")
_BREAK = re.compile(r"(?:(?<=[.!?…])|(?<=[.!?…][\"'”’)\]]))\s+|(?<=[。！？])")
_LETTERS = re.compile(r"[^\W\d_]+")
_WORDS = re.compile(r"[^\W_]+")
_DIGITS = re.compile(r"\d+(?:[.,:/]\d+)*")
_parse = getattr(parse_query, "__wrapped__", parse_query)  # no cache: sentences are not queries


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, whitespace collapsed (blank ones dropped).

    >>> split_sentences("Ada ships v2.1 today. 她很高兴。Bob? \\n  ok")
    ['Ada ships v2.1 today.', '她很高兴。', 'Bob?', 'ok']
    """
    out = []
    for line in _LINES.split(text):
        out += [" ".join(part.split()) for part in _BREAK.split(line) if part.strip()]
    return out


@dataclass
class _Sentence:
    """One sentence of one item, with what choosing it needs."""

    text: str
    item: int
    order: int
    terms: tuple[str, ...]
    words: tuple[str, ...]
    numbers: frozenset[str]
    has_name: bool
    tokens: int = 0
    vector: dict[str, float] = field(default_factory=dict)
    relevance: float = 0.0


def _terms(sentence: str) -> tuple[str, ...]:
    query = _parse(sentence)
    pairs = [run[i:i + 2] for run in query.runs for i in range(max(1, len(run) - 1))]
    return (*query.flat_words(), *query.negations, *pairs)


def _sentence(text: str, item: int, order: int) -> _Sentence:
    letters = _LETTERS.findall(text)
    return _Sentence(text, item, order, _terms(text), tuple(_WORDS.findall(fold(text))),
                     frozenset(_DIGITS.findall(text)),
                     any(w[0].isupper() and len(w) > 1 for w in letters[1:]))


def _tfidf(sentences: Sequence[_Sentence]) -> None:
    """Give each sentence its unit TF-IDF vector over the terms of all of them."""
    df = Counter(term for s in sentences for term in set(s.terms))
    n = len(sentences)
    for s in sentences:
        weights = {t: c * (math.log((1 + n) / (1 + df[t])) + 1) for t, c in Counter(s.terms).items()}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        s.vector = {t: w / norm for t, w in weights.items()}


def _cosine(a: dict[str, float], b: dict[str, float]) -> float:
    if len(b) < len(a):
        a, b = b, a
    return sum(w * b.get(t, 0.0) for t, w in a.items())


def _near(a: _Sentence, b: _Sentence) -> bool:
    """Whether two similar sentences say the same: the same numbers, and all their words
    (stop words too: ``before`` / ``after``) the same but for one."""
    return a.numbers == b.numbers and len(set(a.words) ^ set(b.words)) <= 1


def _item_centrality(items: Sequence[SourceItem], speaking: set[int]) -> dict[int, float] | None:
    """Cosine of the embedding of each item in ``speaking`` (those with a sentence) to the
    centroid of theirs, or None when one of them has no embedding."""
    vectors = {i: items[i].embedding for i in sorted(speaking)}
    if not vectors or any(vector is None for vector in vectors.values()):
        return None
    dims = {len(vector or ()) for vector in vectors.values()}
    if len(dims) > 1:
        raise ValidationError(f"the items' embeddings have different dimensions {sorted(dims)}; "
                              "give vectors of one embedder, or none")
    matrix = np.array(list(vectors.values()), dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms == 0, 1.0, norms)
    centroid = unit.mean(axis=0)
    length = float(np.linalg.norm(centroid))
    cosines = unit @ centroid / length if length else np.zeros(len(vectors))
    return dict(zip(vectors, (float(x) for x in cosines), strict=True))


def _score(sentences: Sequence[_Sentence], items: Sequence[SourceItem]) -> None:
    """Set each sentence's relevance: centrality, then the name and number bonuses."""
    _tfidf(sentences)
    centroid: dict[str, float] = {}
    for s in sentences:
        for t, w in s.vector.items():
            centroid[t] = centroid.get(t, 0.0) + w / len(sentences)
    norm = math.sqrt(sum(w * w for w in centroid.values())) or 1.0
    by_item = _item_centrality(items, {s.item for s in sentences})
    for s in sentences:
        central = _cosine(s.vector, centroid) / norm
        if by_item is not None:
            central = (1 - VECTOR_WEIGHT) * central + VECTOR_WEIGHT * by_item[s.item]
        s.relevance = central + NAME_BONUS * s.has_name + NUMBER_BONUS * bool(s.numbers)


@dataclass
class _Pick:
    """The state of the greedy choice: what is picked and what each candidate overlaps."""

    chosen: list[_Sentence] = field(default_factory=list)
    merged: dict[int, list[int]] = field(default_factory=dict)  # id(chosen) -> items merged in
    used: int = 0


def _choose(candidates: list[_Sentence], target: int) -> _Pick:
    """Maximal marginal relevance within ``target`` tokens (a separator counted as one)."""
    pick = _Pick()
    closest = [(0.0, -1)] * len(candidates)  # (similarity, index in chosen) per candidate
    open_ = set(range(len(candidates)))
    postings: dict[str, list[int]] = {}
    for i, candidate in enumerate(candidates):
        for term in candidate.vector:
            postings.setdefault(term, []).append(i)
    while open_:
        fitting = [i for i in open_ if pick.used + candidates[i].tokens + len(pick.chosen) <= target]
        if not fitting:
            break
        best = max(fitting, key=lambda i: (MMR_LAMBDA * candidates[i].relevance
                                           - (1 - MMR_LAMBDA) * closest[i][0], -i))
        open_.discard(best)
        s, (similar, twin) = candidates[best], closest[best]
        if twin >= 0 and similar >= DUPLICATE and _near(s, pick.chosen[twin]):
            pick.merged.setdefault(id(pick.chosen[twin]), []).append(s.item)
            continue
        pick.chosen.append(s)
        pick.used += s.tokens
        for i, sim in _similarities(s, candidates, postings).items():
            if i in open_ and sim > closest[i][0]:
                closest[i] = (sim, len(pick.chosen) - 1)
    return pick


def _similarities(s: _Sentence, candidates: Sequence[_Sentence],
                  postings: dict[str, list[int]]) -> dict[int, float]:
    """The cosine of ``s`` to every candidate sharing a term with it (the others: 0)."""
    dots: dict[int, float] = {}
    for term, weight in s.vector.items():
        for i in postings.get(term, ()):
            dots[i] = dots.get(i, 0.0) + weight * candidates[i].vector[term]
    return dots


def _text(chosen: Iterable[_Sentence]) -> str:
    """The sentences in source order, each item's on a line of its own: after a full stop
    a space (nothing after ``。！？``), after a sentence without one a line break."""
    out, last = "", -1
    for s in sorted(chosen, key=lambda s: (s.item, s.order)):
        if out:
            out += "\n" if s.item != last or not _ENDED.search(out) else (
                "" if out[-1] in "。！？" else " ")
        out, last = out + s.text, s.item
    return out


def cut_to(text: str, target: int, count: Callable[[str], int]) -> str:
    """The longest start of ``text`` (at a word's end when there is one) that, with ``…``,
    counts at most ``target`` tokens; "" when not even one character fits."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count(text[:middle].rstrip() + "…") <= target:
            low = middle
        else:
            high = middle - 1
    head = text[:low]
    space = head.rfind(" ")
    if space > 0 and low < len(text) and not text[low].isspace():
        head = head[:space]
    return head.rstrip() + "…" if head.strip() else ""


class ExtractiveSummariser:
    """The default strategy: picks sentences (see the module docstring); no model needed.

    Args:
        token_counter: counts the target (anything :func:`htm_core.tokens.resolve_counter`
            takes; default ``cl100k_base``).

    >>> d = ExtractiveSummariser().summarise(["Ada moved the launch to May 3.", "ok", "ok"], 20)
    >>> d.text, [item.text for item in d.sources]
    ('Ada moved the launch to May 3.\\nok', ['Ada moved the launch to May 3.', 'ok', 'ok'])
    """

    name = "extractive"

    def __init__(self, token_counter: TokenCounter | Callable[[str], int] | str | None = None
                 ) -> None:
        self.counter = resolve_counter(token_counter)

    def _sentences(self, items: Sequence[SourceItem]) -> list[_Sentence]:
        """Every sentence with words, scored and counted."""
        found = [_sentence(text, i, n) for i, item in enumerate(items)
                 for n, text in enumerate(split_sentences(item.text))]
        found = [s for s in found if s.terms]
        if found:
            _score(found, items)
        for s in found:
            s.tokens = self.counter.count(s.text)
        return found

    def summarise(self, items: Iterable[Any], target_tokens: int) -> Digest:
        """A digest of ``items`` of at most ``target_tokens`` tokens (see the module docstring)."""
        target = check_target(target_tokens)
        ordered = source_items(items)
        every = self._sentences(ordered)
        first: dict[tuple[str, ...], _Sentence] = {}
        repeats: dict[int, list[int]] = {}  # id of the first -> items with the same words
        for s in every:
            kept = first.setdefault(s.words, s)
            repeats.setdefault(id(kept), []).append(s.item)
        pick = _choose(list(first.values()), target)
        chosen, text = self._fit(list(pick.chosen), target)
        if not text and first:
            best = max(first.values(), key=lambda s: s.relevance)
            text = cut_to(best.text, target, self.counter.count)
            chosen = [best] if text else []
        used = [i for s in chosen for i in [*repeats[id(s)], *pick.merged.get(id(s), [])]]
        return Digest(text, sources_of(ordered, used), self.counter.count(text), self.name)

    def _fit(self, chosen: list[_Sentence], target: int) -> tuple[list[_Sentence], str]:
        """``chosen`` and its text, the least relevant dropped until it counts <= target."""
        text = _text(chosen)
        while chosen and self.counter.count(text) > target:
            chosen.remove(min(chosen, key=lambda s: s.relevance))
            text = _text(chosen)
        return chosen, text
