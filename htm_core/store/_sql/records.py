"""Changes to memories that enrichment makes, written once: more tags, a new importance,
embedding failure marks.

Both are logged in their transaction and return the memory as it now is. A backend
supplies how tags are linked (``_link_tags``); the rest is the shared hooks of
:class:`~htm_core.store._sql.catalogue.SQLCatalogue` and the row lookup of
:class:`~htm_core.store._sql.forgetting.SQLForgetting`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from datetime import datetime, timezone

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...models import Memory
from .._vectors import clear_failures, mark_failures
from .forgetting import SQLForgetting

__all__ = ["SQLRecordChanges"]


class SQLRecordChanges(SQLForgetting):
    """``add_tags``, ``set_importance`` and the embedding failure marks of both SQL stores."""

    @staticmethod
    @abstractmethod
    def _link_tags(conn: Connection, items: Sequence[tuple[int, Sequence[str]]]) -> None:
        """Link each ``(memory id, tags)`` (creating tags as needed; links already there stay)."""

    def mark_embedding_failures(self, failures: Sequence[tuple[int, str]], embedder: str) -> None:
        """Mark memories ``(id, reason)`` whose text ``embedder`` rejects."""
        at = self._time_in(datetime.now(timezone.utc))
        self._writing("marking failed embeddings",
                      lambda conn: mark_failures(conn, failures, embedder, at))

    def retry_embedding_failures(self) -> int:
        """Clear every failure mark (the memories are pending again); return how many."""
        return self._writing("clearing failed embeddings", clear_failures)

    def add_tags(self, key: str, tags: Sequence[str], *, robot: str) -> Memory:
        """Link more tags to a memory (merged with its own; logged). ``NotFoundError``."""
        def write(conn: Connection, rid: int) -> Memory:
            mid, _forgotten = self._row_for_key(conn, key)
            self._link_tags(conn, [(mid, list(tags))])
            self._log_lines(conn, [("tag", rid, mid, key, {"tags": list(tags)})])
            return self._fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        return self._writing_as(robot, "tagging a memory", write)

    def set_importance(self, key: str, importance: float, *, robot: str) -> Memory:
        """Change a memory's importance (enrichment; logged). ``NotFoundError``."""
        def write(conn: Connection, rid: int) -> Memory:
            mid, _forgotten = self._row_for_key(conn, key)
            conn.execute(text("UPDATE memories SET importance = :i WHERE id = :id"),
                         {"i": importance, "id": mid})
            self._log_lines(conn, [("importance", rid, mid, key, {"importance": importance})])
            return self._fetch(conn, "m.id = :id", {"id": mid}, False)[0]

        return self._writing_as(robot, "setting importance", write)
