"""SQLite never-forget: forget, restore and purge (purge needs a confirmation upstream)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text

from ...clock import to_timestamp
from ...models import Memory
from ._search import _SQLiteSearch


class _SQLiteForgetting(_SQLiteSearch):
    """Forget, restore and purge, keeping the vector index in step."""

    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        with self._write() as conn:
            rid = self._robot_id(conn, robot)
            row = self._row_for_key(conn, key)
            if row.forgotten_at is None:
                conn.execute(text("UPDATE memories SET forgotten_at = :t WHERE id = :id"),
                             {"t": to_timestamp(at), "id": row.id})
                self._unhold(conn, [row.id])
                self._log(conn, "forget", robot_id=rid, memory_id=row.id, key=key)
                self._bump_generation(conn)
        if self._index is not None:
            self._index.set_alive(row.id, False)
        memory = self.get(key, include_forgotten=True)
        assert memory is not None
        return memory

    def restore(self, key: str, *, robot: str) -> Memory:
        with self._write() as conn:
            rid = self._robot_id(conn, robot)
            row = self._row_for_key(conn, key)
            if row.forgotten_at is not None:
                conn.execute(text("UPDATE memories SET forgotten_at = NULL WHERE id = :id"),
                             {"id": row.id})
                self._log(conn, "restore", robot_id=rid, memory_id=row.id, key=key)
                self._bump_generation(conn)
        if self._index is not None:
            self._index.set_alive(row.id, True)
        memory = self.get(key)
        assert memory is not None
        return memory

    def purge(self, *, robot: str, key: str | None = None) -> int:
        with self._write() as conn:
            rid = self._robot_id(conn, robot)
            if key is not None:
                row = self._row_for_key(conn, key)
                if row.forgotten_at is None:
                    from ...errors import ConfirmationRequiredError

                    raise ConfirmationRequiredError(
                        f"memory {key!r} is not forgotten; forget(key, confirm=True) it before "
                        "purging")
                targets = [(row.id, key)]
            else:
                targets = [(r[0], r[1]) for r in conn.execute(text(
                    "SELECT id, key FROM memories WHERE forgotten_at IS NOT NULL"))]
            self._unhold(conn, [mid for mid, _ in targets])
            for mid, mkey in targets:
                conn.execute(text("DELETE FROM memories WHERE id = :id"), {"id": mid})
                self._log(conn, "purge", robot_id=rid, memory_id=mid, key=mkey)
            if targets:
                self._bump_generation(conn)
                # The ids of purged memories are never handed out again (see _add_many).
                high = max(int(self._meta(conn, "id_high_water") or 0), *(m for m, _ in targets))
                self._set_meta(conn, "id_high_water", str(high))
        if self._index is not None:
            for mid, _ in targets:
                self._index.remove(mid)
        return len(targets)
