"""What differs between the SQL backends in the SQL the shared roles write: one value each.

A :class:`Dialect` holds no state: how a time and a JSON value cross the driver, and the
few SQL fragments that differ (the collation under which text sorts in code point order,
the row-locking clause of a write's lookups, how a bound time or JSON text is cast).
:data:`SQLITE` and :data:`POSTGRES` are the two instances.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ...clock import to_timestamp, utc_from_timestamp

__all__ = ["HISTORY_LOCK", "POSTGRES", "SQLITE", "Dialect"]


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """One SQL backend's conversions and SQL fragments, as the shared roles use them."""

    name: str
    #: A datetime as the database stores it.
    time_in: Callable[[datetime], Any]
    #: A stored time as an aware UTC datetime.
    time_out: Callable[[Any], datetime]
    #: A stored JSON object as a dict.
    json_out: Callable[[Any], dict[str, Any]]
    #: What makes a text column sort in code point order, for exact prefix ranges
    #: (:func:`htm_core.identity.prefix_range`): nothing on SQLite (``BINARY`` over UTF-8).
    code_point_order: str = ""
    #: Appended to the row lookups of a write (PostgreSQL locks the rows it changes;
    #: SQLite's write transaction holds the whole database).
    lock_rows: str = ""
    #: The bound time ``:t`` of a working-set version bump as the database takes it.
    bump_time: str = ":t"
    #: The bound metadata ``:meta`` (JSON text) as the ``metadata`` column takes it.
    json_param: str = ":meta"
    #: Run first in every update's transaction so that history rows are committed in the
    #: order of their ids (a history mark then never misses a row committed after it);
    #: SQLite's writers are serial already.
    serial_history: str = ""


def _sqlite_json(value: Any) -> dict[str, Any]:
    return dict(json.loads(value))


def _postgres_time(value: Any) -> datetime:
    moment: datetime = value.astimezone(timezone.utc)
    return moment


def _postgres_json(value: Any) -> dict[str, Any]:
    return dict(value or {})


def _same(value: datetime) -> Any:
    return value


#: The advisory lock that orders PostgreSQL's history writes (see ``serial_history``):
#: htm's key for updates among its advisory-lock keys (``postgres/_schema.py``).
HISTORY_LOCK = 0x68746D_0004

SQLITE = Dialect(name="sqlite", time_in=to_timestamp, time_out=utc_from_timestamp,
                 json_out=_sqlite_json)

POSTGRES = Dialect(name="postgresql", time_in=_same, time_out=_postgres_time,
                   json_out=_postgres_json, code_point_order=' COLLATE "C"',
                   lock_rows=" FOR UPDATE", bump_time="CAST(:t AS timestamptz)",
                   json_param="CAST(:meta AS jsonb)",
                   serial_history=f"SELECT pg_advisory_xact_lock({HISTORY_LOCK})")
