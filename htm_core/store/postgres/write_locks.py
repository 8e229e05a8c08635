"""The order in which PostgreSQL write transactions take their locks, so they never deadlock.

A transaction that adds memories or changes a working set first takes transaction-scoped
advisory locks: the robots whose working set it changes (by id), then the keys it adds (by
a 32-bit hash of the key), each list in ascending order. Two writers that share a robot or
a key therefore meet at the first lock they share, before either holds a row the other
wants, instead of locking rows in two orders (keys in key order, entering memories in id
order, unique-index waits in batch order) and deadlocking. See docs/postgres.md.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ._schema import _KEY_WRITE_LOCK, _ROBOT_WRITE_LOCK

__all__ = ["key_lock_id", "lock_for_writing"]


def key_lock_id(key: str) -> int:
    """The advisory-lock id of ``key``: a signed 32-bit CRC of its UTF-8 bytes (two keys
    may share one; they then take turns, which is safe)."""
    crc = zlib.crc32(key.encode("utf-8", "surrogatepass"))
    return crc - (1 << 32) if crc >= 1 << 31 else crc


def lock_for_writing(conn: Connection, *, robot_ids: Iterable[int] = (),
                     keys: Iterable[str] = ()) -> None:
    """Take the write locks of ``robot_ids`` and then of ``keys``, in ascending order, for
    the rest of ``conn``'s transaction (released at commit or rollback)."""
    for cls, ids in ((_ROBOT_WRITE_LOCK, sorted(set(robot_ids))),
                     (_KEY_WRITE_LOCK, sorted({key_lock_id(k) for k in keys}))):
        if ids:  # unnest keeps the array's (ascending) order
            conn.execute(text(
                "SELECT count(pg_advisory_xact_lock(:c, i)) "
                "FROM unnest(CAST(:ids AS integer[])) AS i"), {"c": cls, "ids": ids})
