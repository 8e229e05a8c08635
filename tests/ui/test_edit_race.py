"""An edit in ``htm ui`` never overwrites a change made after its page was read.

The importance and tag forms carry the version they showed; the ui's update is
compare-and-set against it (``expected_version``), so another writer's update that lands
between the ui's own read of the memory and its write is not overwritten either. The
ui's ``store.get`` is wrapped so that a second, real ``HTM`` on the same store writes right
after the ui reads (the wrapper only fixes that interleaving).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from htm_core import HTM

from .conftest import csrf_of


def _after_next_read(htm: HTM, write: Callable[[], Any]) -> None:
    read = htm.store.get

    def read_then_write(*args: Any, **kwargs: Any) -> Any:
        found = read(*args, **kwargs)
        htm.store.get = read  # type: ignore[method-assign]
        write()
        return found

    htm.store.get = read_then_write  # type: ignore[method-assign]


@pytest.mark.parametrize(("action", "field", "value"), [
    ("/importance", "importance", "3"), ("/tags", "tags", "mine other:Tag")])
def test_an_update_between_the_ui_read_and_write_is_kept(client: TestClient, ui_htm: HTM,
                                                         htm_factory: Callable[..., HTM],
                                                         action: str, field: str,
                                                         value: str) -> None:
    other = htm_factory(robot="other")
    page = client.get("/memory?key=pref-tea").text
    assert 'name="version" value="1"' in page
    _after_next_read(ui_htm, lambda: other.update(
        "pref-tea", other.get("pref-tea").content, importance=7.0, tags=["theirs"]))
    response = client.post(action, data={"key": "pref-tea", field: value, "version": "1",
                                         "csrf": csrf_of(page)})
    assert response.status_code == 400
    assert "reload the page" in response.text and "version 2" in response.text
    now = other.get("pref-tea")
    assert (now.version, now.importance, now.tags) == (2, 7.0, ("theirs",))
