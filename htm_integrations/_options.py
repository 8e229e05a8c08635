"""Keyword checking every adapter shares: a misspelt option is an error, never ignored.

Anything an adapter class does not list raises :class:`~htm_core.errors.ValidationError`
naming the unknown options, the closest known one, and the full list.

>>> try:
...     refuse_unknown("HTMRetriever", {"htm": 1, "limit": 2}, ["htm", "k", "tags"])
... except ValueError as exc:
...     print(exc)
HTMRetriever got unknown keyword argument(s) ['limit'] (did you mean 'k'?); it takes: htm, k, tags
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from htm_core.errors import ValidationError

__all__ = ["refuse_unknown"]

#: Options whose meaning in another library differs from htm's: the error says what to use.
_HINTS = {"limit": "k", "top_k": "k", "max_tokens": "token_limit"}


def refuse_unknown(owner: str, given: Iterable[str], known: Iterable[str]) -> None:
    """Raise ``ValidationError`` if ``given`` holds a name that is not in ``known``."""
    names = sorted(set(known))
    unknown = sorted(set(given) - set(names))
    if not unknown:
        return
    guesses = []
    for name in unknown:
        hint = _HINTS.get(name)
        close = [hint] if hint in names else difflib.get_close_matches(name, names, n=1)
        guesses.extend(repr(c) for c in close)
    guess = f" (did you mean {' or '.join(guesses)}?)" if guesses else ""
    raise ValidationError(f"{owner} got unknown keyword argument(s) {unknown}{guess}; "
                          f"it takes: {', '.join(names)}")
