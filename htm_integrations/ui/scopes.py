"""The users and sessions the scope tags name (:mod:`htm_core.scope`), read back from
tags: ``chat:user:<user>``, ``chat:user:<user>:session:<session>`` and
``chat:session:<session>``. Slugs are taken exactly, case and all."""

from __future__ import annotations

import re

from htm_core.scope import ROOT

__all__ = ["SESSION", "SLUG", "USER", "conversations_of", "sessions_of", "users_of"]

USER = f"{ROOT}:user:"
SESSION = f"{ROOT}:session:"
#: A slug as the scope tags hold it: a plain id, or ``h-`` and a hash.
SLUG = re.compile(r"[A-Za-z0-9_\-]{1,64}")


def users_of(tags: dict[str, int]) -> list[str]:
    """The user slugs the scope tags among ``tags`` name, sorted (exactly: case kept).

    >>> users_of({"chat:user:ada": 2, "chat:user:Ada:session:s1": 1, "project": 3})
    ['Ada', 'ada']
    """
    return sorted({t.split(":")[2] for t in tags if t.startswith(USER) and t.count(":") >= 2
                   and t.split(":")[2]})


def sessions_of(tags: dict[str, int], user: str | None) -> dict[str, int]:
    """The sessions of ``user`` (None: sessions without a user) with their counts of
    visible memories, from ``htm.tags()``.

    >>> sessions_of({"chat:user:ada:session:s1": 2, "chat:user:ada:tag:x": 1}, "ada")
    {'s1': 2}
    >>> sessions_of({"chat:session:s9": 4, "chat:user:ada:session:s1": 2}, None)
    {'s9': 4}
    """
    prefix = SESSION if user is None else f"{USER}{user}:session:"
    return {t[len(prefix):]: n for t, n in sorted(tags.items())
            if t.startswith(prefix) and t[len(prefix):] and ":" not in t[len(prefix):]}


def conversations_of(tags: tuple[str, ...] | list[str]) -> list[dict[str, str | None]]:
    """The users and sessions a memory's ``tags`` place it in, each as ``user`` and
    ``session`` slugs (either may be None), in the order of the tags.

    >>> conversations_of(["chat:user:Ada:session:s1", "chat:role:human", "chat:session:x"])
    [{'user': 'Ada', 'session': 's1'}, {'user': None, 'session': 'x'}]
    """
    out: list[dict[str, str | None]] = []
    for tag in tags:
        parts = tag.split(":")
        if tag.startswith(USER) and len(parts) == 3 and parts[2]:
            out.append({"user": parts[2], "session": None})
        elif tag.startswith(USER) and len(parts) == 5 and parts[3] == "session" and parts[4]:
            out.append({"user": parts[2], "session": parts[4]})
        elif tag.startswith(SESSION) and len(parts) == 3 and parts[2]:
            out.append({"user": None, "session": parts[2]})
    return out
