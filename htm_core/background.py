"""The background embedding worker behind ``HTM(..., background_embeddings=True)``.

In background mode ``add`` commits the memory without a vector and returns at once;
full-text recall finds it immediately. This worker, one daemon thread per ``HTM``, then
fills the vectors in batches: each pass calls ``fill()``, which embeds up to one batch of
memories the store reports as missing a vector (``store.missing_embeddings``) and writes
them (``store.set_embeddings``), returning how many it did (0 when nothing is missing).

- A failed pass is retried with exponential backoff (``initial_backoff`` doubling up to
  ``max_backoff``); the memories stay stored and stay pending, nothing is lost.
- :meth:`EmbeddingWorker.flush` waits until a pass that started after the call finds
  nothing missing.
- :meth:`EmbeddingWorker.stop` ends the thread between batches; a batch in flight is
  finished (or fails) first. Work left over stays in the store as missing vectors and the
  next worker on that store, in this process or another, picks it up.

The worker knows nothing of HTM; it only runs ``fill`` on its thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .errors import EmbeddingError

__all__ = ["EmbeddingWorker"]

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
