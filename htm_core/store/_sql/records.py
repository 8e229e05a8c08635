"""Changes to memories that enrichment makes, written once: more tags, a new importance,
embedding failure marks.

Both are logged in their transaction and return the memory as it now is; the tags are
linked by the backend's :class:`~htm_core.store._sql.parts.Rows`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...models import Memory
from ..one_embedder import clear_failures, mark_failures
from .dialect import Dialect
from .forgetting import row_for_key
from .parts import Database, Rows

__all__ = ["RecordChanges"]


class RecordChanges:
    """``add_tags``, ``set_importance`` and the embedding failure marks of both SQL stores."""

    def __init__(self, db: Database, dialect: Dialect, rows: Rows) -> None:
        self._db, self._dialect, self._rows = db, dialect, rows

    def mark_embedding_failures(self, failures: Sequence[tuple[int, str]], embedder: str) -> None:
        """Mark memories ``(id, reason)`` whose text ``embedder`` rejects."""
        at = self._dialect.time_in(datetime.now(timezone.utc))
        self._db.writing("marking failed embeddings",
                         lambda conn: mark_failures(conn, failures, embedder, at))

    def retry_embedding_failures(self) -> int:
        """Clear every failure mark (the memories are pending again); return how many."""
        return self._db.writing("clearing failed embeddings", clear_failures)

    def add_tags(self, key: str, tags: Sequence[str], *, robot: str) -> Memory:
        """Link more tags to a memory (merged with its own; logged). ``NotFoundError``."""
        def write(conn: Connection, rid: int) -> Memory:
            mid, _forgotten = row_for_key(conn, self._dialect, key)
            self._rows.link_tags(conn, [(mid, list(tags))])
            self._db.log_lines(conn, [("tag", rid, mid, key, {"tags": list(tags)})])
            return self._rows.fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        return self._db.writing_as(robot, "tagging a memory", write)

    def set_importance(self, key: str, importance: float, *, robot: str) -> Memory:
        """Change a memory's importance (enrichment; logged). ``NotFoundError``."""
        def write(conn: Connection, rid: int) -> Memory:
            mid, _forgotten = row_for_key(conn, self._dialect, key)
            conn.execute(text("UPDATE memories SET importance = :i WHERE id = :id"),
                         {"i": importance, "id": mid})
            self._db.log_lines(conn, [("importance", rid, mid, key,
                                       {"importance": importance})])
            return self._rows.fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        return self._db.writing_as(robot, "setting importance", write)


