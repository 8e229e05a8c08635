"""PostgreSQL: each robot's persisted working memory (membership, item state, version).

The working-set role of :class:`~htm_core.store.postgres.PostgresStore`: see
:mod:`htm_core.working.resident` for how working memory uses it. Every change bumps the
robot's ``working_version`` in its transaction; a memory entering is locked ``FOR SHARE``
while checked visible, which ``forget``'s ``FOR UPDATE`` serialises against.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timezone

from sqlalchemy import text
from sqlalchemy.engine import Connection

from .._sql.dialect import POSTGRES
from .._sql.filters import VISIBLE as _VISIBLE
from .._sql.working import (
    admit_named,
    bump_working,
    recall_check_answer,
    recall_check_sql,
    sort_entries,
    working_rows,
)
from ..base import WorkingChange, WorkingResult, WorkingRow, WorkingState
from ._codec import _COPY_WORKING, _COPY_WORKING_TYPES
from ._copy import aware, copy_rows
from .engine import PostgresDatabase, driver_rows
from .rows import PostgresRows
from .write_locks import lock_for_writing

__all__ = ["PostgresWorkingSet"]

#: The recall check with the ids as one array.
_RECALL_CHECK = recall_check_sql("= ANY(:ids)")


class PostgresWorkingSet:
    """Each robot's working memory on PostgreSQL (its rows read through ``rows``)."""

    def __init__(self, db: PostgresDatabase, rows: PostgresRows) -> None:
        self.db = db
        self.rows = rows

    def working_rows(self, robot: str) -> tuple[int, list[WorkingRow]]:
        """``robot``'s working-set version and entries, read in one snapshot."""
        def read(conn: Connection) -> tuple[int, list[WorkingRow]]:
            conn.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
            row = conn.execute(text("SELECT id, working_version FROM robots WHERE name = :n"),
                               {"n": robot}).first()
            if row is None:
                return 0, []
            states = {int(r[0]): r[1:] for r in conn.execute(text(
                "SELECT memory_id, last_accessed, access_count, seq, access_seq "
                "FROM working_memory WHERE robot_id = :r"), {"r": row[0]})}
            memories = self.rows.fetch(conn, f"m.id = ANY(:ids) AND {_VISIBLE}",
                                   {"ids": list(states)}, False)
            return int(row[1]), working_rows(POSTGRES, memories, states)

        return self.db.run("reading working memory", read)

    def working_states(self, robot: str) -> tuple[int, dict[int, WorkingState]]:
        """``robot``'s working-set version and entry states by memory id, one snapshot."""
        def read(conn: Connection) -> tuple[int, dict[int, WorkingState]]:
            rows = conn.execute(text(
                "SELECT r.working_version, w.memory_id, m.key, "
                "coalesce(w.last_accessed, m.last_accessed), w.access_count, w.seq, w.access_seq, "
                "m.content_hash, m.version FROM robots r LEFT JOIN (working_memory w JOIN memories m "
                "ON m.id = w.memory_id "
                f"AND {_VISIBLE}) ON w.robot_id = r.id WHERE r.name = :n"), {"n": robot}).all()
            if not rows:
                return 0, {}
            return int(rows[0][0]), {int(r[1]): WorkingState(
                key=r[2], last_accessed=r[3].astimezone(timezone.utc), access_count=int(r[4]),
                seq=int(r[5]), access_seq=int(r[6]), content_hash=r[7], version=int(r[8]))
                for r in rows if r[1] is not None}

        return self.db.read("reading working memory", read)

    def recall_check(self, robot: str, ids: Sequence[int]) -> tuple[int, frozenset[int]]:
        """The working-set version of ``robot`` and which of ``ids`` are hidden, one read
        (on the recall path's own connection; the ids as one array, so the statement's
        text stays the same and is prepared)."""
        wanted = {int(i) for i in ids}
        found = self.db.quick("checking what is still visible", lambda pg, _info: driver_rows(
            pg, _RECALL_CHECK, {"n": robot, "ids": sorted(wanted)}))
        return recall_check_answer(found, wanted)

    def working_version(self, robot: str) -> int:
        """``robot``'s working-set version (0 for an unknown robot)."""
        value = self.db.read("reading the working-set version", lambda conn: conn.execute(
            text("SELECT working_version FROM robots WHERE name = :n"), {"n": robot}).scalar())
        return int(value) if value is not None else 0

    def apply_working(self, change: WorkingChange, *,
                      expected_version: int | None = None) -> WorkingResult:
        """Write a working-memory change in one transaction."""
        rid = self.db.robot_id(change.robot)

        def write(conn: Connection) -> WorkingResult:
            lock_for_writing(conn, robot_ids=[rid])
            return self.apply(conn, change, expected_version)

        return self.db.run("updating working memory", write)

    def apply(self, conn: Connection, change: WorkingChange,
                       expected_version: int | None,
                       held: Mapping[str, int] | None = None,
                       created: frozenset[int] = frozenset()) -> WorkingResult:
        """Write ``change`` on ``conn``. The memories entering are locked FOR SHARE while
        checked (:func:`_entering`), so a forget, purge or update (which lock the row)
        either commits first and the entry is refused (hidden, gone or at another version
        than it names), or waits until this membership is in and then removes it (or bumps
        the robot's working-set version, so its working memory fetches the new version).
        ``held`` (key -> id) names visible memories this transaction has already locked (a
        batch of adds: rows it inserted or locked and touched); they need no check. The
        ids in ``created`` were inserted by this transaction, so no entry can hold them
        yet: theirs are copied in (a plain insert, no conflict to look for)."""
        rid = self.db.robot_id(change.robot)
        if change.touch:
            conn.execute(text(
                "UPDATE memories SET last_accessed = GREATEST(last_accessed, :t), "
                "access_count = access_count + 1 WHERE id IN (SELECT id FROM memories "
                "WHERE id = ANY(:ids) ORDER BY id FOR NO KEY UPDATE)"),
                {"t": change.at, "ids": sorted({int(i) for i in change.touch})})
        if change.evict:
            _evict(conn, rid, change)
        refused: frozenset[str] = frozenset()
        stale: frozenset[str] = frozenset()
        if change.put:
            visible, stale = _entering(conn, change.put, held or {})
            refused = frozenset(s.key for s in change.put if s.key not in visible)
            put = [s for s in change.put if s.key in visible]
            fresh = [s for s in put if visible[s.key] in created]
            if fresh and aware(change.at, *(s.last_accessed for s in fresh)):
                copy_rows(conn, _COPY_WORKING, _COPY_WORKING_TYPES, (
                    (rid, visible[s.key], change.at, s.last_accessed, s.access_count, s.seq,
                     s.access_seq) for s in fresh))
                put = [s for s in put if visible[s.key] not in created]
            if put:  # the entries as one JSON text, times in ISO 8601 (exact)
                conn.execute(text(
                    "INSERT INTO working_memory(robot_id, memory_id, added_at, last_accessed, "
                    "access_count, seq, access_seq) SELECT :r, CAST(v->>0 AS bigint), :t, "
                    "CAST(v->>1 AS timestamptz), CAST(v->>2 AS integer), CAST(v->>3 AS bigint), "
                    "CAST(v->>4 AS bigint) FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS v "
                    "ON CONFLICT (robot_id, memory_id) DO UPDATE SET "
                    "last_accessed = excluded.last_accessed, access_count = excluded.access_count, "
                    "seq = excluded.seq, access_seq = excluded.access_seq"),
                    {"r": rid, "t": change.at, "rows": json.dumps([
                        [visible[s.key], s.last_accessed.isoformat(), s.access_count, s.seq,
                         s.access_seq] for s in put])})
        result = bump_working(conn, POSTGRES, rid, change.at, expected_version, refused)
        return replace(result, stale=stale) if stale else result

    @staticmethod
    def unhold(conn: Connection, ids: Sequence[int]) -> None:
        """Take memories out of every robot's working set, bumping those robots' versions."""
        conn.execute(text(
            "WITH gone AS (DELETE FROM working_memory WHERE memory_id = ANY(:ids) "
            "RETURNING robot_id) UPDATE robots SET working_version = working_version + 1 "
            "WHERE id IN (SELECT robot_id FROM gone)"), {"ids": [int(i) for i in ids]})


