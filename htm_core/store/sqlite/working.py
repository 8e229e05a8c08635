"""SQLite: each robot's persisted working memory (membership, item state, version).

The working-set part of :class:`~htm_core.store.sqlite.SQLiteStore`: see
:mod:`htm_core.working.resident` for how working memory uses it. Every change bumps the
robot's ``working_version`` in its transaction; a membership insert happens only for a
visible memory, under the write lock, so it cannot race a forget.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...clock import to_timestamp, utc_from_timestamp
from .._common import chunks
from .._sql.dialect import SQLITE
from .._sql.working import (
    WorkingSetSQL,
    admit_named,
    recall_check_answer,
    recall_check_sql,
    sort_entries,
    working_rows,
)
from ..base import WorkingChange, WorkingResult, WorkingRow, WorkingState
from .engine import SQLiteDatabase
from .reads import SQLiteReads
from .rows import SQLiteRows

__all__ = ["SQLiteWorkingSet", "unhold"]

#: The recall check with the ids as one JSON parameter.
_RECALL_CHECK = recall_check_sql("IN (SELECT value FROM json_each(:ids))")


class SQLiteWorkingSet:
    """Each robot's working memory on SQLite: membership, item state, version."""

    def __init__(self, db: SQLiteDatabase, reads: SQLiteReads, rows: SQLiteRows) -> None:
        self._db, self._reads, self._rows = db, reads, rows
        self._shared = WorkingSetSQL(db, SQLITE)

    def working_rows(self, robot: str) -> tuple[int, list[WorkingRow]]:
        with self._db.read() as conn:  # one read transaction: one snapshot
            row = conn.execute(text("SELECT id, working_version FROM robots WHERE name = :n"),
                               {"n": robot}).first()
            if row is None:
                return 0, []
            states = {r[0]: r[1:] for r in conn.execute(text(
                "SELECT memory_id, last_accessed, access_count, seq, access_seq "
                "FROM working_memory WHERE robot_id = :r"), {"r": row[0]})}
            memories = [m for part in chunks(list(states), 500) for m in self._rows.fetch(
                conn, f"m.id IN ({', '.join(str(int(i)) for i in part)}) "
                "AND m.forgotten_at IS NULL", {}, False)]
        return int(row[1]), working_rows(SQLITE, memories, states)

    def working_states(self, robot: str) -> tuple[int, dict[int, WorkingState]]:
        with self._db.read() as conn:  # one read transaction: one snapshot
            cur = conn.connection.cursor()
            try:
                row = cur.execute("SELECT id, working_version FROM robots WHERE name = ?",
                                  (robot,)).fetchone()
                if row is None:
                    return 0, {}
                rows = cur.execute(
                    "SELECT w.memory_id, m.key, coalesce(w.last_accessed, m.last_accessed), "
                    "w.access_count, w.seq, w.access_seq, m.content_hash, m.version FROM working_memory w "
                    "JOIN memories m ON m.id = w.memory_id WHERE w.robot_id = ? "
                    "AND m.forgotten_at IS NULL", (row[0],)).fetchall()
            finally:
                cur.close()
        return int(row[1]), {int(r[0]): WorkingState(
            key=r[1], last_accessed=utc_from_timestamp(r[2]), access_count=int(r[3]),
            seq=int(r[4]), access_seq=int(r[5]), content_hash=r[6], version=int(r[7]))
            for r in rows}

    def working_version(self, robot: str) -> int:
        with self._reads.cursor(snapshot=False) as cur:  # this runs before every read
            seen = self._reads.seen(self._reads.mark(cur))
            if seen is not None and robot in seen.versions:  # nothing committed since
                return seen.versions[robot]
            row = cur.execute("SELECT working_version FROM robots WHERE name = ?",
                              (robot,)).fetchone()
        version = int(row[0]) if row else 0
        if seen is not None:
            seen.versions[robot] = version
        return version

    def recall_check(self, robot: str, ids: Sequence[int]) -> tuple[int, frozenset[int]]:
        wanted = {int(i) for i in ids}
        with self._reads.cursor(snapshot=False) as cur:  # this runs on every recall
            # The hits were read by get_many just before: while nothing was committed since
            # (the mark), they are still visible and the version is the one read last.
            seen = self._reads.seen(self._reads.mark(cur))
            if seen is not None and robot in seen.versions and wanted <= seen.visible:
                return seen.versions[robot], frozenset()
            rows = cur.execute(_RECALL_CHECK, {"n": robot, "ids": json.dumps(sorted(wanted))}
                               ).fetchall()
        version, hidden = recall_check_answer(rows, wanted)
        if seen is not None:
            seen.versions[robot] = version
            seen.visible.update(wanted - hidden)
        return version, hidden

    def apply_working(self, change: WorkingChange, *,
                      expected_version: int | None = None) -> WorkingResult:
        def write() -> WorkingResult:
            # Membership and access statistics: the reads' caches outlive the write.
            own = self._reads.own_write()
            with self._db.write(after=own.after) as conn:
                result = self.apply_in(conn, change, expected_version)
                own.before(conn.connection.dbapi_connection)
                return result

        return self._db.optional_write(  # read-only or full disk: kept in this process only
            "working-memory membership and access statistics", write,
            lambda: self._unwritten(change, expected_version))

    def _unwritten(self, change: WorkingChange, expected_version: int | None) -> WorkingResult:
        """The result of a change not written (read-only store, full disk): what enters
        stays in this process only, but an entry whose memory is forgotten, purged or at
        another version than it names is refused all the same (one read), so a process
        that cannot write still drops what others forgot, purged or updated."""
        version = (expected_version if expected_version is not None
                   else self.working_version(change.robot))
        named = {int(s.memory_id): s for s in change.put if s.memory_id}
        if not named:
            return WorkingResult(version=version, in_step=True)
        with self._reads.cursor() as cur:
            current = {int(mid): int(v) for mid, v in cur.execute(
                "SELECT id, version FROM memories WHERE id IN (SELECT value FROM json_each(?)) "
                "AND forgotten_at IS NULL", (json.dumps(sorted(named)),))}
        return WorkingResult(version=version, in_step=True, refused=frozenset(
            s.key for mid, s in named.items()
            if mid not in current or (s.version and s.version != current[mid])))

    def apply_in(self, conn: Connection, change: WorkingChange, expected_version: int | None,
                 written: Mapping[str, tuple[int, bool]] | None = None) -> WorkingResult:
        """Write ``change`` on ``conn``. The write lock is held, so a forget, purge or
        update cannot run between the check of what enters and the insert: a memory hidden,
        gone or at another version than its entry names is refused (:func:`_entering`).
        (The raw cursor: this runs on every recall and add.)

        ``written``: key -> (id, created) of the memories the add in this same transaction
        wrote (all visible: new rows, or re-added ones it restored). Their ids need no
        lookup, and a row created in this transaction holds no membership yet, so its
        eviction (it entered and left within the batch) deletes nothing; it is logged like
        every eviction.
        """
        rid = self._db.robot_id(conn, change.robot)
        ts = to_timestamp(change.at)
        known = written or {}
        cur = conn.connection.cursor()
        try:
            if change.touch:
                cur.executemany("UPDATE memories SET last_accessed = max(last_accessed, ?), "
                                "access_count = access_count + 1 WHERE id = ?",
                                [(ts, int(i)) for i in change.touch])
            entering, stale, by_key = _entering(cur, change.put, known)
            evictions = change.evictions()
            ids = _key_ids(cur, [k for k in dict.fromkeys(
                [*(k for k, mid in evictions if not mid), *by_key]) if k not in known])
            if evictions:
                _evict(cur, rid, evictions, ids, known)
            entering.update((k, ids[k][0]) for k in by_key if k in ids and not ids[k][1])
            refused = frozenset(s.key for s in change.put if s.key not in entering)
            cur.executemany(
                "INSERT INTO working_memory(robot_id, memory_id, added_at, last_accessed, "
                "access_count, seq, access_seq) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(robot_id, memory_id) DO UPDATE SET last_accessed = "
                "excluded.last_accessed, access_count = excluded.access_count, "
                "seq = excluded.seq, access_seq = excluded.access_seq",
                [(rid, entering[s.key], ts, to_timestamp(s.last_accessed), s.access_count,
                  s.seq, s.access_seq) for s in change.put if s.key in entering])
            version = int(cur.execute(
                "UPDATE robots SET working_version = working_version + 1, last_active = ? "
                "WHERE id = ? RETURNING working_version", (ts, rid)).fetchone()[0])
        finally:
            cur.close()
        in_step = expected_version is None or version == expected_version + 1
        return WorkingResult(version, in_step, refused, stale)

    def clear_working(self, robot: str) -> int:
        """Drop ``robot``'s working-memory membership (memories stay); return how many."""
        return self._shared.clear_working(robot)


