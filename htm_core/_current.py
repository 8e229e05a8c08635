"""Questions about the present prefer the newest of their candidates.

"Which city do I live in now?", "Who is my current employer?", "What database is the
tracker on these days?": when a value changed, every statement of it matches the question
about as well, and the oldest (often the most explicit) tends to win. When the query says
it asks about the present (:data:`CUE`: *now*, *current(ly)*, *these days*, *nowadays*,
*latest*, *anymore*, *at the moment*, *next*), the first ``pool`` fused candidates join one
more RRF arm ranked by creation time, newest first, with weight ``current_weight``: among
hits that match alike, the newest statement comes first; a much better match stays ahead.
Other queries are untouched. Versions made by :meth:`HTM.update` need none of this (only
the current version is searched).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .store.base import Brief

if TYPE_CHECKING:
    from .retrieval import RankedId

__all__ = ["CUE", "asks_about_now", "prefer_current"]

#: Words that make a question about the present.
CUE = re.compile(r"\b(?:now|currently|current|these days|nowadays|latest|anymore|"
                 r"at the moment|next)\b", re.IGNORECASE)


def asks_about_now(query: str) -> bool:
    """Whether ``query`` asks about the present (a :data:`CUE` word).

    >>> asks_about_now("Which city do I live in now?"), asks_about_now("Where did I live?")
    (True, False)
    """
    return CUE.search(query) is not None


def prefer_current(fused: Sequence[RankedId], known: Mapping[int, Brief], *, pool: int,
                   weight: float, rrf_k: int) -> list[RankedId]:
    """``fused`` (best first) with ``weight / (rrf_k + r)`` added to the score of each of
    the first ``pool`` whose creation time ranks ``r``-th newest among them (``known``: their
    briefs), re-sorted."""
    head = [r.id for r in fused[:pool] if r.id in known]
    newest = sorted(head, key=lambda i: (known[i].created_at, i), reverse=True)
    bonus = {mid: weight / (rrf_k + rank) for rank, mid in enumerate(newest, start=1)}
    out = [replace(r, score=r.score + bonus.get(r.id, 0.0)) for r in fused]
    return sorted(out, key=lambda r: (-r.score, r.id))
