"""Input checks shared by the working memory, the facade and the stores.

Each check returns the normalised value or raises the specific
:class:`~htm_core.errors.ValidationError` subclass with a message that says what to do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from numbers import Real
from typing import Any

from .errors import (
    InvalidBudgetError,
    InvalidContentError,
    InvalidImportanceError,
    InvalidKeyError,
    InvalidTagError,
    InvalidTokensError,
    ValidationError,
)

__all__ = [
    "MAX_CONTENT_BYTES",
    "MAX_KEY_LENGTH",
    "check_content",
    "check_filter",
    "check_float",
    "check_importance",
    "check_int",
    "check_key",
    "check_key_prefix",
    "check_limit",
    "check_max_tokens",
    "check_name",
    "check_tags",
    "check_tokens",
]

MAX_KEY_LENGTH = 255
#: The largest memory (and query) in UTF-8 bytes: 256 KiB, about 64,000 tokens. Larger text
#: cannot be stored on every backend (PostgreSQL's full-text ``tsvector`` of it can pass its
#: 1 MB limit), takes seconds to embed, and is cut by every embedding model anyway.
MAX_CONTENT_BYTES = 256 * 1024
MAX_TAG_LENGTH = 255
_SURROGATE = re.compile("[\ud800-\udfff]")
_TAG = re.compile(r"^[\w.\-]+(?::[\w.\-]+)*$")
#: Control characters (C0, DEL, C1) and the Unicode line and paragraph separators: in a name
#: they break log lines and reach terminals as escape sequences.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def check_content(content: Any) -> str:
    """Content must be a non-blank string with no NUL, no unpaired surrogate, at most 256 KiB."""
    if not isinstance(content, str):
        raise InvalidContentError(
            f"content must be a string, got {type(content).__name__}"
        )
    if not content.strip():
        raise InvalidContentError("content is empty or whitespace only; give some text")
    if "\x00" in content:
        raise InvalidContentError(
            "content contains a NUL character (\\x00), which databases cannot store; "
            "remove it or encode binary data first"
        )
    if _SURROGATE.search(content):
        raise InvalidContentError(
            "content contains an unpaired surrogate, which is not valid Unicode; "
            "decode your text with errors='replace' first"
        )
    if len(content) * 4 > MAX_CONTENT_BYTES and len(content.encode("utf-8")) > MAX_CONTENT_BYTES:
        raise InvalidContentError(
            f"content is {len(content.encode('utf-8')):,} bytes (UTF-8); a memory holds at most "
            f"{MAX_CONTENT_BYTES:,}: split it into several memories (for instance one per "
            "section or paragraph)"
        )
    return content


def check_filter(values: Any, check_one: Callable[[Any], str], *, what: str, each: str,
                 empty_means: str) -> tuple[str, ...]:
    """A filter of ``what`` (kinds, sources): None (no filter, an empty tuple), one value
    or several, each checked by ``check_one``; in the order given, without repeats. An
    empty list is refused: it would match nothing (``empty_means`` says what None does).
    """
    if values is None:
        return ()
    if isinstance(values, str):
        return (check_one(values),)
    if isinstance(values, (bytes, dict)) or not hasattr(values, "__iter__"):
        raise ValidationError(
            f"{what} must be {each}, a list of {what} or None, got {values!r:.80}")
    checked = tuple(dict.fromkeys(check_one(v) for v in values))
    if not checked:
        raise ValidationError(f"{what} is empty, so nothing could match; leave it out (None) "
                              f"for {empty_means}")
    return checked


def check_importance(importance: Any) -> float:
    """Importance must be a finite number from 0 to 10."""
    if isinstance(importance, bool) or not isinstance(importance, Real):
        raise InvalidImportanceError(
            f"importance must be a number from 0 to 10, got {importance!r}"
        )
    value = float(importance)
    if not math.isfinite(value) or not 0.0 <= value <= 10.0:
        raise InvalidImportanceError(
            f"importance must be a number from 0 to 10, got {importance!r}"
        )
    return value


def check_tokens(tokens: Any) -> int:
    """A token count must be a non-negative integer."""
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        if isinstance(tokens, float) and tokens.is_integer() and tokens >= 0:
            return int(tokens)
        raise InvalidTokensError(
            f"tokens must be a non-negative integer, got {tokens!r}"
        )
    if tokens < 0:
        raise InvalidTokensError(f"tokens must be a non-negative integer, got {tokens!r}")
    return tokens


def check_key(key: Any) -> str:
    """A key must be a non-blank string of at most 255 characters, without NUL."""
    if not isinstance(key, str) or not key.strip():
        raise InvalidKeyError(f"key must be a non-empty string, got {key!r}")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidKeyError(
            f"key is {len(key)} characters long; keys may have at most {MAX_KEY_LENGTH}"
        )
    if "\x00" in key or _SURROGATE.search(key):
        raise InvalidKeyError("key contains a NUL character or an unpaired surrogate")
    return key


def check_name(name: Any, *, what: str = "key") -> str:
    """A key or robot name to write: :func:`check_key`'s rules, and no control character
    (newline, tab, escape, DEL, C1) or line separator, which would reach logs and terminals.

    Lookups take :func:`check_key`, so a name written before this rule can still be read,
    forgotten and restored.
    """
    checked: str = check_key(name)
    found = _CONTROL.search(checked)
    if found:
        raise InvalidKeyError(
            f"{what} {checked[:40]!r} contains the control character {found.group()!r} at "
            f"position {found.start()}; {what}s may not hold newlines, tabs, escape sequences "
            "or other control characters: remove them")
    return checked


def check_key_prefix(prefix: Any) -> str | None:
    """A key prefix to list by: None, or a non-empty string without NUL, unpaired
    surrogates or control characters (no key holds them, so such a prefix selects nothing
    and one backend would fail on it)."""
    if prefix is None:
        return None
    if not isinstance(prefix, str) or not prefix:
        raise ValidationError(f"key_prefix must be a non-empty string or None, got {prefix!r}")
    if _SURROGATE.search(prefix) or _CONTROL.search(prefix):
        raise ValidationError(
            f"key_prefix {prefix[:40]!r} contains a NUL, control character or unpaired "
            "surrogate, which no key holds; give the prefix as printable text")
    return prefix


def check_tags(tags: Iterable[str] | str | None) -> tuple[str, ...]:
    """Tags are ``a:b:c`` paths of letters, digits, ``_``, ``-`` and ``.``; duplicates drop."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = (tags,)
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidTagError(f"tags must be strings, got {tag!r}")
        tag = tag.strip()
        if len(tag) > MAX_TAG_LENGTH or not _TAG.match(tag):
            raise InvalidTagError(
                f"invalid tag {tag!r}: use colon-separated segments of letters, digits, "
                "'_', '-' or '.', such as 'user:preferences:editor'"
            )
        if tag not in out:
            out.append(tag)
    return tuple(out)


