"""The tag rule, in Python: a tag filter matches a tag that is one of its tags or below one.

Tags are hierarchical (``a:b:c``): the filter ``user`` matches ``user`` and
``user:preferences:editor`` but not ``username``. Tags compare exactly, byte for byte, as
every id does (:mod:`htm_core.identity`): ``Project`` is not ``project``. The stores apply
the same rule in SQL inside every recall arm; this module is the one Python copy, for
filtering what is already in memory (working-memory contexts, adapters listing memories).

>>> tag_matches("user:preferences", "user")
True
>>> tag_matches("username", "user")
False
>>> tag_matches("chat:user:Ada", "chat:user:ada")
False
>>> carries_tag(("chat:session:ada", "chat:role:human"), ["chat:session"])
True
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
    """Whether any of ``tags`` matches any of ``wanted`` (the recall tag filter's any-of)."""
    return tag_filter(wanted)(tags)


def tag_filter(wanted: Iterable[str]) -> Callable[[Iterable[str]], bool]:
    """:func:`carries_tag` with ``wanted`` fixed: a predicate over a memory's tags, for
    testing many memories against one filter."""
    exact = frozenset(wanted)
    prefixes = tuple(below(w) for w in exact)
    return lambda tags: any(t in exact or has_prefix(t, prefixes) for t in tags)

