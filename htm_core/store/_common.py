"""Pieces shared by the SQL backends: URL handling, full-text query words, row mapping."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import make_url

__all__ = ["STOPWORDS", "chunks", "mask_url", "query_terms"]

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


def mask_url(url: str) -> str:
    """The URL with any password replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]
