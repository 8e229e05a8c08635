"""Pieces shared by the SQL backends: URL handling, common full-text words, row mapping.

How a query becomes full-text terms is in :mod:`htm_core.text`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..secrets import mask_url

__all__ = ["COMMON_TERM_SHARE", "chunks", "informative_terms", "mask_url"]

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


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]
