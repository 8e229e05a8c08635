"""The Periods page and the recall debugger's tiered paths, over HTTP on both backends,
with digests made by ``HTM.consolidate`` for two users whose ids differ only by case, and
the tree in a real headless chromium."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from htm_core import HTM, FrozenClock, HashingEmbedder
from htm_integrations.ui import create_app

from .conftest import Served, loopback_client

BOTH = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)

START = datetime(2024, 3, 4, 10, 0, tzinfo=timezone.utc)


def _store(htm_factory: Callable[..., HTM], clock: FrozenClock) -> HTM:
    htm = htm_factory()
    for user, thing in (("Ada", "harbour venue"), ("ada", "castle venue")):
        for day in range(0, 21, 3):
            htm.add(f"{user} wrote about the {thing} on day {day}", key=f"{user}-{day}",
                    tags=[f"chat:user:{user}"], created_at=START + timedelta(days=day))
    clock.set(START + timedelta(days=40))
    for user in ("Ada", "ada"):
        htm.consolidate("month", at=START, user_id=user)
    return htm


@BOTH
def test_periods_page_shows_one_users_tree(htm_factory: Callable[..., HTM],
                                           clock: FrozenClock) -> None:
    htm = _store(htm_factory, clock)
    app = create_app(htm)
    with loopback_client(app) as client:
        page = unescape(client.get("/periods?user=ada").text)
        everything = unescape(client.get("/periods").text)
    app.state.ui.close()
    assert "chat:user:ada:digest:month:2024-03" in page
    assert "chat:user:ada:digest:week:2024-W10" in page
    assert "chat:user:ada:digest:day:2024-03-04" in page
    assert 'href="/memory?key=ada-0"' in page  # a day's source, linked
    assert "castle venue" in page and "harbour venue" not in page  # never Ada's
    assert "Ada-0" not in page
    assert "no digests in this scope yet" in everything  # no robot-wide digest was made


@BOTH
def test_recall_debugger_shows_the_tiered_path(htm_factory: Callable[..., HTM],
                                               clock: FrozenClock) -> None:
    htm = _store(htm_factory, clock)
    app = create_app(htm)
    with loopback_client(app) as client:
        page = unescape(client.get("/recall?q=castle+venue&strategy=tiered"
                                   "&tag=chat:user:ada").text)
    app.state.ui.close()
    assert 'id="tiers"' in page and "days opened" in page
    assert "chat:user:ada:digest:month:2024-03" in page and "›" in page


def test_periods_tree_in_the_browser(tmp_path: Path, browser: Any) -> None:
    """Open a week in the tree, then a day, and follow a source to its memory page
    (headless chromium, the app served by uvicorn)."""
    clock = FrozenClock(START)
    with HTM(robot="inspector", database_url=str(tmp_path / "htm.db"),
             embedder=HashingEmbedder(), clock=clock) as htm:
        for day in range(0, 21, 3):
            htm.add(f"ada wrote about the castle venue on day {day}", key=f"ada-{day}",
                    tags=["chat:user:ada"], created_at=START + timedelta(days=day))
        clock.set(START + timedelta(days=40))
        htm.consolidate("month", at=START, user_id="ada")
        app = create_app(htm)
        served = Served(app)
        try:
            context = browser.new_context(base_url=served.url)
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.goto("/periods?user=ada")
            week = page.locator('details[data-key="chat:user:ada:digest:week:2024-W10"]')
            assert not week.locator(".digest-text").first.is_visible()
            week.locator("summary").first.click()
            day = week.locator('details[data-key="chat:user:ada:digest:day:2024-03-04"]')
            day.locator("summary").first.click()
            day.locator('a[href="/memory?key=ada-0"]').click()
            page.wait_for_url("**/memory?key=ada-0")
            assert "castle venue on day 0" in page.content()
            context.close()
        finally:
            served.stop()
            app.state.ui.close()
