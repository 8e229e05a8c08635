"""Clocks: where htm reads the time, so tests and imports can set it."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["Clock", "FrozenClock", "local_now", "local_zone", "to_aware", "to_timestamp",
           "utc_from_timestamp"]

#: A clock is any callable that returns the current time as an aware ``datetime``.
#: Its time zone is the one timeframes such as "today" are computed in.
Clock = Callable[[], datetime]


def local_now() -> datetime:
    """The default clock: now, in the machine's local time zone (:func:`local_zone`)."""
    return datetime.now(local_zone())


def local_zone() -> tzinfo:
    """The machine's time zone with its daylight-saving rules, as a ``ZoneInfo``.

    Read from the ``TZ`` environment variable (``"Europe/Berlin"``, ``":Europe/Berlin"``
    or a path into the zone database), else from the zone ``/etc/localtime`` links to;
    when neither names a zone, the fixed UTC offset the machine has now.
    """
    zone = _named_zone(os.environ.get("TZ"), _localtime_target())
    if zone is not None:
        return zone
    fixed = datetime.now().astimezone().tzinfo
    return fixed if fixed is not None else timezone.utc


@lru_cache(maxsize=1)
def _localtime_target() -> str:
    """Where /etc/localtime points, read once per process (as libc reads it once)."""
    return os.path.realpath("/etc/localtime")


@lru_cache(maxsize=8)
def _named_zone(tz_env: str | None, localtime: str) -> ZoneInfo | None:
    name = (tz_env or localtime.partition("/zoneinfo/")[2]).lstrip(":")
    key = name.partition("/zoneinfo/")[2] or name
    if not key or key.startswith("/"):
        return None
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None  # TZ in POSIX form ("CET-1CEST") or a zone this machine lacks


class FrozenClock:
    """A clock that only moves when told to; for tests, notebooks and imports.

    >>> clock = FrozenClock(datetime(2024, 5, 1, 12, tzinfo=timezone.utc))
    >>> clock.advance(hours=2).hour
    14
    """

    def __init__(self, start: datetime, tz: tzinfo | None = None) -> None:
        """Start at ``start``; a naive one is taken in ``tz`` (default: local), an aware
        one is shown in ``tz`` when given."""
        self._now = to_aware(start, tz)
        if tz is not None:
            self._now = self._now.astimezone(tz)

    def __call__(self) -> datetime:
        return self._now

    def advance(self, **delta: float) -> datetime:
        """Move the clock forward by ``timedelta(**delta)`` of elapsed time (across a
        daylight-saving change too) and return the new time."""
        tz = self._now.tzinfo
        self._now = (self._now.astimezone(timezone.utc) + timedelta(**delta)).astimezone(tz)
        return self._now

    def set(self, when: datetime) -> None:
        """Jump to ``when``."""
        self._now = to_aware(when, self._now.tzinfo)


def to_aware(when: datetime, tz: tzinfo | None = None) -> datetime:
    """Give a naive datetime the time zone ``tz`` (default: :func:`local_zone`), with
    the offset in force on its date; keep aware ones."""
    if when.tzinfo is None:
        if tz is None:
            tz = local_zone()
            if not isinstance(tz, ZoneInfo):
                return when.astimezone()  # the system's rules for that date
        return when.replace(tzinfo=tz)
    return when


def to_timestamp(when: datetime) -> float:
    """POSIX seconds of an aware (or local naive) datetime."""
    return to_aware(when).timestamp()


def utc_from_timestamp(ts: float) -> datetime:
    """Aware UTC datetime from POSIX seconds."""
    return datetime.fromtimestamp(ts, timezone.utc)  # positional: a keyword costs more
