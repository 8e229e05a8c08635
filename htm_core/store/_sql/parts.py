"""The parts of a backend the shared SQL roles are built on, each a small Protocol.

- :class:`Database`: how a read or a write transaction runs, and the operations log;
- :class:`Rows`: the backend's SQL on memory rows (the row fetch, tag links, deletes);
- :class:`HistorySQL`: how :class:`~htm_core.store._sql.versions.Versions` writes a
  vector and searches superseded versions;
- :class:`RowListener`: what a backend keeps beside the tables (SQLite's in-process vector
  index, its id high-water mark), told of forgets, restores, purges and updates;
  :class:`NoListener` is one that keeps nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from sqlalchemy.engine import Connection

from ...models import Memory

__all__ = ["Database", "HistorySQL", "LogLine", "NoListener", "RowListener", "Rows", "Unhold"]

T = TypeVar("T")

#: One line of the operations log: (op, robot id, memory id, key, detail).
LogLine = tuple[str, "int | None", "int | None", "str | None", "dict[str, Any] | None"]

#: Take memory ids out of every robot's working memory (bumping those robots' versions).
Unhold = Callable[[Connection, Sequence[int]], None]


class Database(Protocol):
    """Transactions and the operations log, as the shared roles call them."""

    def reading(self, what: str, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` on a read connection; ``what`` names the read in error messages."""
        ...

    def writing(self, what: str, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` in one write transaction (all or nothing)."""
        ...

    def writing_as(self, robot: str, what: str, fn: Callable[[Connection, int], T]) -> T:
        """Run ``fn(conn, robot id)`` in one write transaction (all or nothing)."""
        ...

    def log_lines(self, conn: Connection, lines: Sequence[LogLine]) -> None:
        """Append ``lines`` to the operations log, in order."""
        ...


class Rows(Protocol):
    """The backend's SQL on memory rows that the shared roles call."""

    def fetch(self, conn: Connection, where: str, params: dict[str, Any],
              include_embedding: bool) -> list[Memory]:
        """The memories (with robot and tags) whose row matches ``where``."""
        ...

    def link_tags(self, conn: Connection, items: Sequence[tuple[int, Sequence[str]]]) -> None:
        """Link each ``(memory id, tags)`` (creating tags as needed; links already there stay)."""
        ...

    def delete_rows(self, conn: Connection, ids: Sequence[int]) -> None:
        """Delete the memory rows ``ids`` (their tags and embeddings go with them)."""
        ...


class HistorySQL(Protocol):
    """The backend's part of versions: vectors and the search of superseded versions."""

    def set_vector(self, conn: Connection, memory_id: int, vector: Sequence[float],
                   embedder: str) -> None:
        """Store ``vector`` (checked against the store's embedder) on the memory's row."""
        ...

    def vector_hits(self, conn: Connection, vector: Sequence[float], where: str,
                    params: dict[str, Any], limit: int) -> list[tuple[int, float]]:
        """Top ``limit`` (version row id, cosine) of versions whose memory passes ``where``."""
        ...

    def text_hits(self, conn: Connection, words: Sequence[str], where: str,
                  params: dict[str, Any], limit: int) -> list[tuple[int, float]]:
        """Top ``limit`` (version row id, relevance) of versions holding any of ``words``."""
        ...

    def next_history_id(self, conn: Connection) -> int | None:
        """The id of the next history row, None to let the database number it (a
        backend whose numbering can reuse the id of a purged row gives its own)."""
        ...


class RowListener(Protocol):
    """Told of changes to which memories are visible and to their text."""

    def visibility_changed(self, conn: Connection) -> None:
        """Inside the transaction that forgot, restored or purged rows, or changed a text."""
        ...

    def purged(self, conn: Connection, ids: Sequence[int]) -> None:
        """Inside the transaction that purged ``ids``."""
        ...

    def after_visibility(self, memory_id: int, *, alive: bool) -> None:
        """After the commit of a forget (``alive`` False) or a restore (True)."""
        ...

    def after_purge(self, ids: Sequence[int]) -> None:
        """After the commit of a purge of ``ids``."""
        ...

    def after_update(self, memory: Memory, vector: Sequence[float] | None,
                     text_changed: bool) -> None:
        """After the commit of an update (``vector``: the new text's, when it came with one)."""
        ...


class NoListener:
    """A :class:`RowListener` that keeps nothing beside the tables; a listener that
    reacts to only some changes takes the others from here."""

    def visibility_changed(self, conn: Connection) -> None:
        """Nothing to do."""

    def purged(self, conn: Connection, ids: Sequence[int]) -> None:
        """Nothing to do."""

    def after_visibility(self, memory_id: int, *, alive: bool) -> None:
        """Nothing to do."""

    def after_purge(self, ids: Sequence[int]) -> None:
        """Nothing to do."""

    def after_update(self, memory: Memory, vector: Sequence[float] | None,
                     text_changed: bool) -> None:
        """Nothing to do."""
