"""Reads on a streaming replica (``read_database_url=``), with read-your-own-writes.

Searches and lists run on the replica once it has replayed (``pg_last_wal_replay_lsn()``)
the primary's WAL position after this process's newest write, waiting up to
``replica_wait`` seconds, else on the primary; a replica that fails is skipped for
:data:`DOWN_FOR` seconds with a logged warning. What it guarantees: docs/postgres.md,
"Read replicas".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import text

from ..._native import sleep
from ...errors import StoreError
from .engine import PostgresDatabase

logger = logging.getLogger("htm_core.store.postgres")

T = TypeVar("T")

__all__ = ["DOWN_FOR", "ReplicaReads"]

#: Seconds a replica that failed is left alone before it is tried again.
DOWN_FOR = 5.0

_REPLAYED = "SELECT pg_last_wal_replay_lsn() - '0/0'::pg_lsn"


class ReplicaReads:
    """Routes reads to ``replica`` while it has replayed this process's writes to ``primary``."""

    def __init__(self, primary: PostgresDatabase, replica: PostgresDatabase, *,
                 wait: float) -> None:
        self.primary = primary
        self.replica = replica
        self.wait = wait
        self._replayed = -1
        self._down_until = 0.0
        self._lock = threading.Lock()
        #: Reads served by the replica and by the primary instead (for tests and benchmarks).
        self.on_replica = 0
        self.on_primary = 0
        primary.track_lsn = True

    def route(self, what: str, on_replica: Callable[[], T], on_primary: Callable[[], T]) -> T:
        """``on_replica()`` when the replica is up and has replayed this process's writes,
        else (or when it fails) ``on_primary()``."""
        if self._caught_up(what):
            try:
                result = on_replica()
            except StoreError as exc:
                self._lost(what, exc)
            else:
                self.on_replica += 1
                return result
        self.on_primary += 1
        return on_primary()

    def _caught_up(self, what: str) -> bool:
        if time.monotonic() < self._down_until:
            return False
        needed = self.primary.written_lsn()
        if needed <= self._replayed:
            return True
        deadline = time.monotonic() + self.wait
        pause = 0.001
        while True:
            try:
                value = self.replica.read("reading the replica's replay position",
                                          lambda conn: conn.execute(text(_REPLAYED)).scalar())
            except StoreError as exc:
                self._lost(what, exc)
                return False
            if value is None:  # not a standby: it has everything it will ever have
                return True
            with self._lock:
                self._replayed = max(self._replayed, int(value))
            if self._replayed >= needed:
                return True
            if time.monotonic() + pause > deadline:
                logger.debug("%s: the replica %s is behind this process's writes; reading "
                             "the primary", what, self.replica.url)
                return False
            sleep(pause)
            pause = min(pause * 2, 0.02)

    def _lost(self, what: str, exc: StoreError) -> None:
        self._down_until = time.monotonic() + DOWN_FOR
        logger.warning("%s on the replica %s failed (%s); reading the primary %s for the "
                       "next %.0f s", what, self.replica.url, exc, self.primary.url, DOWN_FOR)

    def close(self) -> None:
        """Release the replica's connections."""
        self.replica.close()
