"""Never-forget, written once: forget hides a memory, restore brings it back, purge deletes
only what was forgotten first. Every step is logged in the same transaction.

:class:`Forgetting` writes through the backend's
:class:`~htm_core.store._sql.parts.Database` and :class:`~htm_core.store._sql.parts.Rows`;
what the backend keeps beside the table (SQLite's in-process vector index) follows through
its :class:`~htm_core.store._sql.parts.RowListener` parts.
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import ClassVar, TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import ConfirmationRequiredError, NotFoundError
from ...models import Memory
from .catalogue import SQLCatalogue
from .chain import chain_dialect
from .dialect import Dialect
from .parts import Database, LogLine, RowListener, Rows, Unhold

__all__ = ["Forgetting", "LogLine", "SQLForgetting", "row_for_key"]

T = TypeVar("T")


def row_for_key(conn: Connection, dialect: Dialect, key: str) -> tuple[int, bool]:
    """(id, forgotten) of the memory under ``key``, its row locked for this write;
    ``NotFoundError`` if there is none."""
    row = conn.execute(text(
        "SELECT id, forgotten_at IS NOT NULL FROM memories WHERE key = :k"
        + dialect.lock_rows), {"k": key}).first()
    if row is None:
        raise NotFoundError(f"no memory with key {key!r}: it was never stored, or it has "
                            "been purged (a purge cannot be undone)")
    return int(row[0]), bool(row[1])


class Forgetting:
    """``forget``, ``restore`` and ``purge`` of both SQL stores."""

    def __init__(self, db: Database, dialect: Dialect, rows: Rows, *, unhold: Unhold,
                 listeners: Sequence[RowListener] = ()) -> None:
        self._db, self._dialect, self._rows = db, dialect, rows
        self._unhold = unhold
        self._listeners = tuple(listeners)

    def _changed(self, conn: Connection) -> None:
        for listener in self._listeners:
            listener.visibility_changed(conn)

    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        """Hide the memory from recall, recoverably. Raises ``NotFoundError``."""
        def write(conn: Connection, rid: int) -> Memory:
            mid, forgotten = row_for_key(conn, self._dialect, key)
            if not forgotten:
                conn.execute(text("UPDATE memories SET forgotten_at = :t WHERE id = :id"),
                             {"t": self._dialect.time_in(at), "id": mid})
                self._unhold(conn, [mid])
                self._db.log_lines(conn, [("forget", rid, mid, key, None)])
                self._changed(conn)
            return self._rows.fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        memory = self._db.writing_as(robot, "forgetting a memory", write)
        for listener in self._listeners:
            listener.after_visibility(memory.id, alive=False)
        return memory

    def restore(self, key: str, *, robot: str) -> Memory:
        """Undo ``forget``. Raises ``NotFoundError`` when no such memory exists."""
        def write(conn: Connection, rid: int) -> Memory:
            mid, forgotten = row_for_key(conn, self._dialect, key)
            if forgotten:
                conn.execute(text("UPDATE memories SET forgotten_at = NULL WHERE id = :id"),
                             {"id": mid})
                self._db.log_lines(conn, [("restore", rid, mid, key, None)])
                self._changed(conn)
            return self._rows.fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        memory = self._db.writing_as(robot, "restoring a memory", write)
        for listener in self._listeners:
            listener.after_visibility(memory.id, alive=True)
        return memory

    def purge(self, *, robot: str, key: str | None = None) -> int:
        """Delete forgotten memories for good (one, or all); return how many."""
        def write(conn: Connection, rid: int) -> list[int]:
            if key is not None:
                mid, forgotten = row_for_key(conn, self._dialect, key)
                if not forgotten:
                    raise ConfirmationRequiredError(
                        f"memory {key!r} is not forgotten; forget(key, confirm=True) it before "
                        "purging")
                targets = [(mid, key)]
            else:
                targets = [(int(r[0]), str(r[1])) for r in conn.execute(text(
                    "SELECT id, key FROM memories WHERE forgotten_at IS NOT NULL "
                    "ORDER BY id" + self._dialect.lock_rows))]
            ids = [mid for mid, _ in targets]
            if targets:
                self._unhold(conn, ids)
                self._rows.delete_rows(conn, ids)
                self._db.log_lines(conn, [("purge", rid, mid, mkey, None)
                                          for mid, mkey in targets])
                self._changed(conn)
                for listener in self._listeners:
                    listener.purged(conn, ids)
            return ids

        ids = self._db.writing_as(robot, "purging memories", write)
        for listener in self._listeners:
            listener.after_purge(ids)
        return len(ids)


class SQLForgetting(SQLCatalogue):
    """:class:`Forgetting` for a store built as a class chain, over its hooks."""

    #: Appended to the row lookups of a write (``Dialect.lock_rows``).
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

    @functools.cached_property
    def _forgetting(self) -> Forgetting:
        return Forgetting(self._chain, chain_dialect(type(self)), self._chain,
                          unhold=self._chain.unhold, listeners=[self._chain])

    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        return self._forgetting.forget(key, robot=robot, at=at)

    def restore(self, key: str, *, robot: str) -> Memory:
        return self._forgetting.restore(key, robot=robot)

    def purge(self, *, robot: str, key: str | None = None) -> int:
        return self._forgetting.purge(robot=robot, key=key)
