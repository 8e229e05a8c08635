"""The catalogue both SQL stores share: get, list, keys, tags, counts, robots, the log.

:class:`Catalogue` reads through the backend's :class:`~htm_core.store._sql.parts.Database`
(how a read runs and how its driver errors map to htm's) and
:class:`~htm_core.store._sql.parts.Rows` (the memory rows of a ``WHERE`` clause), with the
conversions and the collation of its :class:`~htm_core.store._sql.dialect.Dialect`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...models import Memory, Operation, Robot
from ..base import LIST_ORDERS, SearchFilters, StoreCounts
from ..one_embedder import FAILED_COUNT, NOT_FAILED
from .dialect import Dialect
from .filters import VISIBLE, filter_sql, prefix_sql
from .parts import Database, Rows

__all__ = ["VISIBLE", "Catalogue"]

T = TypeVar("T")

#: A memory's importance as it was at the history mark ``:as_of``: an update after the
#: mark copied the version it superseded into ``memory_versions`` (with a higher id), so
#: the first such copy holds the importance the memory had at the mark.
_IMPORTANCE_AS_OF = ("coalesce((SELECT v.importance FROM memory_versions v "
                     "WHERE v.memory_id = {m}.id AND v.id > :as_of ORDER BY v.id LIMIT 1), "
                     "{m}.importance)")


class Catalogue:
    """The catalogue reads of both SQL stores."""

    def __init__(self, db: Database, dialect: Dialect, rows: Rows) -> None:
        self._db, self._dialect, self._rows = db, dialect, rows

    # -- records ---------------------------------------------------------------------
    def get(self, key: str, *, include_forgotten: bool = False,
            include_embedding: bool = False) -> Memory | None:
        """The memory under ``key``, or None (forgotten ones only when asked)."""
        where = "m.key = :key" + ("" if include_forgotten else f" AND {VISIBLE}")
        found = self._db.reading("reading a memory",
                                 lambda conn: self._rows.fetch(conn, where, {"key": key},
                                                               include_embedding))
        return found[0] if found else None

    def list_memories(self, filters: SearchFilters, *, key_prefix: str | None = None,
                      include_forgotten: bool = False, order: str = "created_at",
                      descending: bool = False, limit: int = 100,
                      after: tuple[Any, int] | None = None,
                      as_of: int | None = None) -> list[Memory]:
        """Up to ``limit`` memories matching ``filters`` and ``key_prefix``, by ``order`` then
        id; ``after`` is the (order value, id) of the row before the page (keyset paging).
        With ``as_of`` (a :meth:`history_mark`), ``importance`` is each memory's importance
        as it was at that mark (see ``Records.list_memories``)."""
        if order not in LIST_ORDERS:
            raise ValueError(f"order must be one of {LIST_ORDERS}, got {order!r}")
        params: dict[str, Any] = {"limit": limit}
        where = [filter_sql(self._dialect, filters, params, visible_only=not include_forgotten)]
        if key_prefix:
            where.append(prefix_sql(self._dialect, "m.key", "prefix", key_prefix, params))
        way = " DESC" if descending else ""

        def read(conn: Connection) -> list[Memory]:
            key, cursor = f"m.{order}", ":after"
            if order == "importance" and as_of is not None and conn.execute(text(
                    "SELECT 1 FROM memory_versions WHERE id > :as_of LIMIT 1"),
                    {"as_of": as_of}).first() is not None:
                params["as_of"] = as_of
                key = _IMPORTANCE_AS_OF.format(m="m")
                cursor = (f"coalesce((SELECT {_IMPORTANCE_AS_OF.format(m='c')} FROM memories c "
                          "WHERE c.id = :after_id), :after)")
            clauses = list(where)
            if after is not None:
                value, params["after_id"] = after
                params["after"] = self._dialect.time_in(value) if order == "created_at" else value
                beyond = "<" if descending else ">"
                clauses.append(f"({key} {beyond} {cursor} "
                               f"OR ({key} = {cursor} AND m.id {beyond} :after_id))")
            sql = f"{' AND '.join(clauses)} ORDER BY {key}{way}, m.id{way} LIMIT :limit"
            return self._rows.fetch(conn, sql, params, False)

        return self._db.reading("listing memories", read)

    def history_mark(self) -> int:
        """The newest superseded version's row id (0 before the first update): where a
        walk of ``list_memories(order="importance", as_of=...)`` starts."""
        return self._db.reading("reading the history mark", lambda conn: int(conn.execute(text(
            "SELECT coalesce(max(id), 0) FROM memory_versions")).scalar() or 0))

    def iter_memories(self, *, batch_size: int = 1000, include_forgotten: bool = True,
                      include_embedding: bool = False, after_id: int = 0
                      ) -> Iterator[list[Memory]]:
        """Every memory in id order, in batches of ``batch_size`` (keyset pagination)."""
        last = after_id
        visible = "" if include_forgotten else f" AND {VISIBLE}"
        where = f"m.id > :last{visible} ORDER BY m.id LIMIT :n"
        while True:
            batch = self._db.reading("reading memories", functools.partial(
                self._rows.fetch, where=where, params={"last": last, "n": batch_size},
                include_embedding=include_embedding))
            if not batch:
                return
            yield batch
            last = batch[-1].id

    def keys_with_prefix(self, prefix: str, *, include_forgotten: bool = False) -> list[str]:
        """Keys starting with ``prefix``, sorted."""
        visible = "" if include_forgotten else " AND forgotten_at IS NULL"
        params: dict[str, Any] = {}
        where = prefix_sql(self._dialect, "key", "p", prefix, params)
        rows = self._db.reading("listing keys", lambda conn: conn.execute(text(
            f"SELECT key FROM memories WHERE {where}{visible} ORDER BY key"), params).all())
        return [str(r[0]) for r in rows]

    # -- catalogue -------------------------------------------------------------------

    def tags(self) -> dict[str, int]:
        """Every tag with the number of visible memories carrying it."""
        rows = self._db.reading("listing tags", lambda conn: conn.execute(text(
            "SELECT t.name, count(m.id) FROM tags t JOIN memory_tags mt ON mt.tag_id = t.id "
            "JOIN memories m ON m.id = mt.memory_id AND m.forgotten_at IS NULL "
            "GROUP BY t.name ORDER BY t.name")).all())
        return {str(r[0]): int(r[1]) for r in rows}

    def counts(self, robot: str, *, tags: Sequence[str] | None = None) -> StoreCounts:
        """Figures for ``stats()``: global (or within ``tags``), this robot's, forgotten,
        robots, unembedded."""
        params: dict[str, Any] = {"robot": robot}
        tagged = filter_sql(self._dialect, SearchFilters(tags=tuple(tags or ())), params,
                                  visible_only=False)
        robots = ("(SELECT count(*) FROM robots)" if not tags else
                  f"(SELECT count(DISTINCT m.robot_id) FROM memories m WHERE {tagged} "
                  "AND m.forgotten_at IS NULL)")
        row = self._db.reading("counting memories", lambda conn: conn.execute(text(
            "SELECT "
            f" (SELECT count(*) FROM memories m WHERE {tagged} AND m.forgotten_at IS NULL),"
            " (SELECT count(*) FROM memories m JOIN robots r ON r.id = m.robot_id "
            f"   WHERE r.name = :robot AND {tagged} AND m.forgotten_at IS NULL),"
            f" (SELECT count(*) FROM memories m WHERE {tagged} AND m.forgotten_at IS NOT NULL),"
            f" {robots},"
            " (SELECT count(*) FROM memories m WHERE m.embedding IS NULL AND "
            f"  m.forgotten_at IS NULL AND {NOT_FAILED}),"
            f" ({FAILED_COUNT})"
        ), params).first())
        assert row is not None
        return StoreCounts(total=int(row[0]), robot=int(row[1]), forgotten=int(row[2]),
                           robots=int(row[3]), missing_embeddings=int(row[4]),
                           failed_embeddings=int(row[5]))

    def robots(self, *, tags: Sequence[str] | None = None) -> list[Robot]:
        """Every robot on the store, with its count of visible memories (within ``tags``,
        only the robots that wrote one carrying them)."""
        params: dict[str, Any] = {}
        tagged = filter_sql(self._dialect, SearchFilters(tags=tuple(tags or ())), params)
        rows = self._db.reading("listing robots", lambda conn: conn.execute(text(
            "SELECT r.id, r.name, r.created_at, r.last_active, "
            f"(SELECT count(*) FROM memories m WHERE m.robot_id = r.id AND {tagged}) AS n, "
            "r.working_memory_tokens FROM robots r ORDER BY r.name"), params).all())
        return [Robot(id=int(r[0]), name=r[1], created_at=self._dialect.time_out(r[2]),
                      last_active=self._dialect.time_out(r[3]) if r[3] else None,
                      memory_count=int(r[4]),
                      working_memory_tokens=None if r[5] is None else int(r[5]))
                for r in rows if not tags or r[4]]

    # -- the operations log ----------------------------------------------------------

    def operations(self, *, limit: int = 100, robot: str | None = None,
                   op: str | None = None) -> list[Operation]:
        """The newest operations first."""
        where: list[str] = []
        params: dict[str, Any] = {"limit": limit}
        if robot is not None:
            where.append("r.name = :robot")
            params["robot"] = robot
        if op is not None:
            where.append("o.op = :op")
            params["op"] = op
        sql = ("SELECT o.id, o.at, o.op, r.name, o.key, o.detail FROM operations o "
               "LEFT JOIN robots r ON r.id = o.robot_id "
               + (f"WHERE {' AND '.join(where)} " if where else "")
               + "ORDER BY o.id DESC LIMIT :limit")
        rows = self._db.reading("reading the operations log",
                                lambda conn: conn.execute(text(sql), params).all())
        return [Operation(id=int(r[0]), at=self._dialect.time_out(r[1]), op=r[2], robot=r[3],
                          key=r[4], detail=self._dialect.json_out(r[5])) for r in rows]


