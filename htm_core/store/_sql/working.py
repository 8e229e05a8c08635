"""Each robot's persisted working memory: what both SQL stores share.

Every change bumps the robot's ``working_version`` in its transaction
(:meth:`SQLWorkingSet._bump_working`), which is how other processes notice it; clearing
membership is logged. Membership inserts, evictions and the per-read version check stay in
each backend's dialect (they are on the path of every add and recall).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...models import Memory
from ..base import WorkingResult, WorkingRow, WorkingState
from .chain import chain_dialect
from .dialect import Dialect
from .parts import Database
from .records import SQLRecordChanges

__all__ = ["SQLWorkingSet", "WorkingSetSQL", "admit_named", "bump_working",
           "recall_check_answer", "recall_check_sql", "sort_entries", "working_rows"]


def sort_entries(put: Sequence[WorkingState], held: Mapping[str, int]
                 ) -> tuple[dict[str, int], dict[int, WorkingState], list[str]]:
    """The entries of ``put`` by how they may enter working memory: those the add of this
    transaction holds (``held``: key -> memory id) enter (key -> id); those naming a memory
    id (id -> entry) enter only while that memory exists and is not forgotten; the keys of
    those naming none are looked up by key."""
    entering: dict[str, int] = {}
    by_id: dict[int, WorkingState] = {}
    by_key: list[str] = []
    for state in put:
        mine = held.get(state.key)
        if mine is not None and state.memory_id in (0, mine):
            entering[state.key] = mine
        elif state.memory_id:
            by_id[int(state.memory_id)] = state
        else:
            by_key.append(state.key)
    return entering, by_id, by_key


def admit_named(rows: Iterable[Any], by_id: Mapping[int, WorkingState],
                entering: dict[str, int], stale: set[str]) -> None:
    """Enter the entries of ``by_id`` whose memory ``rows`` (id, version; existing and not
    forgotten) shows, marking stale those whose memory is at another version than named."""
    for mid, version in rows:
        state = by_id[int(mid)]
        entering[state.key] = int(mid)
        if state.version and state.version != int(version):
            stale.add(state.key)


def bump_working(conn: Connection, dialect: Dialect, rid: int, stamp: Any,
                 expected: int | None, refused: frozenset[str] = frozenset()) -> WorkingResult:
    """Bump ``rid``'s working version (and its last activity to ``stamp``, a stored time,
    unless None); in step when it was ``expected`` (or nothing was expected)."""
    version = int(conn.execute(text(
        "UPDATE robots SET working_version = working_version + 1, "
        f"last_active = coalesce({dialect.bump_time}, last_active) WHERE id = :r "
        "RETURNING working_version"), {"t": stamp, "r": rid}).scalar_one())
    return WorkingResult(version, expected is None or version == expected + 1, refused)


def working_rows(dialect: Dialect, memories: Iterable[Memory],
                 states: Mapping[int, Sequence[Any]]) -> list[WorkingRow]:
    """Entries from visible ``memories`` and their stored ``states`` (last access, access
    count, seq, access seq per memory id), in entry order."""
    out = []
    for m in memories:
        accessed, count, seq, access_seq = states[m.id]
        out.append(WorkingRow(memory=m, state=WorkingState(
            key=m.key, access_count=int(count), seq=int(seq), access_seq=int(access_seq),
            last_accessed=m.last_accessed if accessed is None else dialect.time_out(accessed))))
    out.sort(key=lambda r: (r.state.seq, r.memory.id))
    return out


class WorkingSetSQL:
    """The working-set steps both SQL stores write alike."""

    def __init__(self, db: Database, dialect: Dialect) -> None:
        self._db, self._dialect = db, dialect

    def hidden_ids(self, ids: Sequence[int]) -> frozenset[int]:
        """The ids among ``ids`` whose memory is forgotten or purged now (one read)."""
        wanted = {int(i) for i in ids}
        if not wanted:
            return frozenset()

        def read(conn: Connection) -> set[int]:
            return {int(r[0]) for r in conn.exec_driver_sql(
                f"SELECT id FROM memories WHERE id IN ({', '.join(map(str, sorted(wanted)))}) "
                "AND forgotten_at IS NULL")}

        return frozenset(wanted - self._db.reading("checking what is still visible", read))

    def clear_working(self, robot: str) -> int:
        """Drop ``robot``'s working-memory membership (memories stay); return how many."""
        def write(conn: Connection, rid: int) -> int:
            n = int(conn.execute(text("DELETE FROM working_memory WHERE robot_id = :r"),
                                 {"r": rid}).rowcount)
            self._db.log_lines(conn, [("clear_working", rid, None, None, {"count": n})])
            bump_working(conn, self._dialect, rid, None, None)
            return n

        return self._db.writing_as(robot, "clearing working memory", write)


class SQLWorkingSet(SQLRecordChanges):
    """:class:`WorkingSetSQL` for a store built as a class chain, over its hooks."""

    #: The bound time of a version bump as the database takes it (``Dialect.bump_time``).
    _BUMP_TIME: ClassVar[str] = ":t"

    @classmethod
    def _bump_working(cls, conn: Connection, rid: int, stamp: Any, expected: int | None,
                      refused: frozenset[str] = frozenset()) -> WorkingResult:
        return bump_working(conn, chain_dialect(cls), rid, stamp, expected, refused)

    @classmethod
    def _working_rows(cls, memories: Iterable[Memory],
                      states: Mapping[int, Sequence[Any]]) -> list[WorkingRow]:
        return working_rows(chain_dialect(cls), memories, states)

    @functools.cached_property
    def _working_sql(self) -> WorkingSetSQL:
        return WorkingSetSQL(self._chain, chain_dialect(type(self)))

    def hidden_ids(self, ids: Sequence[int]) -> frozenset[int]:
        return self._working_sql.hidden_ids(ids)

    def clear_working(self, robot: str) -> int:
        return self._working_sql.clear_working(robot)


def recall_check_sql(ids_in: str) -> str:
    """The recall check, one statement: a row (0, the working-set version of robot ``:n``),
    then (1, id) for each id of the one parameter ``:ids`` still visible; ``ids_in`` is the
    backend's test of ``id`` against that parameter (a JSON list on SQLite, an array on
    PostgreSQL), so the statement's text never changes and is compiled once."""
    return ("SELECT 0, coalesce((SELECT working_version FROM robots WHERE name = :n), 0) "
            f"UNION ALL SELECT 1, id FROM memories WHERE id {ids_in} AND forgotten_at IS NULL")


def recall_check_answer(rows: Iterable[Sequence[Any]], wanted: set[int]) -> tuple[int, frozenset[int]]:
    """:func:`recall_check_sql`'s answer: the version and which of ``wanted`` are hidden."""
    version, visible = 0, set()
    for kind, value in rows:
        if kind == 0:
            version = int(value)
        else:
            visible.add(int(value))
    return version, frozenset(wanted - visible)
