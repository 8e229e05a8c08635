"""The full-text rules both backends follow: how a query becomes search terms.

One place decides what a query means, so SQLite (FTS5) and PostgreSQL (``tsvector``) find
the same memories: :func:`parse_query` turns a query into a :class:`TextQuery` of words,
phrases (words written together, ``v2.1``), CJK runs (matched as substrings) and negations
(kept for coverage), leaving out :data:`STOPWORDS` and keeping at most :data:`MAX_TERMS`
terms. :func:`fold` is the query side of the index's normalisation; :data:`PG_INDEX_TEXT`
the same in SQL for PostgreSQL. The rules: docs/concepts.md ("Full-text matching rules").
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CJK_GLOB",
    "CJK_REGEX",
    "MAX_TERMS",
    "NEGATIONS",
    "PG_INDEX_TEXT",
    "STOPWORDS",
    "TextQuery",
    "fold",
    "is_cjk",
    "merge_hits",
    "parse_query",
]

#: Words too common to help a full-text match: never search terms. The first block is
#: htm's own list; the second is PostgreSQL's English stop list (``english.stop``), which
#: its index leaves out, so a word in it could never match there.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if
    in into is it its itself just me more most my myself no nor not now of off on once
    only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves
    """.split()
) | frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what
    which who whom this that these those am is are was were be been being have has had
    having do does did doing a an the and but if or because as until while of at by for
    with about against between into through during before after above below to from up
    down in out on off over under again further then once here there when where why how
    all any both each few more most other some such no nor not only own same so than too
    very s t can will just don should now
    """.split()
)

#: Stop words that negate: kept as :attr:`TextQuery.negations` (docs/concepts.md, "Negations").
NEGATIONS = frozenset({"no", "nor", "not"})

#: Scripts written without spaces between words, matched as substrings: Hangul Jamo,
#: CJK symbols' letters (々〆〇), Hiragana, Katakana, Hangul compatibility Jamo, CJK
#: ideographs (extension A, unified, compatibility), Hangul syllables, half-width
#: Katakana, and the supplementary ideograph planes.
_CJK_RANGES = [(0x1100, 0x11FF), (0x3005, 0x3007), (0x3040, 0x30FF), (0x3130, 0x318F),
               (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF),
               (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x2FA1F)]

_CJK_CLASS = "".join(f"{chr(a)}-{chr(b)}" for a, b in _CJK_RANGES)
#: A SQLite ``GLOB`` pattern true for text holding a CJK character.
CJK_GLOB = f"*[{_CJK_CLASS}]*"
#: A PostgreSQL regular expression true for text holding a CJK character (escapes only,
#: so it can sit in any SQL string).
CJK_REGEX = "[" + "".join(
    (f"\\u{a:04x}-\\u{b:04x}" if b <= 0xFFFF else f"\\U{a:08x}-\\U{b:08x}")
    for a, b in _CJK_RANGES) + "]"

#: ASCII punctuation and symbols (``!``-``/``, ``:``-``@``, ``[``-`````, ``{``-``~``) as spaces.
_PG_NO_PUNCT = "regexp_replace(content, '[\\x21-\\x2f\\x3a-\\x40\\x5b-\\x60\\x7b-\\x7e]', ' ', 'g')"
#: The text PostgreSQL indexes (``to_tsvector('english', ...)`` of it): ASCII punctuation
#: as spaces, so its parser sees words as SQLite's tokenizer does (no URL, e-mail, path,
#: version or hyphenated-word tokens), and, for text that is not plain ASCII, Latin
#: diacritics removed as :func:`fold` removes them.
PG_INDEX_TEXT = (
    f"CASE WHEN octet_length(content) = char_length(content) THEN {_PG_NO_PUNCT} "
    f"ELSE normalize(regexp_replace(normalize({_PG_NO_PUNCT}, NFD), "
    "'([A-Za-z])[\\u0300-\\u036f]+', '\\1', 'g'), NFC) END")

#: At most this many terms (words, phrases and CJK runs) of a query are searched.
MAX_TERMS = 32

#: A contraction in n't (group 1: the word before the apostrophe) or a negating stop word.
_NEGATION = re.compile(r"(?<![^\W_])(?:([^\W_]+n)'t|(" + "|".join(sorted(NEGATIONS)) +
                       r"))(?![^\W_])")
_DIACRITICS = re.compile("([A-Za-z])[\u0300-\u036f]+")
_PART = re.compile(f"[{_CJK_CLASS}]+|[^\\W_{_CJK_CLASS}]+")
_CJK = re.compile(f"[{_CJK_CLASS}]")


def fold(text: str) -> str:
    """Lower-cased, with the diacritics of Latin letters removed.

    >>> fold("Café NAÏVE Привет")
    'cafe naive привет'
    """
    text = text.lower()
    if text.isascii():
        return text
    return unicodedata.normalize(
        "NFC", _DIACRITICS.sub(r"\1", unicodedata.normalize("NFD", text)))


@dataclass(frozen=True)
class TextQuery:
    """The searchable terms of a query.

    ``words``: folded words, or phrases of words joined by single spaces; ``runs``: CJK
    runs, matched as substrings of the content.
    """

    words: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    negations: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.words or self.runs)

    def flat_words(self) -> list[str]:
        """Every word of ``words`` (phrases split), in order, without repeats."""
        return list(dict.fromkeys(w for term in self.words for w in term.split()))

    def coverage_words(self) -> list[str]:
        """The words coverage counts: :meth:`flat_words` and the negations."""
        return list(dict.fromkeys([*self.flat_words(), *self.negations]))


@functools.lru_cache(maxsize=1024)
def parse_query(query: str) -> TextQuery:
    """The terms of a user query (see the module's rules); cached, as one recall asks for
    the same query's terms several times (each full-text arm, coverage).

    Only letters and digits survive, so no query-language syntax (quotes, ``AND``,
    ``NEAR``, ``*``, ``-``, parentheses) can reach the database.

    >>> parse_query("Kenji don't like v2.1 绿茶!")
    TextQuery(words=('kenji', 'like', 'v2 1'), runs=('绿茶',), negations=("don't",))
    >>> bool(parse_query("what is it? 🎉"))
    False
    """
    words: dict[str, None] = {}
    runs: dict[str, None] = {}
    folded = fold(query)
    negations = tuple(dict.fromkeys(
        m.group(1) + "'t" if m.group(1) else m.group(2)
        for m in _NEGATION.finditer(folded.replace("\u2019", "'"))))[:MAX_TERMS]
    for chunk in folded.split():
        if len(words) + len(runs) >= MAX_TERMS:
            break
        parts: list[str] = []
        for match in _PART.finditer(chunk):
            part = match.group()
            if _CJK.match(part):
                _add_phrase(words, parts)
                parts = []
                runs.setdefault(part, None)
            else:
                parts.append(part)
        _add_phrase(words, parts)
    kept = tuple(words)[:MAX_TERMS]  # the last chunk may have added several
    return TextQuery(kept, tuple(runs)[:MAX_TERMS - len(kept)], negations)


def _add_phrase(words: dict[str, None], parts: list[str]) -> None:
    kept = [i for i, p in enumerate(parts) if p not in STOPWORDS]
    if kept:
        words.setdefault(" ".join(parts[kept[0]:kept[-1] + 1]), None)


def merge_hits(words: Sequence[tuple[int, float]], runs: Sequence[tuple[int, float]],
               limit: int) -> list[tuple[int, float]]:
    """One ranking of the word hits (id, relevance) and the CJK-run hits (id, score >= 1).

    A query with only one kind keeps that kind's ranking. A mixed query adds to each
    memory's run score its word relevance squashed below 1 (r / (1 + r)), so holding a
    CJK run counts more than any word relevance; ties go to the lower id.

    >>> merge_hits([(1, 3.0), (2, 1.0)], [(2, 1.5)], 10)
    [(2, 2.0), (1, 0.75)]
    """
    if not runs:
        return list(words)[:limit]
    if not words:
        return list(runs)[:limit]
    score = dict(runs)
    for mid, relevance in words:
        score[mid] = score.get(mid, 0.0) + relevance / (1.0 + abs(relevance))
    return sorted(score.items(), key=lambda hit: (-hit[1], hit[0]))[:limit]


def is_cjk(text: str) -> bool:
    """Whether ``text`` holds a Chinese, Japanese or Korean character."""
    return _CJK.search(text) is not None

