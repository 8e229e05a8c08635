"""Fixtures of the ``htm ui`` tests: a small store to look at, an HTTP client that speaks
from loopback, and (for the browser tests) the app served by uvicorn on a free loopback
port with Debian's chromium driven by playwright."""

from __future__ import annotations

import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from htm_core import HTM, FrozenClock

pytest.importorskip("starlette", reason="htm ui needs the ui extra")

from starlette.testclient import TestClient

from htm_integrations.ui import create_app

CHROMIUM = "/usr/bin/chromium"
INJECTION = '<script>window.__pwned = 1; alert("pwned")</script><img src=x onerror="window.__pwned=2">'

#: (key, content, importance, tags, days before the clock's now)
SAMPLE = [
    ("pref-vim", "User prefers Vim keybindings in every editor", 8.0, ["user:preferences:editor"], 1),
    ("pref-tea", "User drinks green tea in the morning", 3.0, ["user:preferences:food"], 2),
    ("proj-htm", "Project htm stores memories in SQLite or PostgreSQL", 5.0, ["project:htm"], 3),
    ("trip-kyoto", "Trip to Kyoto planned for the spring, temples and tea houses", 2.0,
     ["travel"], 10),
    ("evil", INJECTION, 1.0, [], 4),
]


def fill(htm: HTM, clock: FrozenClock) -> None:
    """Add :data:`SAMPLE` to ``htm`` with creation times relative to ``clock``."""
    now = clock()
    for key, content, importance, tags, days in SAMPLE:
        htm.add(content, key=key, importance=importance, tags=tags,
                created_at=now - timedelta(days=days))


@pytest.fixture
def ui_htm(htm_factory: Callable[..., HTM], clock: FrozenClock) -> HTM:
    """An ``HTM`` (robot ``inspector``) on a fresh store of each backend, with the sample."""
    htm = htm_factory(robot="inspector")
    fill(htm, clock)
    return htm


def loopback_client(app: Any, **kwargs: Any) -> TestClient:
    """A test client whose requests come from 127.0.0.1 to Host 127.0.0.1."""
    kwargs.setdefault("base_url", "http://127.0.0.1")
    kwargs.setdefault("client", ("127.0.0.1", 50_000))
    return TestClient(app, **kwargs)


@pytest.fixture
def client(ui_htm: HTM) -> Iterator[TestClient]:
    app = create_app(ui_htm)
    with loopback_client(app) as c:
        yield c
    app.state.ui.close()


def csrf_of(page: str) -> str:
    """The CSRF form token in a page."""
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


# -- the browser -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """The app served by uvicorn in a thread on 127.0.0.1."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def chromium_or_skip() -> str:
    """The chromium binary; a missing one skips the test locally and fails it in CI."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path:
        return path
    reason = (f"Debian's chromium is not installed ({CHROMIUM}); scripts/test.sh installs it "
              "with apt-get")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(reason + " and CI must run the browser tests")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium for the module's tests."""
    path = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra)")
    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=path, headless=True, args=args)
        yield launched
        launched.close()
