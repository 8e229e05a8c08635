"""Never-forget, written once: forget hides a memory, restore brings it back, purge deletes
only what was forgotten first. Every step is logged in the same transaction.

A backend subclass supplies how a write transaction runs for a robot
(:meth:`SQLForgetting._writing_as`), how log lines and deletes are written, and what it
keeps beside the table (SQLite's in-process vector index) in the after-commit hooks.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import ConfirmationRequiredError, NotFoundError
from ...models import Memory
from .catalogue import SQLCatalogue

__all__ = ["LogLine", "SQLForgetting"]

T = TypeVar("T")

#: One line of the operations log: (op, robot id, memory id, key, detail).
LogLine = tuple[str, "int | None", "int | None", "str | None", "dict[str, Any] | None"]


class SQLForgetting(SQLCatalogue):
    """``forget``, ``restore`` and ``purge`` of both SQL stores, over dialect hooks."""

    #: Appended to the row lookups of a write (PostgreSQL locks the rows it changes).
    _LOCK_ROWS: ClassVar[str] = ""

    # -- dialect hooks ---------------------------------------------------------------

    @abstractmethod
    def _writing(self, what: str, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` in one write transaction (all or nothing)."""

    @abstractmethod
    def _writing_as(self, robot: str, what: str, fn: Callable[[Connection, int], T]) -> T:
        """Run ``fn(conn, robot id)`` in one write transaction (all or nothing)."""

    @abstractmethod
    def _log_lines(self, conn: Connection, lines: Sequence[LogLine]) -> None:
        """Append ``lines`` to the operations log, in order."""

    @abstractmethod
    def _delete_rows(self, conn: Connection, ids: Sequence[int]) -> None:
        """Delete the memory rows ``ids`` (their tags and embeddings go with them)."""

    @staticmethod
    @abstractmethod
    def _unhold(conn: Connection, ids: Sequence[int]) -> None:
        """Take ``ids`` out of every robot's working memory."""

    def _visibility_changed(self, conn: Connection) -> None:
        """Inside the transaction that forgot, restored or purged rows."""

    def _purged(self, conn: Connection, ids: Sequence[int]) -> None:
        """Inside the transaction that purged ``ids``."""

    def _after_visibility(self, memory_id: int, *, alive: bool) -> None:
        """After the commit of a forget (``alive`` False) or a restore (True)."""

    def _after_purge(self, ids: Sequence[int]) -> None:
        """After the commit of a purge of ``ids``."""

    # -- never-forget ----------------------------------------------------------------

    def _row_for_key(self, conn: Connection, key: str) -> tuple[int, bool]:
        """(id, forgotten) of the memory under ``key``; ``NotFoundError`` if there is none."""
        row = conn.execute(text(
            "SELECT id, forgotten_at IS NOT NULL FROM memories WHERE key = :k"
            + self._LOCK_ROWS), {"k": key}).first()
        if row is None:
            raise NotFoundError(f"no memory with key {key!r}: it was never stored, or it has "
                                "been purged (a purge cannot be undone)")
        return int(row[0]), bool(row[1])

    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        """Hide the memory from recall, recoverably. Raises ``NotFoundError``."""
        def write(conn: Connection, rid: int) -> Memory:
            mid, forgotten = self._row_for_key(conn, key)
            if not forgotten:
                conn.execute(text("UPDATE memories SET forgotten_at = :t WHERE id = :id"),
                             {"t": self._time_in(at), "id": mid})
                self._unhold(conn, [mid])
                self._log_lines(conn, [("forget", rid, mid, key, None)])
                self._visibility_changed(conn)
            return self._fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        memory = self._writing_as(robot, "forgetting a memory", write)
        self._after_visibility(memory.id, alive=False)
        return memory

    def restore(self, key: str, *, robot: str) -> Memory:
        """Undo ``forget``. Raises ``NotFoundError`` when no such memory exists."""
        def write(conn: Connection, rid: int) -> Memory:
            mid, forgotten = self._row_for_key(conn, key)
            if forgotten:
                conn.execute(text("UPDATE memories SET forgotten_at = NULL WHERE id = :id"),
                             {"id": mid})
                self._log_lines(conn, [("restore", rid, mid, key, None)])
                self._visibility_changed(conn)
            return self._fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        memory = self._writing_as(robot, "restoring a memory", write)
        self._after_visibility(memory.id, alive=True)
        return memory

    def purge(self, *, robot: str, key: str | None = None) -> int:
        """Delete forgotten memories for good (one, or all); return how many."""
        def write(conn: Connection, rid: int) -> list[int]:
            if key is not None:
                mid, forgotten = self._row_for_key(conn, key)
                if not forgotten:
                    raise ConfirmationRequiredError(
                        f"memory {key!r} is not forgotten; forget(key, confirm=True) it before "
                        "purging")
                targets = [(mid, key)]
            else:
                targets = [(int(r[0]), str(r[1])) for r in conn.execute(text(
                    "SELECT id, key FROM memories WHERE forgotten_at IS NOT NULL "
                    "ORDER BY id" + self._LOCK_ROWS))]
            ids = [mid for mid, _ in targets]
            if targets:
                self._unhold(conn, ids)
                self._delete_rows(conn, ids)
                self._log_lines(conn, [("purge", rid, mid, mkey, None) for mid, mkey in targets])
                self._visibility_changed(conn)
                self._purged(conn, ids)
            return ids

        ids = self._writing_as(robot, "purging memories", write)
        self._after_purge(ids)
        return len(ids)
