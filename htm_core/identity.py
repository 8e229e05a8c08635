"""The identity rule: ids, keys and tags are compared exactly, byte for byte, on every path.

:func:`same_id` and :func:`has_prefix` in Python, :func:`prefix_range` (the half-open range
of the strings that start with a prefix, in code point order) for the stores' SQL; see
docs/concepts.md ("Identity: ids, keys and tags compare exactly").

>>> same_id("Ada", "ada"), has_prefix("chat:Chat1:00000001", "chat:chat1:")
(False, False)
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
