"""Tools for proving a long-term store backend: the conformance suite and an in-memory store.

- :class:`StoreConformance`: the tests every ``LongTermStore`` passes, to subclass in a
  backend's own test suite (needs ``pytest``; imported when first named);
- :class:`InMemoryStore`: every role of the store protocol over plain Python objects, for
  tests of code that consumes a store (one process; nothing is kept after ``close``).
"""

from __future__ import annotations

from typing import Any

from .memory_store import InMemoryStore

__all__ = ["CAPABILITIES", "InMemoryStore", "StoreConformance"]


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
