"""Clocks: where htm reads the time, so tests and imports can set it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone, tzinfo

__all__ = ["Clock", "FrozenClock", "local_now", "to_aware", "to_timestamp", "utc_from_timestamp"]

#: A clock is any callable that returns the current time as an aware ``datetime``.
#: Its time zone is the one timeframes such as "today" are computed in.
Clock = Callable[[], datetime]


def local_now() -> datetime:
    """The default clock: now, in the machine's local time zone."""
    return datetime.now().astimezone()


class FrozenClock:
    """A clock that only moves when told to; for tests, notebooks and imports.

    >>> clock = FrozenClock(datetime(2024, 5, 1, 12, tzinfo=timezone.utc))
    >>> clock.advance(hours=2).hour
    14
    """

    def __init__(self, start: datetime, tz: tzinfo | None = None) -> None:
        self._now = to_aware(start, tz)

    def __call__(self) -> datetime:
        return self._now

    def advance(self, **delta: float) -> datetime:
        """Move the clock forward by ``timedelta(**delta)`` and return the new time."""
        self._now = self._now + timedelta(**delta)
        return self._now

    def set(self, when: datetime) -> None:
        """Jump to ``when``."""
        self._now = to_aware(when, self._now.tzinfo)


def to_aware(when: datetime, tz: tzinfo | None = None) -> datetime:
    """Give a naive datetime the time zone ``tz`` (default: local); keep aware ones."""
    if when.tzinfo is None:
        return when.replace(tzinfo=tz) if tz is not None else when.astimezone()
    return when


def to_timestamp(when: datetime) -> float:
    """POSIX seconds of an aware (or local naive) datetime."""
    return to_aware(when).timestamp()


def utc_from_timestamp(ts: float) -> datetime:
    """Aware UTC datetime from POSIX seconds."""
    return datetime.fromtimestamp(ts, tz=timezone.utc)
