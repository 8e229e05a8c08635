"""What each ``htm ui`` page shows, compared with what ``HTM`` says, on both backends."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape

from starlette.testclient import TestClient

from htm_core import HTM, FrozenClock
from htm_integrations.ui import create_app

from .conftest import loopback_client


def _keys(page: str, table: str) -> list[str]:
    body = page.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    return [unescape(k) for k in re.findall(r'<a href="/memory\?key=[^"]*">([^<]*)</a>', body)]


def test_browse_filters(client: TestClient, ui_htm: HTM) -> None:
    every = {"pref-vim", "pref-tea", "proj-htm", "trip-kyoto", "evil"}
    assert set(_keys(client.get("/memories").text, "memories")) == every
    assert sorted(_keys(client.get("/memories?tag=user:preferences").text, "memories")) == \
        ["pref-tea", "pref-vim"]
    assert _keys(client.get("/memories?timeframe=last+36+hours").text, "memories") == ["pref-vim"]
    ui_htm.forget("pref-tea", confirm=True)
    assert "pref-tea" not in _keys(client.get("/memories").text, "memories")
    assert "pref-tea" in _keys(client.get("/memories?forgotten=include").text, "memories")
    assert _keys(client.get("/memories?forgotten=only").text, "memories") == ["pref-tea"]
    by_importance = _keys(client.get("/memories?order=importance&desc=1").text, "memories")
    assert by_importance == ["pref-vim", "proj-htm", "trip-kyoto", "evil"]


def test_browse_pages_with_the_cursor(client: TestClient) -> None:
    first = client.get("/memories?limit=2&order=key").text
    seen = _keys(first, "memories")
    assert seen == ["evil", "pref-tea"]
    link = re.search(r'id="next" href="([^"]+)"', first)
    assert link
    second = client.get(unescape(link.group(1))).text
    assert _keys(second, "memories") == ["pref-vim", "proj-htm"]


def test_search_is_read_only_and_ranked(client: TestClient, ui_htm: HTM) -> None:
    before = [(m.key, m.access_count) for m in ui_htm.list().memories]
    ops = len(ui_htm.operations(limit=1000))
    found = _keys(client.get("/memories?q=kyoto+temples&mode=fulltext").text, "memories")
    assert found == ["trip-kyoto"]
    hybrid = _keys(client.get("/memories?q=vim+keybindings").text, "memories")
    assert hybrid[0] == "pref-vim"
    assert [(m.key, m.access_count) for m in ui_htm.list().memories] == before
    assert len(ui_htm.operations(limit=1000)) == ops


def test_a_memory_page(client: TestClient, ui_htm: HTM, htm_factory: Callable[..., HTM]) -> None:
    other = htm_factory(robot="other")
    other.recall("vim keybindings", limit=1)
    other.flush()  # a recall's access statistics are written behind (docs/reliability.md)
    page = client.get("/memory?key=pref-vim").text
    holders = page.split('id="holders"', 1)[1].split("</dd>", 1)[0]
    assert "inspector" in holders and "other" in holders
    assert "(1 access there" in holders  # other's recall counted in its working memory
    assert "(0 accesses there" in holders
    assert "user:preferences:editor" in page
    log = page.split('id="log"', 1)[1].split("</table>", 1)[0]
    assert "<td>add</td>" in log
    assert page.count("<tr>") >= 2


def test_working_memory_of_each_robot(ui_htm: HTM, htm_factory: Callable[..., HTM],
                                      clock: FrozenClock) -> None:
    other = htm_factory(robot="other", working_memory_tokens=15)
    other.add("Other robot note one about lunch", key="o1", importance=4.0)
    other.add("Other robot note two about dinner", key="o2", importance=2.0)
    other.add("Other robot note three about breakfast", key="o3", importance=6.0)
    app = create_app(ui_htm)
    client = loopback_client(app)
    mine = client.get("/working").text
    assert _keys(mine, "resident") == ui_htm.working_memory.keys()
    page = client.get("/working?robot=other").text
    other.stats()
    # other's HTM recorded its budget (15) on the store: the page reads it with that budget
    assert _keys(page, "resident") == other.working_memory.keys()
    evicted = {o.key for o in other.operations(op="evict", robot="other")}
    assert evicted, "the test needs a robot whose working memory evicted"
    assert set(_keys(page, "resident")) == {"o1", "o2", "o3"} - evicted
    gauge = page.split('id="gauge"', 1)[1].split("</div>", 1)[0]
    assert f">{other.stats().working_memory_tokens} / 15 tokens" in gauge
    assert "Budget unknown" not in page
    assert f"{len(evicted)} eviction" in gauge
    assert "/ 128000 tokens" in mine.split('id="gauge"', 1)[1].split("</div>", 1)[0]
    assert "Budget unknown" not in mine
    for strategy in ("balanced", "important", "recent"):
        section = page.split(f'id="context-{strategy}"', 1)[1].split("</ol>", 1)[0]
        built = other.create_context(strategy=strategy)
        listed = re.findall(r'<a href="/memory\?key=[^"]*">([^<]*)</a>', section)
        assert [unescape(k) for k in listed] == list(built.keys), strategy
        texts = [unescape(t) for t in re.findall(r'class="excerpt"[^>]*>([^<]*)<', section)]
        assert texts == [m.content for m in built.memories], strategy
    app.state.ui.close()


def test_a_robot_that_recorded_no_budget_is_shown_without_one(
        ui_htm: HTM, htm_factory: Callable[..., HTM]) -> None:
    """An ``HTM`` opened without a budget (the default) records none, and a later one with
    the default does not overwrite a recorded budget: the page never claims a budget the
    robot does not run with."""
    quiet = htm_factory(robot="quiet")
    quiet.add("Quiet robot note", key="q1")
    app = create_app(ui_htm)
    page = loopback_client(app).get("/working?robot=quiet").text
    gauge = page.split('id="gauge"', 1)[1].split("</div>", 1)[0]
    assert "/ " not in gauge and "Budget unknown" in page
    assert "tokens held" in gauge
    htm_factory(robot="sized", working_memory_tokens=300)
    htm_factory(robot="sized")  # the default: the recorded 300 stays
    assert {r.name: r.working_memory_tokens for r in ui_htm.robots()}["sized"] == 300
    page = loopback_client(app).get("/working?robot=sized").text
    assert "/ 300 tokens" in page.split('id="gauge"', 1)[1].split("</div>", 1)[0]
    app.state.ui.close()


def test_timeline(client: TestClient, ui_htm: HTM, htm_factory: Callable[..., HTM]) -> None:
    small = htm_factory(robot="small", working_memory_tokens=10)
    small.add("first small note about the weather in spring", key="s1")
    small.add("second small note about the garden and its flowers", key="s2")
    assert small.operations(op="evict")
    page = client.get("/timeline").text
    chart = page.split('id="chart"', 1)[1].split("</svg>", 1)[0]
    titles = re.findall(r"<title>([^<]*)</title>", chart)
    counted = sum(int(t.split(": ", 1)[1].split()[0]) for t in titles)
    assert counted == len(ui_htm.operations(limit=2000))
    assert any(t.endswith(" add") for t in titles)
    strips = page.split("Evictions per robot", 1)[1].split("Newest log lines", 1)[0]
    assert "small (" in strips
    only = client.get("/timeline?robot=small&op=evict").text
    assert "<td>evict</td>" in only and "<td>add</td>" not in only


def test_browse_and_search_by_kind(client: TestClient, ui_htm: HTM) -> None:
    """The Memories page filters by kind (listing and search, the next page too) and shows
    each memory's kind; a memory's page shows its kind, confidence and source."""
    ui_htm.update("pref-vim", "User prefers Vim keybindings in every editor", kind="preference",
                  source="onboarding", confidence=0.75)
    ui_htm.update("proj-htm", "Project htm stores memories in SQLite or PostgreSQL", kind="fact")
    page = client.get("/memories?kind=preference").text
    assert _keys(page, "memories") == ["pref-vim"]
    assert '<td class="kind">preference</td>' in page
    assert _keys(client.get("/memories?kind=fact&q=memories+sqlite").text, "memories") == [
        "proj-htm"]
    assert _keys(client.get("/memories?kind=digest").text, "memories") == []
    everyone = client.get("/memories").text
    assert '<td class="kind">episodic</td>' in everyone
    first = client.get("/memories?kind=episodic&limit=1&order=key").text
    link = re.search(r'id="next" href="([^"]+)"', first)
    assert link and "kind=episodic" in unescape(link.group(1))
    assert client.get("/memories?kind=facts").status_code == 400
    memory = client.get("/memory?key=pref-vim").text
    assert re.search(r'id="kind">preference <span class="muted">\(confidence 0.75\)', memory)
    assert 'id="source">onboarding<' in memory


def test_browse_and_search_by_source(client: TestClient, ui_htm: HTM) -> None:
    """The Memories page filters by exact source (listing and search, the next page too);
    a bad source is a 400."""
    ui_htm.update("pref-vim", "User prefers Vim keybindings in every editor", source="user")
    ui_htm.update("pref-tea", "User drinks green tea in the morning", source="user")
    ui_htm.update("proj-htm", "Project htm stores memories in SQLite or PostgreSQL",
                  source="User")
    page = client.get("/memories?source=user&order=key").text
    assert _keys(page, "memories") == ["pref-tea", "pref-vim"]
    assert 'name="source" value="user"' in page
    assert _keys(client.get("/memories?source=User&q=memories+sqlite").text, "memories") == [
        "proj-htm"]
    assert _keys(client.get("/memories?source=user:x").text, "memories") == []
    first = client.get("/memories?limit=1&order=key&source=user").text
    assert _keys(first, "memories") == ["pref-tea"]
    link = re.search(r'id="next" href="([^"]+)"', first)
    assert link and "source=user" in unescape(link.group(1))
    assert _keys(client.get(unescape(link.group(1))).text, "memories") == ["pref-vim"]
    assert client.get("/memories?source=a%0Ab").status_code == 400
