"""Never-forget, written once: forget hides a memory, restore brings it back, purge deletes
only what was forgotten first. Every step is logged in the same transaction.

:class:`Forgetting` writes through the backend's
:class:`~htm_core.store._sql.parts.Database` and :class:`~htm_core.store._sql.parts.Rows`;
what the backend keeps beside the table (SQLite's in-process vector index) follows through
its :class:`~htm_core.store._sql.parts.RowListener` parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import ConfirmationRequiredError, NotFoundError
from ...models import Memory
from .dialect import Dialect
from .parts import Database, LogLine, RowListener, Rows, Unhold

__all__ = ["Forgetting", "LogLine", "row_for_key"]

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
        return self._set_visible(key, robot, hidden_at=at)

    def restore(self, key: str, *, robot: str) -> Memory:
        """Undo ``forget``. Raises ``NotFoundError`` when no such memory exists."""
        return self._set_visible(key, robot, hidden_at=None)

    def _set_visible(self, key: str, robot: str, *, hidden_at: datetime | None) -> Memory:
        """Forget the memory at ``hidden_at`` (taking it out of every working memory), or
        restore it (None); logged, and nothing to do when it already is so."""
        hide = hidden_at is not None

        def write(conn: Connection, rid: int) -> Memory:
            mid, forgotten = row_for_key(conn, self._dialect, key)
            if forgotten != hide:
                conn.execute(text("UPDATE memories SET forgotten_at = :t WHERE id = :id"), {
                    "t": None if hidden_at is None else self._dialect.time_in(hidden_at),
                    "id": mid})
                if hide:
                    self._unhold(conn, [mid])
                self._db.log_lines(conn, [("forget" if hide else "restore", rid, mid, key, None)])
                self._changed(conn)
            return self._rows.fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        memory = self._db.writing_as(
            robot, "forgetting a memory" if hide else "restoring a memory", write)
        for listener in self._listeners:
            listener.after_visibility(memory.id, alive=not hide)
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


