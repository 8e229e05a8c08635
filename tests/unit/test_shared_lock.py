"""``SharedLock``: native calls (greenlets on one loop thread) and threads exclude each other,
a contended native call waits on the loop (the other calls run meanwhile), and nobody
deadlocks. Greenlets here are the real ones of ``run_native``; the "I/O" a holder does is
``sleep`` (a real wait on the loop)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from htm_core._native import SharedLock, in_native, run_native, sleep, wait_for
from htm_core.background import FlushTimer

BOUND = 30.0


async def test_two_native_calls_on_one_loop_exclude_each_other() -> None:
    """A ``threading.RLock`` would let both in (one thread owns it); this one does not."""
    lock = SharedLock()
    inside: list[int] = []
    overlaps: list[tuple[int, int]] = []

    def call(n: int) -> None:
        assert in_native()
        with lock:
            if inside:
                overlaps.append((inside[0], n))
            inside.append(n)
            sleep(0.01)  # the loop runs the other calls meanwhile
            with lock:  # reentrant for its owner
                sleep(0.001)
            inside.remove(n)

    await asyncio.wait_for(asyncio.gather(*(run_native(call, n) for n in range(8))), BOUND)
    assert overlaps == [] and inside == []


async def test_a_contended_native_call_lets_the_loop_run() -> None:
    """While one native call holds the lock across a wait, another one waiting for it does
    not block the loop: a plain coroutine keeps ticking."""
    lock = SharedLock()
    ticks: list[int] = []
    order: list[str] = []

    def holder() -> None:
        with lock:
            order.append("held")
            sleep(0.05)
            order.append("released")

    def waiter() -> None:
        sleep(0.005)
        with lock:
            order.append("waiter in")

    async def ticker() -> None:
        for n in range(10):
            ticks.append(n)
            await asyncio.sleep(0.002)

    await asyncio.wait_for(asyncio.gather(run_native(holder), run_native(waiter), ticker()),
                           BOUND)
    assert order == ["held", "released", "waiter in"]
    assert ticks == list(range(10))


async def test_a_thread_and_a_native_call_exclude_each_other_both_ways() -> None:
    lock = SharedLock()
    order: list[str] = []
    taken = threading.Event()

    def in_thread() -> None:
        with lock:
            taken.set()
            order.append("thread in")
            time.sleep(0.05)
            order.append("thread out")

    def native() -> None:
        with lock:
            order.append("native in")
            sleep(0.02)
            order.append("native out")

    worker = threading.Thread(target=in_thread)
    worker.start()
    await asyncio.to_thread(taken.wait, BOUND)
    await asyncio.wait_for(run_native(native), BOUND)  # waits for the thread, on the loop
    assert order == ["thread in", "thread out", "native in", "native out"]

    order.clear()
    held = asyncio.Event()
    release = asyncio.Event()

    def native_holder() -> None:
        with lock:
            order.append("native in")
            loop_wait(held, release)
            order.append("native out")

    def loop_wait(held: asyncio.Event, release: asyncio.Event) -> None:
        from htm_core._native import wait_for

        held.set()
        wait_for(release.wait())

    def thread_waiter() -> None:
        with lock:
            order.append("thread in")

    task = asyncio.ensure_future(run_native(native_holder))
    await held.wait()
    other = threading.Thread(target=thread_waiter)
    other.start()
    await asyncio.sleep(0.02)
    assert order == ["native in"]  # the thread is waiting
    release.set()
    await asyncio.wait_for(task, BOUND)
    await asyncio.to_thread(other.join, BOUND)
    assert order == ["native in", "native out", "thread in"]


async def test_a_native_acquire_times_out_and_a_non_blocking_one_fails_fast() -> None:
    lock = SharedLock()
    taken = threading.Event()
    done = threading.Event()

    def holder() -> None:
        with lock:
            taken.set()
            done.wait(BOUND)

    worker = threading.Thread(target=holder)
    worker.start()
    await asyncio.to_thread(taken.wait, BOUND)
    try:
        assert await run_native(lock.acquire, False) is False
        assert await run_native(lock.acquire, True, 0.02) is False
        assert lock.acquire(timeout=0.01) is False  # a thread (here, the loop's) times out too
    finally:
        done.set()
        worker.join(BOUND)
    assert await run_native(lock.acquire) is True
    with pytest.raises(RuntimeError, match="another"):
        lock.release()  # not the owner: the native call that took it was another greenlet


def test_threads_use_it_as_an_rlock_and_the_flush_timer_takes_it() -> None:
    lock = SharedLock()
    counter = [0]

    def bump() -> None:
        for _ in range(200):
            with lock, lock:
                counter[0] += 1

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BOUND)
    assert counter[0] == 800
    flushed: list[int] = []
    timer = FlushTimer(lambda: flushed.append(1), lock)
    timer.arm(60)
    timer.fire(timeout=1)
    timer.close()
    assert flushed == [1]


async def test_a_sync_call_on_the_loop_thread_is_refused_instead_of_waiting_forever() -> None:
    """Code on the loop's thread that is not a native call (a coroutine calling a sync
    method) and finds the lock held by a suspended native call of the same loop would
    block the loop, so the holder could never release: it gets a RuntimeError at once.
    A thread of its own still waits, and gets the lock once the holder is done."""
    lock = SharedLock()
    holding, release = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def holder() -> None:
        with lock:
            loop.call_soon_threadsafe(holding.set)
            wait_for(release.wait())

    task = asyncio.ensure_future(run_native(holder))
    await asyncio.wait_for(holding.wait(), BOUND)
    assert not in_native()
    with pytest.raises(RuntimeError, match="async twin"):
        lock.acquire()
    assert lock.acquire(blocking=False) is False  # not blocking: a plain False, as before
    got: list[bool] = []

    def wait_in_a_thread() -> None:
        got.append(lock.acquire(timeout=BOUND))
        lock.release()

    waiter = threading.Thread(target=wait_in_a_thread)
    waiter.start()
    release.set()
    await asyncio.wait_for(task, BOUND)
    await asyncio.to_thread(waiter.join, BOUND)
    assert got == [True]
