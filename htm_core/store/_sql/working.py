"""Each robot's persisted working memory: what both SQL stores share.

Every change bumps the robot's ``working_version`` in its transaction
(:func:`bump_working`), which is how other processes notice it; clearing
membership is logged. Membership inserts, evictions and the per-read version check stay in
each backend's dialect (they are on the path of every add and recall).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...models import Memory
from ..base import WorkingResult, WorkingRow, WorkingState
from .dialect import Dialect
from .parts import Database

__all__ = ["WorkingSetSQL", "admit_named", "bump_working",
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

    def clear_working(self, robot: str) -> int:
        """Drop ``robot``'s working-memory membership (memories stay); return how many."""
        def write(conn: Connection, rid: int) -> int:
            n = int(conn.execute(text("DELETE FROM working_memory WHERE robot_id = :r"),
                                 {"r": rid}).rowcount)
            self._db.log_lines(conn, [("clear_working", rid, None, None, {"count": n})])
            bump_working(conn, self._dialect, rid, None, None)
            return n

        return self._db.writing_as(robot, "clearing working memory", write)




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
