"""Word coverage: the share of a query's words that a memory's text holds, the measure
hybrid fusion scales full-text hits by (:mod:`htm_core.recall.fusion`) and hits' relevance
is made of (:mod:`htm_core.scoring`), written once for both.

A word is its Snowball English stem (PyStemmer), the stemmer family the full-text arms
use (Porter in SQLite's FTS5, Snowball English in PostgreSQL), so coverage, near-duplicate
grouping and the full-text search agree on when two words are one: "painted" and
"painting" are "paint", "adoption" and "adopted" are "adopt".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

import Stemmer

from ..text import fold, is_cjk

__all__ = ["coverage", "share", "sharer", "stem", "stems_of"]

_WORD = re.compile(r"[^\W_]+")
_STEMMER = Stemmer.Stemmer("english")
#: A contraction in n't, as a word of its own besides its parts ("can't": can, t, can't).
_CONTRACTION = re.compile(r"(?<![^\W_])([^\W_]+n)'t(?![^\W_])")


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of a folded word (``"painted"`` → ``"paint"``); a
    contraction (``"can't"``) is its own stem."""
    return word if word.endswith("'t") else str(_STEMMER.stemWord(word))


def coverage(query_words: Sequence[str], content: str) -> float:
    """The share of ``query_words`` in ``content``: a word counts when a word of the
    content has its stem (case and Latin diacritics ignored); a CJK run counts when the
    content holds it.

    >>> coverage(["adopted", "beagle", "puppy"], "We adopt a beagle")
    0.6666666666666666
    >>> coverage(["绿茶", "tea"], "我喜欢喝绿茶")
    0.5
    """
    runs = [w for w in query_words if is_cjk(w)]
    words = [stem(fold(w)) for w in query_words if not is_cjk(w)]
    return share(words, runs, content)


@functools.lru_cache(maxsize=4096)
def stems_of(content: str) -> frozenset[str]:
    """The stems of a memory's text; cached, as the same memories come up recall after
    recall (coverage, then the hits' scores)."""
    folded = fold(content)
    stems = frozenset(_STEMMER.stemWords(_WORD.findall(folded)))  # one call: hot
    if "'" not in folded and "\u2019" not in folded:
        return stems
    return stems | {m + "'t" for m in _CONTRACTION.findall(folded.replace("\u2019", "'"))}


def share(stems: Sequence[str], runs: Sequence[str], content: str) -> float:
    """The share of the word ``stems`` and CJK ``runs`` that ``content`` holds."""
    if not stems and not runs:
        return 0.0
    have = stems_of(content) if stems else set()
    held = sum(s in have for s in stems) + sum(r in content for r in runs)
    return held / (len(stems) + len(runs))


def sharer(stems: Sequence[str], runs: Sequence[str]) -> Callable[[str], float]:
    """``content -> share(stems, runs, content)``, for the many memories one query is
    measured against: distinct stems and no runs (the usual query) are counted by one set
    intersection per memory (the same count, so the same share)."""
    if not stems and not runs:
        return lambda content: 0.0
    if runs or len(set(stems)) < len(stems):
        return lambda content: share(stems, runs, content)
    wanted, n = frozenset(stems), len(stems)
    return lambda content: len(wanted.intersection(stems_of(content))) / n
