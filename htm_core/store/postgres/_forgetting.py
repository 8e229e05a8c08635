"""PostgreSQL never-forget: forget, restore and purge."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import (
    ConfirmationRequiredError,
)
from ...models import Memory
from ._search import _PostgresSearch


class _PostgresForgetting(_PostgresSearch):
    """Forget, restore and purge."""

    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        """Hide the memory from recall, recoverably. Raises ``NotFoundError``."""
        rid = self._robot_id(robot)

        def write(conn: Connection) -> Memory:
            mid, forgotten = self._row_for_key(conn, key)
            if not forgotten:
                conn.execute(text("UPDATE memories SET forgotten_at = :t WHERE id = :id"),
                             {"t": at, "id": mid})
                self._unhold(conn, [mid])
                self._log_many(conn, [("forget", rid, mid, key, None)])
            return self._fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        return self._run("forgetting a memory", write)

    def restore(self, key: str, *, robot: str) -> Memory:
        """Undo ``forget``. Raises ``NotFoundError`` when no such memory exists."""
        rid = self._robot_id(robot)

        def write(conn: Connection) -> Memory:
            mid, forgotten = self._row_for_key(conn, key)
            if forgotten:
                conn.execute(text("UPDATE memories SET forgotten_at = NULL WHERE id = :id"),
                             {"id": mid})
                self._log_many(conn, [("restore", rid, mid, key, None)])
            return self._fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        return self._run("restoring a memory", write)

    def purge(self, *, robot: str, key: str | None = None) -> int:
        """Delete forgotten memories for good (one, or all); return how many."""
        rid = self._robot_id(robot)

        def write(conn: Connection) -> int:
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
                    "ORDER BY id FOR UPDATE"))]
            if targets:
                self._unhold(conn, [t[0] for t in targets])
                conn.execute(text("DELETE FROM memories WHERE id = ANY(:ids)"),
                             {"ids": [t[0] for t in targets]})
                self._log_many(conn, [("purge", rid, mid, mkey, None) for mid, mkey in targets])
            return len(targets)

        return self._run("purging memories", write)
