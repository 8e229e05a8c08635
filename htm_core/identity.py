"""The identity rule: ids, keys and tags are compared exactly, byte for byte, on every path.

Two user, session, thread, namespace or document ids, two keys or two tags are the same
only when they are the same string: the same code points, so the same UTF-8 bytes. No
comparison folds case (``Ada`` is not ``ada``, ``README.md`` is not ``readme.md``),
normalises Unicode (NFC ``é`` is not NFD ``é``; Latin ``a`` is not Cyrillic ``а``) or
gives a character a meaning of its own (``_``, ``%``, ``*``, ``/`` are themselves).
A string starts with a prefix when its first ``len(prefix)`` code points are the prefix.

The rule holds in Python (:func:`same_id`, :func:`has_prefix`, and
:mod:`htm_core.tags`, which builds the tag hierarchy on them) and in SQL, where both
stores compare with ``=`` and select prefixes by :func:`prefix_range`: the half-open range
of the strings that start with a prefix, in code point order (SQLite's ``BINARY``
collation over UTF-8, PostgreSQL's ``COLLATE "C"``), which an index on the column can
serve. ``LIKE`` is never used for ids: SQLite's folds ASCII case and both treat ``_`` and
``%`` as wildcards.

>>> same_id("Ada", "ada")
False
>>> has_prefix("chat:Chat1:00000001", "chat:chat1:")
False
>>> prefix_range("chat:ada:")
('chat:ada:', 'chat:ada;')
"""

from __future__ import annotations

__all__ = ["has_prefix", "prefix_range", "same_id"]

#: The last code point; a prefix ending in it has a later successor (or none).
_LAST = 0x10FFFF
#: UTF-16 surrogates are not characters (no stored string holds one): skipped.
_SURROGATES = (0xD800, 0xDFFF)


def same_id(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are the same id (the same code points)."""
    return a == b


def has_prefix(value: str, prefix: str | tuple[str, ...]) -> bool:
    """Whether ``value`` starts with ``prefix`` (or one of a tuple of prefixes), exactly."""
    return value.startswith(prefix)


def prefix_range(prefix: str) -> tuple[str, str | None]:
    """``(low, high)``: a string starts with ``prefix`` exactly when ``low <= s < high`` in
    code point order (``high`` None: no upper bound, for a prefix of only U+10FFFF).

    ``high`` is the prefix with its last character replaced by the next one (after dropping
    trailing U+10FFFF): every string starting with the prefix sorts below it, and every
    string at or above the prefix that does not start with it sorts at or above it.

    >>> prefix_range("a_b%")
    ('a_b%', 'a_b&')
    >>> prefix_range("x\\U0010ffff")
    ('x\\U0010ffff', 'y')
    """
    head = prefix.rstrip(chr(_LAST))
    if not head:
        return prefix, None
    following = ord(head[-1]) + 1
    if _SURROGATES[0] <= following <= _SURROGATES[1]:
        following = _SURROGATES[1] + 1
    return prefix, head[:-1] + chr(following)
