"""The tag rule, in Python: a tag filter matches a tag that is one of its tags or below one.

Tags are hierarchical (``a:b:c``) and compare exactly (:mod:`htm_core.identity`); the stores
apply the same rule in SQL, this is the one Python copy (contexts, adapters).

>>> tag_matches("user:preferences", "user"), tag_matches("username", "user")
(True, False)
>>> tag_matches("chat:user:Ada", "chat:user:ada")
False
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .identity import has_prefix, same_id

__all__ = ["below", "carries_tag", "tag_filter", "tag_matches"]

#: What separates a tag's segments.
SEPARATOR = ":"


def below(tag: str) -> str:
    """The prefix of every tag below ``tag``: ``tag:``."""
    return tag + SEPARATOR


def tag_matches(tag: str, wanted: str) -> bool:
    """Whether ``tag`` is ``wanted`` or a tag below it."""
    return same_id(tag, wanted) or has_prefix(tag, below(wanted))


def carries_tag(tags: Iterable[str], wanted: Iterable[str]) -> bool:
    """Whether any of ``tags`` matches any of ``wanted`` (the recall tag filter's any-of).

    >>> carries_tag(("chat:session:ada", "chat:role:human"), ["chat:session"])
    True
    """
    return tag_filter(wanted)(tags)


def tag_filter(wanted: Iterable[str]) -> Callable[[Iterable[str]], bool]:
    """:func:`carries_tag` with ``wanted`` fixed: a predicate over a memory's tags, for
    testing many memories against one filter."""
    exact = frozenset(wanted)
    prefixes = tuple(below(w) for w in exact)
    return lambda tags: any(t in exact or has_prefix(t, prefixes) for t in tags)

