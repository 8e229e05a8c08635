"""Pieces shared by the SQL backends: URL handling, full-text query words, row mapping."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.engine import make_url

__all__ = ["COMMON_TERM_SHARE", "STOPWORDS", "chunks", "informative_terms", "mask_url", "query_terms"]

#: Words too common to help a full-text match; dropped from queries unless nothing is left.
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
)

_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """The plain words of a user query, lower-cased, stop words dropped (unless that is all).

    Only ``\\w`` runs survive, so quotes, operators (``AND``, ``NEAR``, ``*``, ``-``,
    parentheses) and other query-language syntax can never reach the database.
    """
    words = [w.lower() for w in _WORD.findall(query)]
    seen: dict[str, None] = {}
    for w in words:
        seen.setdefault(w, None)
    terms = list(seen)
    kept = [w for w in terms if w not in STOPWORDS]
    return kept or terms


#: A query word found in more than this share of all memories (a speaker's name in a chat
#: log, "user", "meeting" in meeting notes) says little; the full-text arm drops it.
COMMON_TERM_SHARE = 0.1
#: Below this many memories every query word is kept (the share is meaningless).
MIN_MEMORIES_FOR_COMMON = 200


def informative_terms(terms: Sequence[str], total: int,
                      doc_count: Callable[[str, int], int]) -> list[str]:
    """``terms`` without those in more than :data:`COMMON_TERM_SHARE` of ``total`` memories.

    ``doc_count(term, cap)`` counts the memories matching ``term``, stopping past ``cap``.
    A single-word query, a small store, or a query whose words are all common is returned
    unchanged, so full-text search never goes blind.

    >>> informative_terms(["ana", "vehicle"], 1000, lambda t, cap: 600 if t == "ana" else 3)
    ['vehicle']
    """
    terms = list(terms)
    if len(terms) < 2 or total < MIN_MEMORIES_FOR_COMMON:
        return terms
    cap = int(total * COMMON_TERM_SHARE)
    kept = [t for t in terms if doc_count(t, cap) <= cap]
    return kept or terms


def mask_url(url: str) -> str:
    """The URL with any password replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]
