"""The facade's never-forget calls: forget (recoverable), restore, purge.

:class:`NeverForget` is a part of :class:`~htm_core.htm.HTM` (like
:class:`~htm_core._listing.Listing`); the rules themselves live in the store
(``Forgetting`` role) and the coherence of working memories in
:class:`~htm_core.working.resident.ResidentSet`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from . import _intake
from .models import Memory
from .observability import instrumented
from .validation import check_key

if TYPE_CHECKING:
    from .htm import HTM


class NeverForget:
    """``forget``, ``restore`` and ``purge`` of :class:`~htm_core.htm.HTM`."""

    @instrumented("forget")
    def forget(self, key: str, *, confirm: bool = False) -> Memory:
        """Hide a memory from recall, recoverably (``restore``), until ``purge``.

        Raises :class:`~htm_core.errors.ConfirmationRequiredError` unless ``confirm=True``
        and :class:`~htm_core.errors.NotFoundError` for an unknown or purged key (the memory
        is then out of this robot's working memory too). Every working memory holding the
        memory, in any process, drops it from its next call on.
        """
        htm = cast("HTM", self)
        key = _intake.confirm_forget(key, confirm)
        with htm._lock:
            try:
                memory = htm._store.forget(key, robot=htm.robot, at=htm._clock())
            finally:  # also when the key is gone (purged by another robot): out of here too
                htm._resident.forget(key)
        return memory


    @instrumented("restore")
    def restore(self, key: str) -> Memory:
        """Bring back a forgotten memory. Raises ``NotFoundError`` for an unknown key."""
        htm = cast("HTM", self)
        return htm._store.restore(check_key(key), robot=htm.robot)


    def purge(self, *, confirm: bool = False, key: str | None = None) -> int:
        """Delete forgotten memories for good (all of them, or only ``key``).

        Only memories already forgotten are purged; returns how many were removed.
        """
        htm = cast("HTM", self)
        return htm._store.purge(robot=htm.robot, key=_intake.confirm_purge(confirm, key))
