"""Settings: explicit arguments first, then ``HTM_*`` environment variables, then defaults.

:class:`Settings` holds what ``HTM(...)`` resolved; :func:`env_int` and :func:`env_float`
read a number from the environment (a malformed one is an
:class:`~htm_core.errors.InvalidBudgetError` naming the variable). Every variable, its
``HTM(...)`` argument and its default: docs/configuration.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import InvalidBudgetError

__all__ = ["DEFAULT_ROBOT", "DEFAULT_WORKING_MEMORY_TOKENS", "Settings", "env_float", "env_int"]

DEFAULT_ROBOT = "default"
DEFAULT_WORKING_MEMORY_TOKENS = 128_000


def env_int(name: str, default: int) -> int:
    """An integer environment variable, or ``default`` when unset."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidBudgetError(f"environment variable {name}={raw!r} must be an integer") from None


def env_float(name: str, default: float) -> float:
    """A float environment variable, or ``default`` when unset."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidBudgetError(f"environment variable {name}={raw!r} must be a number") from None


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Resolved settings of one :class:`~htm_core.HTM`."""

    robot: str
    database_url: str | None
    working_memory_tokens: int
    eviction: str
    context_margin: float
    embedder: str | None
    read_database_url: str | None = None

    @classmethod
    def resolve(
        cls,
        *,
        robot: str | None = None,
        database_url: str | None = None,
        working_memory_tokens: int | None = None,
        eviction: str | None = None,
        context_margin: float | None = None,
        embedder: str | None = None,
        read_database_url: str | None = None,
    ) -> Settings:
        """Fill every unset argument from the environment, then the defaults."""
        return cls(
            robot=robot or os.environ.get("HTM_ROBOT") or DEFAULT_ROBOT,
            database_url=database_url or os.environ.get("HTM_DATABASE_URL") or None,
            working_memory_tokens=(working_memory_tokens if working_memory_tokens is not None
                                   else env_int("HTM_WORKING_MEMORY_TOKENS",
                                                DEFAULT_WORKING_MEMORY_TOKENS)),
            eviction=eviction or os.environ.get("HTM_EVICTION") or "hybrid",
            context_margin=(context_margin if context_margin is not None
                            else env_float("HTM_CONTEXT_MARGIN", 0.10)),
            embedder=embedder or os.environ.get("HTM_EMBEDDER") or None,
            read_database_url=(read_database_url or os.environ.get("HTM_READ_DATABASE_URL")
                               or None),
        )
