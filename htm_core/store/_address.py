"""Reading a database address: a malformed URL is refused, a relative SQLite path resolved.

Anything that is not a ``postgresql://`` URL opens a SQLite file, so a mistyped URL used to
become a file in the current directory (``postgresql//u:pw@host/db`` made folders named after
the password), and a relative path named a different file from another directory. Here a
value that looks like a URL but is not a well-formed one is an error saying what is wrong
(credentials never shown), and a relative path or ``sqlite:///relative`` URL becomes
absolute against the current directory once, at open, so ``stats()``, the CLI and the logs
report the file actually used.

>>> import os
>>> resolve_sqlite("memories.db") == os.path.join(os.getcwd(), "memories.db")
True
>>> resolve_sqlite("postgresql//ana:s3cret@db.example/htm")
Traceback (most recent call last):
...
htm_core.errors.ValidationError: malformed database URL 'postgresql//***@db.example/htm': ...
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import ValidationError
from ._common import mask_url

__all__ = ["check_address", "resolve_sqlite"]

#: Schemes htm opens; one of them not followed by ``://`` is a typo, not a file name.
_KNOWN = ("postgresql", "postgres", "sqlite")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9.-]*)(\+[A-Za-z0-9_]+)?(:?/*)")
_FORMS = ("use postgresql://user:password@host:port/database for PostgreSQL, or a file path, "
          "sqlite:///path or ':memory:' for SQLite")


def _shown(value: str) -> str:
    """``value`` for a message: whatever stands before the last ``@`` (the credentials of a
    URL, however malformed) is replaced by ``***`` after the scheme."""
    if "@" not in value:
        return mask_url(value)
    head, host = value.rsplit("@", 1)
    match = _SCHEME.match(head)
    return f"{match.group(0) if match else ''}***@{host}"


def _malformed(value: str) -> str | None:
    """What is wrong with ``value`` as an address, or None when it is a path or a URL."""
    match = _SCHEME.match(value)
    if match is not None:
        scheme, separator = match.group(1).lower(), match.group(3)
        if scheme in _KNOWN and separator not in ("", "/") and not separator.startswith("://"):
            return f"'{scheme}' must be followed by '://'"
        if len(scheme) > 1 and separator.startswith(":/") and not separator.startswith("://"):
            return f"'{scheme}:' must be followed by '//'"
    first = value.split("/", 1)[0]
    if "@" in first and ":" in first.split("@", 1)[0]:
        return "it holds user:password@host but no scheme (postgresql://)"
    return None


def check_address(value: str) -> None:
    """Raise :class:`~htm_core.errors.ValidationError` when ``value`` looks like a database
    URL but is not a well-formed one (the message says what is wrong, credentials hidden)."""
    problem = _malformed(value)
    if problem is not None:
        raise ValidationError(f"malformed database URL {_shown(value)!r}: {problem}; {_FORMS}")


def resolve_sqlite(value: str) -> str:
    """A SQLite address (path or ``sqlite:`` URL, not ``:memory:``) with its path made
    absolute; a malformed URL raises :class:`~htm_core.errors.ValidationError`."""
    check_address(value)
    match = re.match(r"^(sqlite(?:\+\w+)?:///)([^?]*)(\?.*)?$", value)
    if match is not None:
        prefix, path, query = match.groups()
        if not path or path == ":memory:" or path.startswith("file:"):
            return value
        return f"{prefix}{_absolute(path)}{query or ''}"
    if value.startswith("sqlite:") or "://" in value:  # another scheme: sqlite_url refuses it
        return value
    return _absolute(value)


def _absolute(path: str) -> str:
    return os.path.abspath(Path(path).expanduser())
