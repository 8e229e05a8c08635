"""SQLite's raw reads: cursors on the store's own read connection, and the marks
(``PRAGMA data_version``) that tell whether anything was committed since a read.

Every recall runs a few small reads; :class:`SQLiteReads` runs them on one connection kept
out of the pool, and lets the parts that cache what they read (visible ids, working-set
versions, briefs, full-text counts, the vector index's catch-up) check in one cheap read
that nothing moved.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from ._errors import read_error
from .engine import SQLiteDatabase

__all__ = ["Mark", "OwnWrite", "SQLiteReads", "Seen"]

#: A read connection and its ``data_version``: see :meth:`SQLiteReads.mark`.
Mark = tuple[sqlite3.Connection, int]

#: How many visible ids a :class:`Seen` keeps before it starts again.
_SEEN_KEPT = 20_000

#: How many marks :meth:`SQLiteReads.same_as` keeps before it starts again.
_SAME_KEPT = 64


class Seen:
    """Memories found visible and robots' working-set versions, as of ``mark``."""

    __slots__ = ("mark", "versions", "visible")

    def __init__(self, mark: Mark) -> None:
        self.mark = mark
        self.visible: set[int] = set()
        self.versions: dict[str, int] = {}


class _ReadCursor:
    """:meth:`SQLiteReads.cursor`'s block: a plain object rather than a generator, as a
    recall enters about a dozen of them. The store's lock is held inside."""

    __slots__ = ("_began", "_conn", "_cur", "_reads", "_snapshot", "_what")
    _began: bool
    _conn: sqlite3.Connection
    _cur: sqlite3.Cursor | None

    def __init__(self, reads: SQLiteReads, what: str, snapshot: bool) -> None:
        self._reads, self._what, self._snapshot = reads, what, snapshot

    def __enter__(self) -> sqlite3.Cursor:
        self._reads.db.lock.acquire()
        self._cur = None
        self._began = False
        try:
            conn = self._conn = self._reads.db.reader()
            cur = self._cur = conn.cursor()
            if self._snapshot and not conn.in_transaction:
                self._began = True
                cur.execute("BEGIN")
        except BaseException as exc:
            self._close(exc)
            raise
        return cur

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._close(exc)

    def _close(self, exc: BaseException | None) -> None:
        """Close the cursor, end the transaction the block began, let go of the lock; a
        driver error (``exc``, the block's, else one met here) becomes htm's."""
        reads, failed = self._reads, None
        try:
            if self._cur is not None:
                self._cur.close()
            if self._began:
                reads._snapshot_mark = None
                if self._conn.in_transaction:
                    self._conn.rollback()
        except Exception as error:
            failed = error
        finally:
            reads.db.lock.release()
        raised = exc if exc is not None else failed
        if raised is not None:
            mapped = read_error(raised, reads.db.url, self._what)
            if mapped is not None:
                raise mapped from raised
            if failed is not None and exc is None:
                raise failed


