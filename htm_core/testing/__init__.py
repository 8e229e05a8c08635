"""Tools for proving a long-term store backend: the conformance suite and an in-memory store.

- :class:`StoreConformance`: the tests every ``LongTermStore`` passes, to subclass in a
  backend's own test suite (needs ``pytest``);
- :class:`InMemoryStore`: every role of the store protocol over plain Python objects, for
  tests of code that consumes a store (one process; nothing is kept after ``close``).
"""

from .conformance import CAPABILITIES, StoreConformance
from .memory_store import InMemoryStore

__all__ = ["CAPABILITIES", "InMemoryStore", "StoreConformance"]