def unhold(conn: Connection, ids: Sequence[int]) -> None:
    """Take memories out of every robot's working set, bumping those robots' versions."""
    for part in chunks(list(ids), 500):
        id_list = ", ".join(str(int(i)) for i in part)
        conn.execute(text(
            "UPDATE robots SET working_version = working_version + 1 WHERE id IN "
            f"(SELECT robot_id FROM working_memory WHERE memory_id IN ({id_list}))"))
        conn.execute(text(f"DELETE FROM working_memory WHERE memory_id IN ({id_list})"))


def _entering(cur: Any, put: Sequence[WorkingState], known: Mapping[str, tuple[int, bool]]
              ) -> tuple[dict[str, int], frozenset[str], list[str]]:
    """Which entries of ``put`` may enter (key -> memory id), which of those are stale
    (their memory is at another version than they name), and the keys of those that name
    no memory id (found by key, visible, by the caller). An entry the add of this
    transaction wrote (``known``) enters; one naming a memory id enters only while that
    memory exists and is not forgotten."""
    entering, by_id, by_key = sort_entries(put, {k: mid for k, (mid, _) in known.items()})
    stale: set[str] = set()
    for part in chunks(list(by_id), 500):
        admit_named(cur.execute(
            "SELECT id, version FROM memories WHERE id IN (SELECT value FROM json_each(?)) "
            "AND forgotten_at IS NULL", (json.dumps(part),)), by_id, entering, stale)
    return entering, frozenset(stale), by_key


