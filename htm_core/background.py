"""Background work of an ``HTM``: the embedding worker and the write-behind timer.

:class:`EmbeddingWorker` is the thread behind ``HTM(..., background_embeddings=True)``: it
runs ``fill()`` (embed up to one batch of memories missing a vector) until nothing is missing,
retries a failed pass with exponential backoff, and knows nothing of ``HTM``.
:class:`FlushTimer` writes what recalls left pending (:mod:`htm_core.working.resident`) at
the latest a set time after the first of them, and at a normal interpreter exit; it holds
only the flush function and its lock, never the ``HTM``. See docs/embeddings.md
("Background embeddings") and docs/reliability.md ("Reads written behind").
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable

from ._native import SharedLock
from .errors import EmbeddingError

__all__ = ["EmbeddingWorker", "FlushTimer"]

logger = logging.getLogger(__name__)


class EmbeddingWorker:
    """Runs ``fill`` on a daemon thread until nothing is missing, then sleeps until woken.

    Args:
        fill: embeds one batch; returns how many memories it embedded (0: none missing).
        initial_backoff: seconds to wait after the first failure.
        max_backoff: the longest wait between retries.
        poll_interval: how often an idle worker looks again without being woken (to
            pick up memories other processes added to a shared store).
        name: the thread's name.

    >>> passes = []
    >>> worker = EmbeddingWorker(lambda: passes.append(1) or 0)
    >>> worker.start()
    >>> worker.flush(timeout=5)
    >>> worker.stop()
    True
    >>> len(passes) >= 1
    True
    """

    def __init__(self, fill: Callable[[], int], *, initial_backoff: float = 0.5,
                 max_backoff: float = 30.0, poll_interval: float = 5.0,
                 name: str = "htm-embedder") -> None:
        if initial_backoff <= 0 or max_backoff < initial_backoff or poll_interval <= 0:
            raise ValueError("need 0 < initial_backoff <= max_backoff and poll_interval > 0")
        self._fill = fill
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._poll_interval = poll_interval
        self._cond = threading.Condition()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._pass = 0
        self._drained = 0
        self._failures = 0
        self._consecutive_failures = 0
        self._last_error: BaseException | None = None
        self.embedded = 0

    # -- control ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (it begins with a pass, so leftovers are picked up at once)."""
        self._thread.start()

    def wake(self) -> None:
        """Ask for a pass now (after new memories were added)."""
        self._wake.set()

    @property
    def alive(self) -> bool:
        """Whether the thread is running."""
        return self._thread.is_alive()

    @property
    def failures(self) -> int:
        """Failed passes since start."""
        return self._failures

    @property
    def last_error(self) -> BaseException | None:
        """The error of the most recent failed pass, or None after a successful one."""
        return self._last_error

    def flush(self, timeout: float | None = None, *, max_failures: int = 3) -> None:
        """Wait until a pass that started after this call finds nothing missing.

        Raises :class:`~htm_core.errors.EmbeddingError` when ``timeout`` seconds pass
        first, or when ``max_failures`` passes in a row fail while waiting (the worker keeps
        retrying in the background either way; nothing is lost).
        """
        if not self.alive:
            raise EmbeddingError("the embedding worker is not running (HTM closed?)")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            target = self._pass + 1
            failures_at_start = self._failures
            self._wake.set()
            while self._drained < target:
                failed = self._failures - failures_at_start
                if failed >= max_failures and self._consecutive_failures >= max_failures:
                    raise EmbeddingError(
                        f"background embedding failed {failed} times in a row while flushing: "
                        f"{self._last_error}; the memories are stored and will be embedded "
                        "once the embedder works (stats().pending_embeddings shows how many)"
                    ) from self._last_error
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise EmbeddingError(
                        f"flush timed out after {timeout:g} s with embeddings still pending; "
                        "the worker keeps going: call flush() again or wait longer")
                if not self._thread.is_alive():
                    raise EmbeddingError("the embedding worker stopped before it finished")
                self._cond.wait(timeout=0.5 if remaining is None else min(remaining, 0.5))

    def stop(self, timeout: float | None = 30.0) -> bool:
        """Stop the thread after the batch in flight; True when it has ended."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        if self._thread.is_alive():
            logger.warning("embedding worker still busy after %s s; it ends after its batch",
                           timeout)
            return False
        return True

    # -- the thread ------------------------------------------------------------------

    def _run(self) -> None:
        backoff = self._initial_backoff
        while not self._stopping.is_set():
            with self._cond:
                self._pass += 1
                this_pass = self._pass
            try:
                done = self._fill()
            except Exception as exc:  # any failure: keep the memories, retry later
                with self._cond:
                    self._failures += 1
                    self._consecutive_failures += 1
                    self._last_error = exc
                    self._cond.notify_all()
                logger.warning("background embedding failed (retry in %.1f s): %s", backoff, exc)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self._max_backoff)
                continue
            backoff = self._initial_backoff
            with self._cond:
                self._consecutive_failures = 0
                self._last_error = None
                self.embedded += done
                if done == 0:
                    self._drained = this_pass
                self._cond.notify_all()
            if done == 0:
                self._wake.wait(self._poll_interval)
                self._wake.clear()


#: Seconds the exit handler waits for an ``HTM``'s lock (a call still running elsewhere).
EXIT_LOCK_TIMEOUT = 10.0


class FlushTimer:
    """Runs ``flush`` under ``lock`` once, ``delay`` seconds after :meth:`arm` (a daemon
    timer thread), or at interpreter exit if that comes first; then waits to be armed again.

    ``flush`` errors are logged, never raised (on the timer thread and at exit alike).
    Arming an armed timer changes nothing: its first arming sets the time. :meth:`close`
    disarms it for good. A forked child starts with no armed timer (the parent's pending
    writes are the parent's).

    >>> done = []
    >>> timer = FlushTimer(lambda: done.append(1), threading.RLock())
    >>> timer.arm(60)
    >>> timer.armed
    True
    >>> timer.fire()  # now, as at exit (the timer thread is cancelled)
    >>> done, timer.armed
    ([1], False)
    >>> timer.close()
    """

    def __init__(self, flush: Callable[[], None], lock: threading.RLock | SharedLock, *,
                 name: str = "htm-write-behind") -> None:
        self._flush = flush
        self._lock = lock
        self._name = name
        self._guard = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False

    @property
    def armed(self) -> bool:
        """Whether a flush is due (on the timer or at exit)."""
        return self._timer is not None

    def arm(self, delay: float) -> None:
        """Flush at the latest ``delay`` seconds from now (unless already armed)."""
        with self._guard:
            if self._timer is not None or self._closed:
                return
            timer = self._timer = threading.Timer(delay, self._fired)
            timer.daemon = True
            timer.name = self._name
            _armed(self, True)
        with contextlib.suppress(RuntimeError):  # shutting down: the exit handler flushes
            timer.start()

    def fire(self, timeout: float = -1) -> None:
        """Disarm and flush now (waiting at most ``timeout`` seconds for the lock; -1:
        as long as it takes)."""
        with self._guard:
            timer, self._timer = self._timer, None
            _armed(self, False)
        if timer is not None:
            timer.cancel()
        self._run(timeout)

    def close(self) -> None:
        """Disarm for good (the owner has flushed or is closing)."""
        with self._guard:
            self._closed = True
            timer, self._timer = self._timer, None
            _armed(self, False)
        if timer is not None:
            timer.cancel()

    def _fired(self) -> None:
        with self._guard:
            if self._timer is not threading.current_thread():
                return  # fired by hand or closed meanwhile
            self._timer = None
            _armed(self, False)
        self._run(-1)

    def _run(self, timeout: float) -> None:
        try:
            if not self._lock.acquire(timeout=timeout):
                logger.warning("pending working-memory writes not made: another call held "
                               "the lock for %s s", timeout)
                return
            try:
                self._flush()
            finally:
                self._lock.release()
        except Exception as exc:  # a thread or exit: log, never raise
            logger.warning("pending working-memory writes not made: %s", exc)


_ARMED: set[FlushTimer] = set()
_ARMED_LOCK = threading.Lock()
_HOOKED = False


def _armed(timer: FlushTimer, on: bool) -> None:
    """Keep the set of armed timers the exit handler flushes."""
    global _HOOKED
    with _ARMED_LOCK:
        if on:
            _ARMED.add(timer)
            if not _HOOKED:
                _HOOKED = True
                atexit.register(_flush_at_exit)
                os.register_at_fork(after_in_child=_forked)
        else:
            _ARMED.discard(timer)


def _forked() -> None:
    """In a forked child: no timer is armed (the parent's writes are the parent's)."""
    global _ARMED_LOCK
    _ARMED_LOCK = threading.Lock()
    _ARMED.clear()


def _flush_at_exit() -> None:
    """Flush every armed timer (the interpreter is exiting normally)."""
    with _ARMED_LOCK:
        timers = list(_ARMED)
    for timer in timers:
        with contextlib.suppress(BaseException):  # nothing may escape at exit
            timer.fire(EXIT_LOCK_TIMEOUT)