class SQLiteReads:
    """Raw read cursors and the marks of what they read."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db
        #: The mark of the read transaction in progress on the read connection, once read.
        self._snapshot_mark: Mark | None = None
        #: The thread in a block of reads that all go by one mark read first, and that mark
        #: (see :meth:`holding`).
        self._held_mark: tuple[int, Mark] | None = None
        #: See :meth:`seen`.
        self._seen_at: Seen | None = None
        #: The mark :meth:`mark` read last (None: none yet, or an in-memory database).
        self.last_mark: Mark | None = None
        #: Marks after this store's own writes that change nothing a read keeps, each to
        #: the mark before it (see :class:`OwnWrite`).
        self._same: dict[Mark, Mark] = {}

    def cursor(self, what: str = "read", *, snapshot: bool = True) -> _ReadCursor:
        """A raw cursor in a read transaction (one snapshot), as :meth:`SQLiteDatabase.read`'s but without
        a SQLAlchemy ``Connection`` or a pool checkout (the store's own read connection):
        every recall runs a few of these small reads, and those would be most of their
        time. Nested, it reads in the outer one's snapshot. ``snapshot=False`` (a single
        statement, or statements checked against a :meth:`mark` read first) begins no
        transaction: each statement then reads the newest state. Driver errors become
        htm's, as in :func:`~htm_core.store.sqlite._errors.map_sqlite_errors`."""
        return _ReadCursor(self, what, snapshot)

    def own_write(self) -> OwnWrite:
        """An :class:`OwnWrite` for one write of this store."""
        return OwnWrite(self)

    def known_as(self, mark: Mark) -> Mark:
        """``mark``, or the mark before the own writes that led to it (see :meth:`same_as`)."""
        return self._same.get(mark, mark)

    def same_as(self, after: Mark, before: Mark) -> None:
        """Read ``after`` as ``before`` (an :class:`OwnWrite` found nothing else between
        them); the working-set versions read are dropped, as the write moved one."""
        if len(self._same) >= _SAME_KEPT:
            self._same.clear()
        self._same[after] = before
        if self._seen_at is not None:
            self._seen_at.versions.clear()

    def mark(self, cur: sqlite3.Cursor) -> Mark | None:
        """The read connection and its ``data_version`` (read once per snapshot), which
        moves with every commit of any other connection, in this process or another: what
        the store read while the mark stays the same still holds. Outside a snapshot,
        reading the mark first and then the data keeps that true (the data is as new as
        the mark or newer, and a commit in between moves the mark). None for an in-memory
        database (its writes share the read connection, which ``data_version`` does not
        count)."""
        if self.db.memory_db:
            return None
        conn = cur.connection
        mark = self.held()
        if mark is not None and mark[0] is conn:
            return mark
        held = self._snapshot_mark
        if held is not None and held[0] is conn and conn.in_transaction:
            return held
        mark = self.last_mark = self.known_as(
            (conn, int(cur.execute("PRAGMA data_version").fetchone()[0])))
        if conn.in_transaction:
            self._snapshot_mark = mark
        return mark

    @contextmanager
    def holding(self) -> Iterator[sqlite3.Cursor]:
        """A block of reads (no transaction) that all go by one mark, read first: what
        each reads is as new as it or newer, as :meth:`mark` needs. One ``data_version``
        read and no ``BEGIN`` for the several reads of a recall's search."""
        with self.cursor(snapshot=False) as cur:
            mark = self.mark(cur)
            self._held_mark = None if mark is None else (threading.get_ident(), mark)
            try:
                yield cur
            finally:
                self._held_mark = None

    def held(self) -> Mark | None:
        """The mark of the :meth:`holding` block this thread is in (it holds the lock),
        or None: a step that checks it first needs no cursor while nothing moved."""
        held = self._held_mark
        return held[1] if held is not None and held[0] == threading.get_ident() else None

    def seen(self, mark: Mark | None) -> Seen | None:
        """What reads found visible, and the working-set versions they read, as of ``mark``
        (emptied when the mark moved); None without a mark."""
        if mark is None:
            return None
        seen = self._seen_at
        if seen is None or seen.mark != mark or len(seen.visible) > _SEEN_KEPT:
            seen = self._seen_at = Seen(mark)
        return seen


class OwnWrite:
    """One write of this store that changes nothing its reads keep (working-set membership,
    access statistics), after which they keep: when no other connection commits around
    it, the read connection's mark after it is read as the mark before it.

    :meth:`before` runs inside the write transaction, after its statements (the write lock
    is held: nothing else commits before it), :meth:`after` once it committed, on the same
    connection. A connection's ``data_version`` moves only with other connections'
    commits: the writer's, the same before and after, says none landed in between, so the
    read connection's new one (read before the writer's second) counts this write alone.
    What such a write does change, the working-set versions read, is read again (see
    :meth:`SQLiteReads.same_as`). A failed read here only leaves the marks as they are.
    """

    def __init__(self, reads: SQLiteReads) -> None:
        self._reads = reads
        self._before: tuple[int, Mark] | None = None

    def before(self, writer: Any) -> None:
        """Read both marks inside the write transaction (the caller holds the store's lock)."""
        reads = self._reads
        if reads.db.memory_db:
            return
        try:
            conn = reads.db.reader()
            if conn.in_transaction:  # a snapshot's mark is not the newest state's
                return
            self._before = (_data_version(writer), reads.known_as((conn, _data_version(conn))))
        except sqlite3.Error:
            self._before = None

    def after(self, writer: Any) -> None:
        """Once committed: the read connection's new mark is the one before, if nothing
        else committed (the caller holds the store's lock)."""
        if self._before is None or writer.in_transaction:
            return
        try:
            conn = self._reads.db.reader()
            mark = (conn, _data_version(conn))
            if _data_version(writer) != self._before[0] or conn is not self._before[1][0]:
                return
        except sqlite3.Error:
            return
        self._reads.same_as(mark, self._before[1])


def _data_version(conn: Any) -> int:
    """The ``data_version`` of a driver connection (sqlite3's)."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])
