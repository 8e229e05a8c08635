"""A memory's kind, source and confidence as ``add``, ``update``, ``recall`` and ``list`` take them.

:func:`provenance` checks what a caller gives and fills in the kind the rules recognise
when none is given (:class:`~htm_core.consolidation.kinds.RuleKindClassifier`, no LLM);
:func:`provenance_filters` reads the kind, source and confidence filters of ``recall``
and ``list``. See docs/consolidation.md ("Kinds").
"""

from __future__ import annotations

import math
import re
from numbers import Real
from typing import Any

from .consolidation.kinds import DEFAULT_KIND, RuleKindClassifier, check_kind, check_kinds
from .errors import ValidationError
from .validation import check_filter

__all__ = ["MAX_SOURCE_LENGTH", "check_confidence", "check_kinds", "check_min_confidence",
           "check_source", "check_sources", "provenance", "provenance_filters",
           "source_if_valid"]

#: The longest ``source`` (characters).
MAX_SOURCE_LENGTH = 255

_RULES = RuleKindClassifier()
#: What a source may not hold: control characters, line separators, unpaired surrogates.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def check_source(source: Any) -> str | None:
    """``source``: None, or a non-blank string of at most :data:`MAX_SOURCE_LENGTH`
    characters with no control character and no unpaired surrogate (kept as given).

    >>> check_source("import:notes.md")
    'import:notes.md'
    """
    if source is None:
        return None
    if not isinstance(source, str) or not source.strip() or len(source) > MAX_SOURCE_LENGTH \
            or _UNPRINTABLE.search(source):
        raise ValidationError(
            f"source must be a non-blank string of at most {MAX_SOURCE_LENGTH} characters "
            f"without control characters (such as 'user' or 'import:notes.md'), or None; "
            f"got {source!r:.80}")
    return source


def source_if_valid(name: str) -> str | None:
    """``name`` as a memory's source when :func:`check_source` takes it, else None (a
    document's name may be longer; its chunks' metadata holds it whole)."""
    try:
        return check_source(name)
    except ValidationError:
        return None


def check_confidence(confidence: Any) -> float | None:
    """``confidence``: None, or a finite number from 0 to 1 (as a float).

    >>> check_confidence(1)
    1.0
    """
    if confidence is None:
        return None
    value = float(confidence) if isinstance(confidence, Real) \
        and not isinstance(confidence, bool) else math.nan
    if not 0.0 <= value <= 1.0:  # NaN fails too
        raise ValidationError(
            f"confidence must be a number from 0 to 1 (how sure the memory's kind and "
            f"content are), or None; got {confidence!r:.80}")
    return value


def provenance(content: str, kind: Any, source: Any, confidence: Any,
               ) -> tuple[str, str | None, float | None]:
    """``(kind, source, confidence)`` of a memory ``add`` is given, checked.

    Without a ``kind`` the rules decide: the kind they recognise in a plain first-person
    statement ("my name is", "I prefer", "remember that") with the rule's confidence
    unless one is given, else ``episodic`` with the confidence given (None when none is).
    ``source`` is kept as given.

    >>> provenance("I prefer green tea.", None, "user", None)
    ('preference', 'user', 0.85)
    >>> provenance("We met at noon.", None, None, None)
    ('episodic', None, None)
    """
    checked_source = None if source is None else check_source(source)
    checked_confidence = None if confidence is None else check_confidence(confidence)
    if kind is not None:
        return check_kind(kind), checked_source, checked_confidence
    found, sure = _RULES.classify(content)
    if found == DEFAULT_KIND:
        return DEFAULT_KIND, checked_source, checked_confidence
    return found, checked_source, sure if checked_confidence is None else checked_confidence




def check_sources(sources: Any) -> tuple[str, ...]:
    """A source filter: None (any source), one source or several, each checked by
    :func:`check_source` and kept exactly as given; in the order given, without repeats.

    >>> check_sources(["user", "User", "user"])
    ('user', 'User')
    """
    return check_filter(sources, _filter_source, what="sources", each="a source",
                        empty_means="any source")


def _filter_source(source: Any) -> str:
    if source is None:
        raise ValidationError("sources holds None; name each source to keep (such as 'user'), "
                              "or leave sources out (None) for any source")
    check_source(source)
    return str(source)


def check_min_confidence(min_confidence: Any) -> float | None:
    """A confidence filter: None (any confidence, or none), or a number from 0 to 1.

    >>> check_min_confidence(0.5)
    0.5
    """
    if min_confidence is None:
        return None
    try:
        return check_confidence(min_confidence)
    except ValidationError:
        raise ValidationError(
            f"min_confidence must be a number from 0 to 1 (only memories at least this sure "
            f"pass; one without a confidence never does), or None; "
            f"got {min_confidence!r:.80}") from None


def provenance_filters(kinds: Any, sources: Any, min_confidence: Any) -> dict[str, Any]:
    """The :class:`~htm_core.store.values.SearchFilters` fields ``kinds``, ``sources`` and
    ``min_confidence`` of a ``recall`` or ``list``, checked."""
    return {"kinds": check_kinds(kinds), "sources": check_sources(sources),
            "min_confidence": check_min_confidence(min_confidence)}
