"""The Periods page and the recall debugger's tiered paths, over HTTP on both backends,
with digests made by ``HTM.consolidate`` for two users whose ids differ only by case."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from html import unescape

import pytest

from htm_core import HTM, FrozenClock
from htm_integrations.ui import create_app

from .conftest import loopback_client

pytestmark = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)

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