def _key_ids(cur: Any, keys: Sequence[str]) -> dict[str, tuple[int, bool]]:
    """key -> (id, forgotten) of the memories now under ``keys`` (a join: see
    ``SQLiteWriter``)."""
    ids: dict[str, tuple[int, bool]] = {}
    for part in chunks(list(keys), 500):
        for key, mid, forgotten in cur.execute(
                "SELECT m.key, m.id, m.forgotten_at IS NOT NULL FROM json_each(?) j "
                "JOIN memories m ON m.key = j.value", (json.dumps(part),)):
            ids[key] = (int(mid), bool(forgotten))
    return ids


def _evict(cur: Any, rid: int, evictions: Sequence[tuple[str, int]],
           ids: Mapping[str, tuple[int, bool]], known: Mapping[str, tuple[int, bool]]) -> None:
    """Take the evicted memories out of robot ``rid``'s membership; one log line each. An
    eviction naming its memory's id takes out that memory only; one naming none, the
    memory now under its key."""
    mids = [mid or (ids[k][0] if k in ids else known[k][0] if k in known else None)
            for k, mid in evictions]
    held = [(rid, mid) for mid in dict.fromkeys(mids) if mid is not None]
    if held:
        cur.executemany("DELETE FROM working_memory WHERE robot_id = ? AND memory_id = ?", held)
    now = time.time()
    cur.executemany("INSERT INTO operations(at, op, robot_id, memory_id, key, detail) "
                    "VALUES (?, 'evict', ?, ?, ?, '{}')",
                    [(now, rid, mid, k) for (k, _named), mid in zip(evictions, mids, strict=True)])
