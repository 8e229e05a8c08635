"""The write-behind timer (htm_core.background.FlushTimer): when it flushes, and that it
never raises, on its thread or at exit."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest

from htm_core import background
from htm_core.background import FlushTimer


def _wait(event: threading.Event) -> bool:
    return event.wait(30)


def test_it_flushes_once_after_the_delay_without_another_call():
    done = threading.Event()
    calls: list[int] = []
    timer = FlushTimer(lambda: (calls.append(1), done.set()), threading.RLock())
    timer.arm(0.05)
    timer.arm(0.05)  # armed already: no second flush
    assert _wait(done)
    deadline = time.monotonic() + 30
    while timer.armed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == [1] and not timer.armed
    timer.close()


def test_a_failing_flush_is_logged_not_raised(caplog):
    def fail() -> None:
        raise RuntimeError("database gone")

    timer = FlushTimer(fail, threading.RLock())
    timer.arm(3600)
    with caplog.at_level(logging.WARNING, logger="htm_core.background"):
        timer.fire()  # as at exit
    assert "database gone" in caplog.text and not timer.armed


def test_exit_flushes_every_armed_timer_and_gives_up_on_a_held_lock(monkeypatch, caplog):
    monkeypatch.setattr(background, "EXIT_LOCK_TIMEOUT", 0.05)
    calls: list[str] = []
    free, held = threading.RLock(), threading.RLock()
    ready, release = threading.Event(), threading.Event()

    def hold() -> None:
        with held:
            ready.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert _wait(ready)
        first = FlushTimer(lambda: calls.append("free"), free)
        second = FlushTimer(lambda: calls.append("held"), held)
        first.arm(3600)
        second.arm(3600)
        with caplog.at_level(logging.WARNING, logger="htm_core.background"):
            background._flush_at_exit()
    finally:
        release.set()
        holder.join(30)
    assert calls == ["free"]  # the one whose lock another call held was given up, logged
    assert "held the lock" in caplog.text
    assert not first.armed and not second.armed


def test_a_closed_timer_is_never_armed_again():
    calls: list[int] = []
    timer = FlushTimer(lambda: calls.append(1), threading.RLock())
    timer.arm(3600)
    timer.close()
    timer.arm(0.01)
    assert not timer.armed
    background._flush_at_exit()
    assert calls == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_does_not_flush_its_parents_timers():
    calls: list[int] = []
    timer = FlushTimer(lambda: calls.append(1), threading.RLock())
    timer.arm(3600)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing armed here; report and leave at once
        os.write(write, str(len(background._ARMED)).encode())
        os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 16) == b"0"
    finally:
        os.close(read)
        os.waitpid(pid, 0)
        timer.close()
