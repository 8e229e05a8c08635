"""A thread-safe token bucket: at most ``rate`` acquisitions per second on average.

The bucket holds up to ``burst`` tokens and refills continuously at ``rate`` tokens per
second; :meth:`TokenBucket.acquire` takes one (waiting until one is there). So over any
window of ``t`` seconds at most ``burst + rate * t`` acquisitions succeed. The clock and
the sleep are replaceable, so tests can check the limit on a fake clock without waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..validation import check_float

__all__ = ["TokenBucket"]

_EPSILON = 1e-9  # float slack, so a refill that lands a hair under one token still counts


class TokenBucket:
    """Limits calls to ``rate`` per second, allowing bursts of up to ``burst``.

    Args:
        rate: tokens added per second (requests per second); a positive finite number.
        burst: the most tokens the bucket holds (and starts with); at least 1.
        clock: monotonic seconds (default :func:`time.monotonic`).
        sleep: how to wait (default :func:`time.sleep`).

    >>> now = [0.0]
    >>> bucket = TokenBucket(2.0, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    >>> for _ in range(5):
    ...     _ = bucket.acquire()
    >>> now[0]   # 1 token at the start, then one every 0.5 s
    2.0
    """

    def __init__(self, rate: float, burst: float = 1.0, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = check_float("rate", rate, 0, above=True,
                                what="a number of requests per second")
        self.burst = check_float("burst", burst, 1)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.burst
        self._last = clock()
        self._lock = threading.Lock()
        self.acquired = 0
        self.waited = 0.0

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def _take(self) -> bool:
        """Refill, then take a token if there is one (the caller holds the lock)."""
        self._refill()
        if self._tokens >= 1.0 - _EPSILON:
            self._tokens = max(0.0, self._tokens - 1.0)
            self.acquired += 1
            return True
        return False

    def try_acquire(self) -> bool:
        """Take a token if one is there now; never waits."""
        with self._lock:
            return self._take()

    def acquire(self, cancel: threading.Event | None = None) -> bool:
        """Wait for a token and take it; ``False`` if ``cancel`` was set while waiting.

        With ``cancel``, the wait is ``cancel.wait(...)``, so setting the event ends it at once.
        """
        while True:
            with self._lock:
                if self._take():
                    return True
                wait = (1.0 - self._tokens) / self.rate
            if cancel is not None:
                if cancel.is_set() or cancel.wait(wait):
                    return False
            else:
                self._sleep(wait)
            with self._lock:
                self.waited += wait

    def __repr__(self) -> str:
        return f"TokenBucket(rate={self.rate}, burst={self.burst})"
