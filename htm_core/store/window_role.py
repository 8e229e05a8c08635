"""The :class:`Windows` role of the ``LongTermStore`` protocol (kept beside ``base.py``,
which re-exports it): the window vectors of long memories (``htm_core._windows``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Windows"]


@runtime_checkable
class Windows(Protocol):
    """The window vectors of long memories (schema version 4; see ``htm_core._windows``).

    A memory with at least ``window_words`` spaces in its content gets, besides its whole
    vector, one vector per window of its text. Windows belong to their memory: they are
    visible exactly when it is (forgotten, filters), deleted when its content or vector
    changes (``update_memory``, ``reset_embeddings``) and when it is purged.
    """

    def set_windows(self, items: Sequence[tuple[int, str, Sequence[Sequence[float]]]]) -> int:
        """Replace the windows of memories ``(id, content hash, window vectors)``; a memory
        whose content hash differs by now (updated meanwhile), or that has no vector, is
        skipped. An empty list marks the memory as needing none (its text makes one window,
        or the embedder rejected its windows): a row without a vector, which no search
        sees and the catch-up skips. Returns how many memories were done."""
        ...

    def missing_windows(self, *, window_words: int, limit: int
                        ) -> list[tuple[int, str, str, dict[str, Any]]]:
        """Up to ``limit`` (id, content hash, content, metadata) of visible memories that
        have a vector, at least ``window_words`` spaces in their content and no windows,
        oldest first."""
        ...

    def window_count(self) -> int:
        """How many window vectors the store holds (every memory; marks not counted)."""
        ...
