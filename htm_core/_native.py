"""Native async: the sync code run in a greenlet on the event loop's thread.

:func:`run_native` runs a sync callable in a greenlet (SQLAlchemy's ``greenlet_spawn``)
on the calling event loop's thread. Code that does I/O asks :func:`in_native` whether it
runs so; when it does, it hands its waits to the loop with :func:`wait_for` (the
PostgreSQL engine's async pool and psycopg's async connections, :func:`sleep`, a
contended :class:`SharedLock`), and the greenlet is suspended meanwhile, so one thread
serves any number of calls at once and the logic is the sync code's, unchanged.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import greenlet  # type: ignore[import-untyped]
from sqlalchemy.util import await_only, greenlet_spawn

__all__ = ["SharedLock", "in_native", "off_loop", "run_native", "sleep", "wait_for"]

T = TypeVar("T")


def in_native() -> bool:
    """Whether this code runs in a greenlet that may wait on the event loop (one
    :func:`run_native` or SQLAlchemy's asyncio extension made)."""
    return bool(getattr(greenlet.getcurrent(), "__sqlalchemy_greenlet_provider__", False))


async def run_native(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` run in a greenlet on this event loop's thread."""
    result: T = await greenlet_spawn(fn, *args, **kwargs)
    return result


def wait_for(awaitable: Awaitable[T]) -> T:
    """The result of ``awaitable``, the greenlet suspended until the loop has it (only
    where :func:`in_native`)."""
    result: T = await_only(awaitable)
    return result


def sleep(seconds: float) -> None:
    """Pause ``seconds``: the loop runs other calls meanwhile when :func:`in_native`, the
    thread sleeps otherwise."""
    if in_native():
        wait_for(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


def off_loop(fn: Callable[[], T]) -> T:
    """``fn()``, in a worker thread when :func:`in_native` (CPU work of milliseconds,
    such as a model's forward pass, would stall every call on the loop), else here."""
    if in_native():
        return wait_for(asyncio.to_thread(fn))
    return fn()


def _root(glet: Any) -> Any:
    """The main greenlet of the thread ``glet`` runs on (each thread has its own)."""
    while glet is not None and glet.parent is not None:
        glet = glet.parent
    return glet


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class SharedLock:
    """A reentrant lock shared by threads and by the greenlets of :func:`run_native`.

    Its owner is ``greenlet.getcurrent()``, distinct per thread and per greenlet: two
    native calls on one loop thread exclude each other (a ``threading.RLock`` would let
    both in, both running on its owning thread). A native call that finds it taken waits
    on the loop (the other calls run on), a thread waits as on a ``threading.RLock``.

    A lock held while the holder may do I/O (a store call) must be one of these once the
    store can run natively; a ``threading`` lock held only around work that never waits
    (no store call, no callback that may make one) cannot be met by a second greenlet
    while held, and stays as it is.

    A plain (not native) call on the loop's own thread that would wait for a native call
    of that loop raises RuntimeError instead: the holder can only go on when the loop
    does, so waiting would never end.

    Methods: ``acquire(blocking=True, timeout=-1)``, ``release()``, and the ``with``
    statement, as ``threading.RLock``.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._freed = threading.Condition(self._guard)
        self._owner: Any = None
        self._depth = 0
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def _take(self, me: Any) -> bool:
        """Take it for ``me`` if free or ``me``'s (the caller holds ``_guard``)."""
        if self._owner is None or self._owner is me:
            self._owner = me
            self._depth += 1
            return True
        return False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock; False when not ``blocking`` or ``timeout`` seconds (-1: no limit)
        passed first."""
        me = greenlet.getcurrent()
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        native = in_native()
        with self._guard:
            while not native:
                if self._take(me):
                    return True
                if blocking and deadline is None and _root(self._owner) is _root(me):
                    raise RuntimeError(
                        "a sync method was called on the event loop's thread while an async "
                        "call on that loop holds the lock it needs: it would wait forever; "
                        "await the method's async twin instead")
                left = None if deadline is None else deadline - time.monotonic()
                if not blocking or (left is not None and left <= 0):
                    return False
                self._freed.wait(left)
        return self._acquire_native(me, blocking, deadline)

    def _acquire_native(self, me: Any, blocking: bool, deadline: float | None) -> bool:
        loop = asyncio.get_running_loop()
        woken = False
        while True:
            with self._guard:
                if self._take(me):
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if not blocking or (left is not None and left <= 0):
                    return False
                entry = (loop, loop.create_future())
                # Woken and beaten to it: first in line again.
                self._waiting.insert(0 if woken else len(self._waiting), entry)
            try:
                wait_for(asyncio.wait_for(entry[1], left))
                woken = True
            except TimeoutError:
                pass
            except BaseException:
                with self._guard:
                    if entry in self._waiting:
                        self._waiting.remove(entry)
                    elif self._owner is None:
                        self._wake_next()  # woken, but leaving: the turn passes on
                raise
            with self._guard:
                if entry in self._waiting:
                    self._waiting.remove(entry)

    def _wake_next(self) -> None:
        """Wake the longest-waiting native call (the caller holds ``_guard``): one at a
        time, so a release costs one wake-up however many wait."""
        while self._waiting:
            loop, future = self._waiting.pop(0)
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, future)
                return

    def release(self) -> None:
        """Release one level of the caller's hold (RuntimeError when not the owner)."""
        with self._guard:
            if self._owner is not greenlet.getcurrent():
                raise RuntimeError("cannot release a lock held by another thread or call")
            self._depth -= 1
            if self._depth:
                return
            self._owner = None
            self._freed.notify_all()
            self._wake_next()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
