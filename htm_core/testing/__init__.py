"""Tools for proving a long-term store backend: the conformance suite and an in-memory store.

- :class:`StoreConformance`: the tests every ``LongTermStore`` passes, to subclass in a
  backend's own test suite (needs ``pytest``; imported when first named);
- :class:`InMemoryStore`: every role of the store protocol over plain Python objects, for
  tests of code that consumes a store (one process; nothing is kept after ``close``);
- :func:`working_memories`: what a robot's persisted working memory holds, read from a store.
"""

from __future__ import annotations

from typing import Any

from ..models import Memory
from ..store.base import WorkingSet
from .memory_store import InMemoryStore

__all__ = ["CAPABILITIES", "InMemoryStore", "StoreConformance", "working_memories"]


def working_memories(store: WorkingSet, robot: str) -> list[Memory]:
    """The memories in ``robot``'s persisted working memory, in entry order (call
    ``HTM.flush()`` first to read what a facade has not written yet)."""
    return [row.memory for row in store.working_rows(robot)[1]]


def __getattr__(name: str) -> Any:
    """``StoreConformance`` and ``CAPABILITIES``, from the suite (which imports pytest)."""
    if name not in ("StoreConformance", "CAPABILITIES"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from . import conformance
    except ModuleNotFoundError as exc:
        if exc.name != "pytest":
            raise
        from ..errors import missing_extra

        raise missing_extra("pytest (for the conformance suite)", "dev") from exc
    return getattr(conformance, name)