def check_int(name: str, value: Any, low: int = 1, high: int | None = None, *,
              error: type[ValidationError] = InvalidBudgetError) -> int:
    """``value`` if it is an int (not a bool) from ``low`` to ``high`` (no upper bound when
    None), else ``error`` naming ``name``, the range and the value given."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        if high is not None:
            wanted = f"an integer from {low} to {high}"
        else:
            wanted = "a positive integer" if low == 1 else f"an integer of at least {low}"
        raise error(f"{name} must be {wanted}, got {value!r}")
    return value


def check_float(name: str, value: Any, low: float, high: float | None = None, *,
                above: bool = False, what: str = "a number",
                error: type[ValidationError] = InvalidBudgetError) -> float:
    """``float(value)`` if it is a finite real number (not a bool) of at least ``low`` (more
    than ``low`` when ``above``) and at most ``high``, else ``error`` naming ``name``, the
    range (``what`` says what the number is) and the value given."""
    number = float(value) if isinstance(value, Real) and not isinstance(value, bool) else math.nan
    ok = math.isfinite(number) and (number > low if above else number >= low) and (
        high is None or number <= high)
    if not ok:
        if high is not None:
            wanted = f"{what} from {low:g} to {high:g}"
        elif above and low == 0:
            wanted = f"a positive {what.removeprefix('a ')}"
        else:
            wanted = f"{what} {'above' if above else 'of at least'} {low:g}"
        raise error(f"{name} must be {wanted}, got {value!r}")
    return number


def check_max_tokens(max_tokens: Any, *, name: str = "max_tokens") -> int:
    """A token budget must be a positive integer."""
    return check_int(name, max_tokens)


def check_limit(limit: Any, *, maximum: int = 10_000) -> int:
    """A result limit must be an integer from 1 to ``maximum``."""
    return check_int("limit", limit, 1, maximum)


def check_margin(margin: Any) -> float:
    """A safety margin is a fraction from 0 (inclusive) to 1 (exclusive)."""
    if isinstance(margin, bool) or not isinstance(margin, Real):
        raise InvalidBudgetError(f"safety_margin must be a number in [0, 1), got {margin!r}")
    value = float(margin)
    if not (math.isfinite(value) and 0.0 <= value < 1.0):
        raise InvalidBudgetError(f"safety_margin must be a number in [0, 1), got {margin!r}")
    return value
