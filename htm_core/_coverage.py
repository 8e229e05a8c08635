"""Word coverage: the share of a query's words that a memory's text holds, the measure
hybrid fusion scales full-text hits by (:mod:`htm_core.retrieval`) and hits' relevance
is made of (:mod:`htm_core.scoring`), written once for both."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from .store._text import fold, is_cjk

__all__ = ["coverage"]

_WORD = re.compile(r"[^\W_]+")
#: A contraction in n't, as a word of its own besides its parts ("can't": can, t, can't).
_CONTRACTION = re.compile(r"(?<![^\W_])([^\W_]+n)'t(?![^\W_])")


def _stem(word: str) -> str:
    """The first five letters; a contraction keeps its ``'t`` (``shouldn't``: ``shoul't``)."""
    return word[:-2][:5] + "'t" if word.endswith("'t") else word[:5]


def coverage(query_words: Sequence[str], content: str) -> float:
    """The share of ``query_words`` in ``content``: a word counts when a word of the
    content shares its first five letters (case and Latin diacritics ignored); a CJK run
    counts when the content holds it.

    >>> coverage(["adopted", "beagle", "puppy"], "We adopt a beagle")
    0.6666666666666666
    >>> coverage(["绿茶", "tea"], "我喜欢喝绿茶")
    0.5
    """
    runs = [w for w in query_words if is_cjk(w)]
    words = [_stem(fold(w)) for w in query_words if not is_cjk(w)]
    return _share(words, runs, content)


@functools.lru_cache(maxsize=4096)
def _stems_of(content: str) -> frozenset[str]:
    """The stems of a memory's text; cached, as the same memories come up recall after
    recall (coverage, then the hits' scores)."""
    folded = fold(content)
    stems = frozenset(w[:5] for w in _WORD.findall(folded))  # _stem, inlined: hot
    if "'" not in folded and "\u2019" not in folded:
        return stems
    return stems | {m[:5] + "'t" for m in _CONTRACTION.findall(folded.replace("\u2019", "'"))}


def _share(stems: Sequence[str], runs: Sequence[str], content: str) -> float:
    if not stems and not runs:
        return 0.0
    have = _stems_of(content) if stems else set()
    held = sum(s in have for s in stems) + sum(r in content for r in runs)
    return held / (len(stems) + len(runs))


def _sharer(stems: Sequence[str], runs: Sequence[str]) -> Callable[[str], float]:
    """``content -> _share(stems, runs, content)``, for the many memories one query is
    measured against: distinct stems and no runs (the usual query) are counted by one set
    intersection per memory (the same count, so the same share)."""
    if not stems and not runs:
        return lambda content: 0.0
    if runs or len(set(stems)) < len(stems):
        return lambda content: _share(stems, runs, content)
    wanted, n = frozenset(stems), len(stems)
    return lambda content: len(wanted.intersection(_stems_of(content))) / n
