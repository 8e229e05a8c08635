"""``htm ui`` in a real headless Chromium (Debian's ``chromium``, driven by playwright):
browse, search, the recall debugger's per-arm ranks, forget with its confirmation step,
a memory holding a script, and editing tags and importance (new versions). The app is
served by uvicorn on a free loopback port.

Skipped, with the reason, only when chromium is missing on a developer's machine; in CI
(``CI=true``) a missing chromium fails (scripts/test.sh installs it)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from htm_core import HTM, FrozenClock, HashingEmbedder
from htm_core.explain import explain_recall
from htm_integrations.ui import create_app

from .conftest import Served, fill


@pytest.fixture(scope="module")
def served_htm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTM]:
    clock = FrozenClock(datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc))
    path: Path = tmp_path_factory.mktemp("ui") / "htm.db"
    with HTM(robot="inspector", database_url=str(path), embedder=HashingEmbedder(),
             clock=clock) as htm:
        fill(htm, clock)
        yield htm


@pytest.fixture(scope="module")
def server(served_htm: HTM) -> Iterator[Served]:
    app = create_app(served_htm)
    served = Served(app)
    yield served
    served.stop()
    app.state.ui.close()


@pytest.fixture
def page(browser: Any, server: Served) -> Iterator[Any]:
    context = browser.new_context(base_url=server.url)
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    dialogs: list[str] = []
    opened.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    opened.dialogs = dialogs
    yield opened
    context.close()


def _keys(page: Any) -> list[str]:
    return [str(k) for k in page.locator("#memories .key a").all_inner_texts()]


def test_browse_and_filter_by_tag(page: Any) -> None:
    page.goto("/")
    assert page.url.endswith("/memories")
    assert set(_keys(page)) == {"pref-vim", "pref-tea", "proj-htm", "trip-kyoto", "evil"}
    page.get_by_role("link", name="user", exact=True).click()  # a parent tag: both below it
    assert sorted(_keys(page)) == ["pref-tea", "pref-vim"]
    page.get_by_role("link", name="editor", exact=True).click()
    assert _keys(page) == ["pref-vim"]
    page.get_by_role("link", name="pref-vim").click()
    assert page.locator("#key").inner_text() == "pref-vim"
    assert "user:preferences:editor" in page.locator("#tags").inner_text()


def test_search(page: Any) -> None:
    page.goto("/memories")
    page.fill("input[name=q]", "kyoto temples")
    page.select_option("select[name=mode]", "fulltext")
    page.click("#filters button[type=submit]")
    found = _keys(page)
    assert found == ["trip-kyoto"]
    assert page.locator("#memories td.num").first.inner_text() != ""


def test_the_recall_debugger_shows_each_arms_ranks(page: Any, served_htm: HTM) -> None:
    query = "green tea in the morning"
    page.goto("/recall")
    page.fill("input[name=q]", query)
    page.click("#explain")
    why = explain_recall(served_htm, query)
    rows = page.locator("#fused tr").all()[1:]
    assert len(rows) == len(why.fused) > 1
    for row, hit in zip(rows, why.fused, strict=True):
        assert row.locator("td .key a").inner_text() == hit.memory.key
        assert row.locator("a.excerpt").inner_text() == hit.memory.content  # all short
        for arm in ("vector", "fulltext"):
            shown = row.locator(f"td[data-arm='{arm}']").inner_text()
            assert shown == str(hit.ranks.get(arm, "–")), (hit.memory.key, arm)
    for arm in ("vector", "fulltext"):
        column = page.locator(f"#arm-{arm} .key a").all_inner_texts()
        assert column == [h.memory.key for h in why.arms[arm][:len(column)]]
        texts = page.locator(f"#arm-{arm} a.excerpt").all_inner_texts()
        assert texts == [h.memory.content for h in why.arms[arm][:len(texts)]]
    assert "would evict" in page.locator("#would-evict").inner_text()


def test_forget_asks_first(page: Any, served_htm: HTM) -> None:
    page.goto("/memory?key=pref-tea")
    page.click("#forget")
    assert "Forget" in page.locator("h1").inner_text()
    assert served_htm.get("pref-tea") is not None  # the confirmation page changed nothing
    page.click("#confirm-forget")
    assert "Forgotten" in page.locator("#done").inner_text()
    assert page.locator("#forgotten").is_visible()
    assert served_htm.get("pref-tea") is None
    page.click("#restore")
    assert "Restored" in page.locator("#done").inner_text()
    assert served_htm.get("pref-tea") is not None


def test_a_memory_holding_a_script_is_shown_as_text(page: Any) -> None:
    for url in ("/memories", "/memory?key=evil", "/recall?q=pwned+script", "/working",
                "/timeline"):
        page.goto(url)
        assert page.evaluate("() => window.__pwned") is None, url
        assert page.locator("script").count() == 0, url
    page.goto("/memory?key=evil")
    assert page.locator("#content").inner_text().startswith("<script>window.__pwned = 1;")
    assert page.dialogs == []


def test_edit_tags_and_importance_makes_versions(page: Any, served_htm: HTM) -> None:
    page.goto("/memory?key=proj-htm")
    assert page.locator("#tags-input").input_value() == "project:htm"
    page.fill("#tags-input", "project:htm:core storage")  # one tag replaced, one added
    page.click("#save-tags")
    assert "Tags saved" in page.locator("#done").inner_text()
    page.fill("input[name=importance]", "7.5")
    page.click("#set-importance")
    assert "Importance changed" in page.locator("#done").inner_text()
    memory = served_htm.get("proj-htm")
    assert memory is not None
    assert (memory.tags, memory.importance, memory.version) == (
        ("project:htm:core", "storage"), 7.5, 3)
    rows = page.locator("#versions tr").all()[1:]
    assert [r.locator("td").first.inner_text().split()[0] for r in rows] == ["3", "2", "1"]
    assert rows[-1].locator("td").nth(3).inner_text() == "project:htm"
    assert rows[0].locator("td").nth(5).inner_text() == "-"  # the current one: not superseded
    assert rows[-1].locator("td").nth(5).inner_text() != "-"
    assert "<td>update</td>" in page.locator("#log").inner_html()


def test_an_error_page_links_back_to_its_memory(page: Any) -> None:
    page.goto("/memory?key=pref-vim")
    page.fill("input[name=importance]", "eleven")
    page.click("#set-importance")
    assert "importance must be a number" in page.locator("#message").inner_text()
    page.click("#back")
    assert page.locator("#key").inner_text() == "pref-vim"
    page.goto("/memory?key=no-such-key")
    assert page.locator("#back").count() == 0  # no memory to go back to: the list only


def test_lists_lead_with_the_text(page: Any) -> None:
    page.goto("/memories?order=key")
    first = page.locator("#memories tr").nth(1).locator("td").first
    assert first.locator("a.excerpt").inner_text().startswith("<script>")  # evil, escaped
    assert first.locator(".key a").inner_text() == "evil"
