"""The arms of hybrid recall: what each asks the store, the time window a query names,
which time arms say nothing, and the cosine similarities the vector arms found."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

import numpy as np

from ..clock import local_now
from ..querytime import QueryTime, query_timeframe
from ..store.base import ArmQuery, Search, SearchFilters
from ..text import parse_query
from .centering import center
from .config import RetrievalConfig

__all__ = ["TIME_ARM_SUFFIX", "hybrid_arms", "similarities", "without_idle_time_arms"]

_Hits = TypeVar("_Hits", bound=Sequence[tuple[int, Any]])

#: The suffix of the names of the arms a time phrase adds (``vector@time``...).
TIME_ARM_SUFFIX = "@time"


def hybrid_arms(store: Search, query: str, query_vector: Callable[[], Sequence[float]], *,
                limit: int, filters: SearchFilters, config: RetrievalConfig,
                now: datetime | None = None) -> tuple[dict[str, ArmQuery], QueryTime | None]:
    """The arms a hybrid recall asks the store for, by name, and the time the query names.

    Both arms run ``config.candidates`` deep with the (centered) query vector and the query's
    text less its time phrase; a time phrase adds the same two arms inside its window (and
    the window's least typical memories when weighted). :func:`search` fuses their answers;
    :func:`htm_core.explain.explain_recall` shows them.
    """
    depth = max(limit * config.candidates, 50 if config.candidates > 2 else 0)
    # An array, never a list of floats: the stores take arrays, and a list of numpy
    # scalars costs tens of microseconds to convert.
    given = np.asarray(query_vector(), dtype=np.float64)
    centroid = store.vector_centroid() if config.centering else None
    centered = center(given, centroid, config.typical_penalty) if config.centering else None
    vector: Sequence[float] = given if centered is None else centered  # type: ignore[assignment]
    when = query_timeframe(query, now or local_now()) if config.time_boost else None
    text = query.replace(when.phrase, " ") if when is not None else query
    window = _intersect(filters, when) if when is not None else None
    windows = config.window_words is not None
    asked = {"vector": ArmQuery(vector=vector, limit=depth, filters=filters, windows=windows),
             "fulltext": ArmQuery(text=text, limit=depth, filters=filters)}
    if window is not None:
        asked["vector@time"] = ArmQuery(vector=vector, limit=depth, filters=window,
                                        windows=windows)
        asked["fulltext@time"] = ArmQuery(text=text, limit=depth, filters=window)
        if centroid is not None and _atypical_arm_runs(store, text, filters, config):
            # The window's memories least like the average memory: events, not small talk.
            asked["atypical@time"] = ArmQuery(vector=[-x for x in centroid], limit=depth,
                                              filters=window, windows=False)
    return asked, when


def _atypical_arm_runs(store: Search, text: str, filters: SearchFilters,
                       config: RetrievalConfig) -> bool:
    """Whether a query naming a time, ``text`` once its time phrase is taken out, gets
    the ``atypical@time`` arm: weighted, and (with
    ``config.atypical_only_without_rare_words``) none of its words rare among the memories
    ``filters`` admit (:meth:`~htm_core.store.base.Search.rare_terms`), so that the window
    is all it has to go on ("What did Zoe do last May?", not "When did Zoe go camping
    in May?")."""
    if config.weights.get("atypical@time", 0.0) <= 0:
        return False
    words = parse_query(text).words if config.atypical_only_without_rare_words else ()
    return not words or not store.rare_terms(words, filters)


def similarities(*arms: Sequence[tuple[int, float]]) -> dict[int, float]:
    """Each memory's best cosine over the vector ``arms`` (at least -1)."""
    out = dict(arms[0])
    if len(out) == len(arms[0]) and (not out or min(out.values()) >= -1.0):
        arms = arms[1:]  # what the loop below makes of the first arm
    else:
        out = {}  # an arm listing a memory twice, or a cosine a rounding put below -1
    for hits in arms:
        for mid, score in hits:
            out[mid] = max(score, out.get(mid, -1.0))
    return out


def _intersect(filters: SearchFilters, window: QueryTime) -> SearchFilters | None:
    start = window.start if filters.start is None else max(filters.start, window.start)
    end = window.end if filters.end is None else min(filters.end, window.end)
    if start >= end:
        return None
    return replace(filters, start=start, end=end)


def without_idle_time_arms(found: Mapping[str, _Hits]) -> dict[str, _Hits]:
    """``found`` (each arm's (id, score) hits, by arm name) without the time arms when the
    query's window left out none of the candidates of the arms they repeat.

    A time arm (``vector@time``) is its arm (``vector``) run inside the window; when every
    hit of ``vector`` and of ``fulltext`` lies inside it (on a store whose memories are all
    from "today", say), the window tells the candidates nothing apart, and its arms would
    only lift whatever they happen to rank first (the least typical memory) above the
    memories that match the rest of the query.

    >>> without_idle_time_arms({"vector": [(1, 0.5)], "vector@time": [(1, 0.5)],
    ...                         "atypical@time": [(1, 0.2)]})
    {'vector': [(1, 0.5)]}
    """
    timed = [name for name in found if name.endswith(TIME_ARM_SUFFIX)]
    if not timed:
        return dict(found)
    for name in ("vector", "fulltext"):
        inside = {mid for mid, _ in found.get(name + TIME_ARM_SUFFIX, ())}
        if any(mid not in inside for mid, _ in found.get(name, ())):
            return dict(found)
    return {name: hits for name, hits in found.items() if name not in timed}
