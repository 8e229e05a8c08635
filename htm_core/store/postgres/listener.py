"""LISTEN/NOTIFY on PostgreSQL: robots' working-set versions a process may trust unread.

Triggers (:data:`NOTIFY_DDL`) notify :data:`CHANNEL` inside every transaction that moves a
robot's working-set version (payload: robot ids, or ``*``) or forgets a memory (``-``). A
store opened with ``listen=True`` keeps one listening connection (:class:`Listener`) and
remembers each robot's version as last read (:class:`HeardVersions`), trusted only while
the listener is connected, its last heartbeat started within ``staleness`` seconds,
nothing waits unread on its socket and nothing concerning the robot was heard or written
by this process since. The rules and their bound: docs/postgres.md, "Listening for changes".
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

logger = logging.getLogger("htm_core.store.postgres")

__all__ = ["CHANNEL", "NOTIFY_DDL", "HeardVersions", "Listener", "local_write"]

#: The channel htm's triggers notify on.
CHANNEL = "htm_working"

#: Statement-level trigger functions and triggers sending the notifications (a statement
#: that moves more than this many robots' versions sends ``*``).
_MANY = 200

NOTIFY_DDL = [
    f"""CREATE OR REPLACE FUNCTION htm_notify_working() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE ids text; moved integer;
    BEGIN
        SELECT count(*), string_agg(n.id::text, ',') INTO moved, ids
        FROM htm_new_robots n JOIN htm_old_robots o ON o.id = n.id
        WHERE n.working_version IS DISTINCT FROM o.working_version;
        IF moved > {_MANY} THEN
            PERFORM pg_notify('{CHANNEL}', '*');
        ELSIF moved > 0 THEN
            PERFORM pg_notify('{CHANNEL}', ids);
        END IF;
        RETURN NULL;
    END $$""",
    f"""CREATE OR REPLACE FUNCTION htm_notify_hidden() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', '-');
        RETURN NULL;
    END $$""",
    "DROP TRIGGER IF EXISTS htm_working_notify ON robots",
    "CREATE TRIGGER htm_working_notify AFTER UPDATE ON robots REFERENCING OLD TABLE AS "
    "htm_old_robots NEW TABLE AS htm_new_robots FOR EACH STATEMENT "
    "EXECUTE FUNCTION htm_notify_working()",
    "DROP TRIGGER IF EXISTS htm_hidden_notify ON memories",
    "CREATE TRIGGER htm_hidden_notify AFTER UPDATE OF forgotten_at ON memories FOR EACH ROW "
    "WHEN (OLD.forgotten_at IS NULL AND NEW.forgotten_at IS NOT NULL) "
    "EXECUTE FUNCTION htm_notify_hidden()",
]

#: How many triggers of :data:`NOTIFY_DDL` a database has (2: all installed).
NOTIFY_TRIGGERS_SQL = (
    "SELECT count(*) FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c "
    "ON c.oid = t.tgrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE t.tgname IN ('htm_working_notify', 'htm_hidden_notify') "
    "AND n.nspname = ANY(current_schemas(false))")

#: Writes committed by this process, per database (its masked URL): a store's remembered
#: versions are not trusted across one (its notification may not have arrived yet).
_local_writes: dict[str, int] = {}
_local_lock = threading.Lock()


def local_write(database: str) -> None:
    """Note that a store of this process committed a write on ``database``."""
    with _local_lock:
        _local_writes[database] = _local_writes.get(database, 0) + 1


#: What a remembered version was read under: (reconnections and ``*`` notifications,
#: notifications naming the robot, forgets heard, local writes).
Stamp = tuple[int, int, int, int]


class Listener:
    """One listening connection, kept in a background thread, reconnecting when lost.

    ``connect`` opens an autocommit psycopg connection. :meth:`stamp` says what has been
    heard about a robot; :meth:`vouches` whether nothing changed since a stamp.
    """

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], database: str, *,
                 staleness: float) -> None:
        self.staleness = staleness
        self.database = database
        self._connect = connect
        self._lock = threading.Lock()
        self._robots: dict[int, int] = {}
        self._all = 0
        self._hidden = 0
        self._synced = -math.inf
        self._fd = -1
        #: The listening connection's server process id (0 while disconnected).
        self.backend_pid = 0
        self._pid = os.getpid()
        self._wake_r, self._wake_w = os.pipe()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="htm-listener", daemon=True)
        self._thread.start()

    # -- the read path ---------------------------------------------------------------

    def stamp(self, rid: int) -> Stamp:
        """What has been heard that concerns robot ``rid``, taken before its version is read."""
        with self._lock:
            return (self._all, self._robots.get(rid, 0), self._hidden,
                    _local_writes.get(self.database, 0))

    def vouches(self, rid: int, stamp: Stamp) -> bool:
        """Whether a version read under ``stamp`` is still the robot's (see the module)."""
        if os.getpid() != self._pid:
            return False
        fd = self._fd
        if fd < 0 or time.monotonic() - self._synced > self.staleness:
            return False
        try:
            if select.select([fd], [], [], 0)[0]:
                return False  # something arrived the thread has not handled yet
        except (OSError, ValueError):
            return False
        return self.stamp(rid) == stamp

    @property
    def healthy(self) -> bool:
        """Whether the listener is connected and its last heartbeat is recent enough."""
        return self._fd >= 0 and time.monotonic() - self._synced <= self.staleness

    # -- the thread ------------------------------------------------------------------

    def _heard(self, note: psycopg.Notify) -> None:
        self._payload(note.payload)

    def _payload(self, payload: str) -> None:
        with self._lock:
            for part in payload.split(","):
                if part == "*":
                    self._all += 1
                elif part == "-":
                    self._hidden += 1
                elif part.isdigit():
                    self._robots[int(part)] = self._robots.get(int(part), 0) + 1

    def _run(self) -> None:
        delay = 0.05
        while not self._stop.is_set():
            try:
                pg = self._connect()
            except Exception as exc:  # the server is away: reads check versions meanwhile
                logger.debug("listener for %s cannot connect: %s", self.database, exc)
                self._pause(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.05
            try:
                self._listen(pg)
            except psycopg.Error as exc:
                if not self._stop.is_set():
                    logger.warning(
                        "the listening connection to %s was lost (%s); reads check the "
                        "working-set version until it is back", self.database, exc)
            finally:
                with self._lock:
                    self._fd, self._synced, self.backend_pid = -1, -math.inf, 0
                with contextlib.suppress(psycopg.Error):
                    pg.close()

    def _listen(self, pg: psycopg.Connection[Any]) -> None:
        """LISTEN, then a heartbeat every half ``staleness`` (its execution hands what
        arrived before it to :meth:`_heard`), reading notifications as they arrive."""
        pg.add_notify_handler(self._heard)
        pg.execute(f"LISTEN {CHANNEL}")
        with self._lock:
            self._all += 1  # nothing heard before this connection listened is known
            self._fd, self.backend_pid = pg.fileno(), pg.info.backend_pid
        beat = 0.0
        while not self._stop.is_set():
            if time.monotonic() >= beat:
                started = time.monotonic()
                pg.execute("SELECT 1")
                with self._lock:
                    self._synced = started
                beat = started + self.staleness / 2
            ready = select.select([self._fd, self._wake_r], [], [],
                                  max(0.0, beat - time.monotonic()))[0]
            if self._wake_r in ready:
                return
            if self._fd in ready:  # notifications, or the end of the connection (raises)
                pg.pgconn.consume_input()
                while (note := pg.pgconn.notifies()) is not None:
                    self._payload(note.extra.decode())

    def _pause(self, seconds: float) -> None:
        select.select([self._wake_r], [], [], seconds)

    def close(self) -> None:
        """Stop the thread and close the listening connection."""
        if self._stop.is_set():
            return
        self._stop.set()
        if os.getpid() == self._pid:
            os.write(self._wake_w, b"x")
            self._thread.join(timeout=5)
        os.close(self._wake_r)
        os.close(self._wake_w)


class HeardVersions:
    """Each robot's working-set version as last read, with the stamp it was read under."""

    def __init__(self, listener: Listener | None, robot_ids: dict[str, int]) -> None:
        self.listener = listener
        self._robot_ids = robot_ids
        self._known: dict[str, tuple[int, int, Stamp]] = {}
        #: Reads answered from memory, and reads that went to the database (for tests and
        #: benchmarks).
        self.skipped = 0
        self.checked = 0

    def version(self, robot: str) -> int | None:
        """The robot's version when the listener vouches for it, else None (read it)."""
        entry = self._known.get(robot)
        if entry is None or self.listener is None:
            self.checked += 1
            return None
        version, rid, stamp = entry
        if self.listener.vouches(rid, stamp):
            self.skipped += 1
            return version
        self.checked += 1
        return None

    def stamp(self, robot: str) -> tuple[int, Stamp] | None:
        """Taken before reading ``robot``'s version: its id and what has been heard."""
        rid = self._robot_ids.get(robot)
        if self.listener is None or rid is None:
            return None
        return rid, self.listener.stamp(rid)

    def remember(self, robot: str, version: int, taken: tuple[int, Stamp] | None) -> None:
        """``robot``'s version, as read after :meth:`stamp` gave ``taken``."""
        if taken is not None:
            self._known[robot] = (version, taken[0], taken[1])