def _entering(conn: Connection, put: Sequence[WorkingState], held: Mapping[str, int]
              ) -> tuple[dict[str, int], frozenset[str]]:
    """Which entries of ``put`` may enter (key -> memory id), their rows locked FOR SHARE,
    and which of those are stale (their memory is at another version than they name). An
    entry the add of this transaction holds (``held``) enters; one naming a memory id
    enters only while that memory exists and is not forgotten; one naming none, while a
    visible memory has its key."""
    visible, by_id, by_key = sort_entries(put, held)
    stale: set[str] = set()
    if by_id:
        admit_named(conn.execute(text(
            "SELECT id, version FROM memories WHERE id = ANY(:ids) AND forgotten_at IS NULL "
            "ORDER BY id FOR SHARE"), {"ids": sorted(by_id)}), by_id, visible, stale)
    if by_key:
        visible.update((str(r[0]), int(r[1])) for r in conn.execute(text(
            "SELECT key, id FROM memories WHERE key = ANY(ARRAY(SELECT "
            "jsonb_array_elements_text(CAST(:keys AS jsonb)))) AND forgotten_at IS NULL "
            "ORDER BY id FOR SHARE"), {"keys": json.dumps(sorted(set(by_key)))}))
    return visible, frozenset(stale)


def _evict(conn: Connection, rid: int, change: WorkingChange) -> None:
    """One statement: the evicted memories leave robot ``rid``'s membership, with one log
    line per eviction (in order, with the memory's id: the one it names, else the one under
    its key, if any). The evictions travel as one JSON text: psycopg dumps a text[]
    parameter element by element in Python."""
    conn.execute(text(
        "WITH e AS (SELECT k.value->>0 AS key, CAST(k.value->>1 AS bigint) AS named, "
        "k.ord FROM jsonb_array_elements(CAST(:ev AS jsonb)) WITH ORDINALITY "
        "AS k(value, ord)), "
        "m AS (SELECT e.ord, e.key, coalesce(nullif(e.named, 0), "
        "(SELECT id FROM memories WHERE key = e.key)) AS id FROM e), "
        "gone AS (DELETE FROM working_memory w USING m WHERE w.robot_id = :r "
        "AND w.memory_id = m.id) "
        "INSERT INTO operations(op, robot_id, memory_id, key, detail) "
        "SELECT 'evict', :r, m.id, m.key, '{}' FROM m ORDER BY m.ord"),
        {"r": rid, "ev": json.dumps([[k, mid] for k, mid in change.evictions()])})
