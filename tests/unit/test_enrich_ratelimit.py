"""The token bucket holds its rate, on a fake clock (exact) and on the real one (tolerant)."""

from __future__ import annotations

import threading
import time

import pytest

from htm_core.enrich import TokenBucket
from htm_core.errors import InvalidBudgetError


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()

    def clock(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


@pytest.mark.parametrize(("rate", "burst", "n"), [(5.0, 1, 21), (0.5, 1, 4), (10.0, 5, 55), (3.0, 3, 3)])
def test_n_per_second_holds_on_fake_clock(rate: float, burst: int, n: int) -> None:
    t = FakeTime()
    bucket = TokenBucket(rate, burst, clock=t.clock, sleep=t.sleep)
    stamps = []
    for _ in range(n):
        assert bucket.acquire()
        stamps.append(t.now)
    # the first `burst` go at once, then one every 1/rate seconds
    assert t.now == pytest.approx(max(0, n - burst) / rate)
    for i in range(n):
        for j in range(i + 1, n):
            window = stamps[j] - stamps[i]
            assert j - i + 1 <= burst + rate * window + 1e-9


def test_idle_time_refills_only_up_to_burst() -> None:
    t = FakeTime()
    bucket = TokenBucket(2.0, 3, clock=t.clock, sleep=t.sleep)
    for _ in range(3):
        assert bucket.try_acquire()
    assert not bucket.try_acquire()
    t.now += 100.0  # a long idle period
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_threads_share_the_limit_on_the_real_clock() -> None:
    bucket = TokenBucket(20.0, 1)
    stamps: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(5):
            bucket.acquire()
            with lock:
                stamps.append(time.monotonic())

    threads = [threading.Thread(target=take) for _ in range(4)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    assert len(stamps) == 20
    assert elapsed >= 19 / 20 * 0.95  # 20 tokens at 20/s, one at the start
    assert bucket.acquired == 20 and bucket.waited > 0


def test_cancel_ends_a_wait() -> None:
    bucket = TokenBucket(0.01)
    assert bucket.acquire()
    cancel = threading.Event()
    threading.Timer(0.05, cancel.set).start()
    start = time.monotonic()
    assert bucket.acquire(cancel=cancel) is False
    assert time.monotonic() - start < 5


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 1), (float("inf"), 1), (float("nan"), 1),
                                             (True, 1), (1, 0.5), ("2", 1)])
def test_bad_settings_rejected(rate: object, burst: object) -> None:
    with pytest.raises(InvalidBudgetError):
        TokenBucket(rate, burst)  # type: ignore[arg-type]
