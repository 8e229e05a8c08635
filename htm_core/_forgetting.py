"""The facade's never-forget calls: forget (recoverable), restore, purge.

:class:`Forgetter` is the service ``HTM`` holds for them (its store, robot, resident set,
lock and clock); the rules themselves live in the store (``Forgetting`` role) and the
coherence of working memories in :class:`~htm_core.working.resident.ResidentSet`.
"""

from __future__ import annotations

from ._intake import confirm_forget, confirm_purge
from ._native import SharedLock
from .clock import Clock
from .models import Memory
from .store import LongTermStore
from .validation import check_key
from .working.resident import ResidentSet

__all__ = ["Forgetter"]


class Forgetter:
    """``forget``, ``restore`` and ``purge`` for one robot."""

    def __init__(self, store: LongTermStore, robot: str, *, resident: ResidentSet,
                 lock: SharedLock, clock: Clock) -> None:
        self._store = store
        self._robot = robot
        self._resident = resident
        self._lock = lock
        self._clock = clock

    def forget(self, key: str, *, confirm: bool = False) -> Memory:
        """Hide the memory under ``key`` (once ``confirm`` is True) and drop it from this
        robot's working memory, also when the key is gone; see :meth:`HTM.forget
        <htm_core.HTM.forget>`."""
        key = confirm_forget(key, confirm)
        with self._lock:
            try:
                memory = self._store.forget(key, robot=self._robot, at=self._clock())
            finally:  # also when the key is gone (purged by another robot): out of here too
                self._resident.forget(key)
        return memory

    def restore(self, key: str) -> Memory:
        """Bring back a forgotten memory; see :meth:`HTM.restore <htm_core.HTM.restore>`."""
        return self._store.restore(check_key(key), robot=self._robot)

    def purge(self, *, confirm: bool = False, key: str | None = None) -> int:
        """Delete forgotten memories for good; see :meth:`HTM.purge <htm_core.HTM.purge>`."""
        return self._store.purge(robot=self._robot, key=confirm_purge(confirm, key))
