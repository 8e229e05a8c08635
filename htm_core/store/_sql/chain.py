"""The parts of :mod:`htm_core.store._sql.parts` over the hooks of a store built as a class
chain (``SQLCatalogue`` ... ``SQLVersions``): how such a store reaches the shared roles
until it is assembled from parts like :class:`~htm_core.store.sqlite.SQLiteStore`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from ...models import Memory
from .dialect import Dialect
from .parts import LogLine

__all__ = ["ChainParts", "chain_dialect"]

T = TypeVar("T")


def chain_dialect(cls: Any) -> Dialect:
    """The dialect a chain class states through its hooks and class attributes."""
    return Dialect(name="chain", time_in=cls._time_in, time_out=cls._time_out,
                   json_out=cls._json_out, code_point_order=cls._CODE_POINT_ORDER,
                   lock_rows=getattr(cls, "_LOCK_ROWS", ""),
                   bump_time=getattr(cls, "_BUMP_TIME", ":t"),
                   json_param=getattr(cls, "_JSON_PARAM", ":meta"),
                   serial_history=getattr(cls, "_SERIAL_HISTORY", ""))


class ChainParts:
    """Database, Rows, HistorySQL and RowListener, each call passed to the chain's hook."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def reading(self, what: str, fn: Callable[[Connection], T]) -> T:
        result: T = self._store._reading(what, fn)
        return result

    def writing(self, what: str, fn: Callable[[Connection], T]) -> T:
        result: T = self._store._writing(what, fn)
        return result

    def writing_as(self, robot: str, what: str, fn: Callable[[Connection, int], T]) -> T:
        result: T = self._store._writing_as(robot, what, fn)
        return result

    def log_lines(self, conn: Connection, lines: Sequence[LogLine]) -> None:
        self._store._log_lines(conn, lines)

    def fetch(self, conn: Connection, where: str, params: dict[str, Any],
              include_embedding: bool) -> list[Memory]:
        found: list[Memory] = self._store._fetch(conn, where, params, include_embedding)
        return found

    def link_tags(self, conn: Connection, items: Sequence[tuple[int, Sequence[str]]]) -> None:
        self._store._link_tags(conn, items)

    def delete_rows(self, conn: Connection, ids: Sequence[int]) -> None:
        self._store._delete_rows(conn, ids)

    def unhold(self, conn: Connection, ids: Sequence[int]) -> None:
        self._store._unhold(conn, ids)

    def set_vector(self, conn: Connection, memory_id: int, vector: Sequence[float],
                   embedder: str) -> None:
        self._store._set_vector(conn, memory_id, vector, embedder)

    def vector_hits(self, conn: Connection, vector: Sequence[float], where: str,
                    params: dict[str, Any], limit: int) -> list[tuple[int, float]]:
        hits: list[tuple[int, float]] = self._store._history_vector_hits(
            conn, vector, where, params, limit)
        return hits

    def text_hits(self, conn: Connection, words: Sequence[str], where: str,
                  params: dict[str, Any], limit: int) -> list[tuple[int, float]]:
        hits: list[tuple[int, float]] = self._store._history_text_hits(
            conn, words, where, params, limit)
        return hits

    def next_history_id(self, conn: Connection) -> int | None:
        given: int | None = self._store._next_history_id(conn)
        return given

    def visibility_changed(self, conn: Connection) -> None:
        self._store._visibility_changed(conn)

    def purged(self, conn: Connection, ids: Sequence[int]) -> None:
        self._store._purged(conn, ids)

    def after_visibility(self, memory_id: int, *, alive: bool) -> None:
        self._store._after_visibility(memory_id, alive=alive)

    def after_purge(self, ids: Sequence[int]) -> None:
        self._store._after_purge(ids)

    def after_update(self, memory: Memory, vector: Sequence[float] | None,
                     text_changed: bool) -> None:
        self._store._after_update(memory, vector, text_changed)
