"""Pieces shared by the SQL backends: URL handling, common full-text words, row mapping.

How a query becomes full-text terms is in :mod:`htm_core.text`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..secrets import mask_url

__all__ = ["COMMON_TERM_SHARE", "chunks", "informative_terms", "mask_url", "rare_terms"]

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
    cap = common_cap(total)
    kept = [t for t in terms if doc_count(t, cap) <= cap]
    return kept or terms


def common_cap(total: int) -> int:
    """The most memories of ``total`` a word may be found in and not be common."""
    return int(total * COMMON_TERM_SHARE)


def rare_terms(terms: Sequence[str], total: int,
               doc_count: Callable[[str, int], int]) -> list[str]:
    """The ``terms`` found in at least one and at most :data:`COMMON_TERM_SHARE` of
    ``total`` memories (``doc_count`` as for :func:`informative_terms`), whatever their
    number or the store's size: the words that say which memories a query wants. A word
    found nowhere says nothing of them, and a store of fewer than ten memories has none.

    >>> rare_terms(["ana", "camping", "happened"], 1000,
    ...            lambda t, cap: {"ana": 600, "camping": 4}.get(t, 0))
    ['camping']
    """
    cap = common_cap(total)
    return [t for t in terms if 0 < doc_count(t, cap) <= cap]


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]
