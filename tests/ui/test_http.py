"""``htm ui`` over HTTP (Starlette's TestClient): the safety rules, escaping, bad input, and
that every action goes through ``HTM`` and lands in the log. Parametrized over both backends
(the ``ui_htm`` fixture), since every page reads the store."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from starlette.testclient import TestClient

from htm_core import HTM
from htm_integrations.ui import create_app

from .conftest import INJECTION, csrf_of, loopback_client

PAGES = ["/memories", "/memories?q=vim", "/memories?forgotten=include",
         "/memory?key=evil", "/memory?key=pref-vim", "/recall?q=script+pwned",
         "/recall?q=tea+last+week", "/working", "/timeline", "/forget?key=evil",
         "/purge?key=evil", "/purge", "/users"]


def test_every_page_renders(client: TestClient) -> None:
    for url in PAGES:
        response = client.get(url)
        assert response.status_code == 200, (url, response.text[:500])
        assert "text/html" in response.headers["content-type"]


def test_root_goes_to_the_memories(client: TestClient) -> None:
    response = client.get("/", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/memories"


# -- loopback and token ----------------------------------------------------------------


def test_without_a_token_only_loopback_clients_are_answered(ui_htm: HTM) -> None:
    app = create_app(ui_htm)
    remote = TestClient(app, base_url="http://127.0.0.1", client=("192.0.2.7", 40_000))
    response = remote.get("/memories")
    assert response.status_code == 403
    assert "loopback" in response.text
    assert "pref-vim" not in response.text
    assert loopback_client(app).get("/memories").status_code == 200


def test_without_a_token_a_foreign_host_header_is_refused(ui_htm: HTM) -> None:
    """A page elsewhere reaching the app through DNS rebinding sends its own host name."""
    app = create_app(ui_htm)
    rebound = loopback_client(app, base_url="http://attacker.example:8765")
    response = rebound.get("/memories")
    assert response.status_code == 403
    assert "pref-vim" not in response.text
    assert loopback_client(app, base_url="http://localhost:8765").get(
        "/memories").status_code == 200


def test_with_a_token_every_request_needs_it(ui_htm: HTM) -> None:
    token = "s3cret-token-of-this-test"
    app = create_app(ui_htm, token=token)
    remote = TestClient(app, base_url="http://192.0.2.1:8765", client=("192.0.2.7", 40_000))
    assert remote.get("/memories").status_code == 401
    wrong = remote.get("/memories?token=not-the-token")
    assert wrong.status_code == 401
    assert "pref-vim" not in wrong.text
    entered = remote.get(f"/memories?tag=user&token={token}", follow_redirects=False)
    assert entered.status_code == 303
    assert urlsplit(entered.headers["location"]).query == "tag=user"  # the token leaves the URL
    page = remote.get("/memories?tag=user")  # the cookie now carries it
    assert page.status_code == 200
    assert "pref-vim" in page.text
    assert token not in page.text
    bearer = TestClient(app, base_url="http://192.0.2.1:8765", client=("192.0.2.8", 40_000))
    assert bearer.get("/memories", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert bearer.get("/memories", headers={"Authorization": "Bearer nope"}).status_code == 401


# -- CSRF ------------------------------------------------------------------------------


def _forget(client: TestClient, key: str, **form: str) -> int:
    return client.post("/forget", data={"key": key, "confirm": "yes", **form},
                       follow_redirects=False).status_code


def test_a_change_without_the_csrf_token_is_refused(client: TestClient, ui_htm: HTM) -> None:
    client.get("/memories")  # the browser has its CSRF cookie
    assert _forget(client, "pref-tea") == 403
    assert _forget(client, "pref-tea", csrf="0" * 64) == 403
    assert ui_htm.get("pref-tea") is not None
    assert ui_htm.operations(op="forget") == []


def test_a_csrf_token_of_another_browser_is_refused(ui_htm: HTM) -> None:
    app = create_app(ui_htm)
    mine, theirs = loopback_client(app), loopback_client(app)
    token = csrf_of(mine.get("/forget?key=pref-tea").text)
    theirs.get("/memories")
    assert _forget(theirs, "pref-tea", csrf=token) == 403
    assert ui_htm.get("pref-tea") is not None


def test_a_change_from_another_origin_is_refused(client: TestClient, ui_htm: HTM) -> None:
    token = csrf_of(client.get("/forget?key=pref-tea").text)
    response = client.post("/forget", data={"key": "pref-tea", "confirm": "yes", "csrf": token},
                           headers={"Origin": "http://attacker.example"}, follow_redirects=False)
    assert response.status_code == 403
    assert ui_htm.get("pref-tea") is not None


def test_forget_needs_the_confirmation_and_goes_through_htm(client: TestClient,
                                                           ui_htm: HTM) -> None:
    token = csrf_of(client.get("/forget?key=pref-tea").text)
    unconfirmed = client.post("/forget", data={"key": "pref-tea", "csrf": token})
    assert unconfirmed.status_code == 400
    assert ui_htm.get("pref-tea") is not None
    done = client.post("/forget", data={"key": "pref-tea", "confirm": "yes", "csrf": token},
                       follow_redirects=False)
    assert done.status_code == 303
    assert ui_htm.get("pref-tea") is None
    assert ui_htm.get("pref-tea", include_forgotten=True) is not None
    assert [(o.op, o.robot, o.key) for o in ui_htm.operations(op="forget")] == [
        ("forget", "inspector", "pref-tea")]
    page = client.get(done.headers["location"]).text
    assert "Forgotten: hidden from recall" in page


def test_restore_and_purge(client: TestClient, ui_htm: HTM) -> None:
    ui_htm.forget("pref-tea", confirm=True)
    ui_htm.forget("trip-kyoto", confirm=True)
    token = csrf_of(client.get("/memory?key=pref-tea").text)
    assert client.post("/restore", data={"key": "pref-tea", "csrf": token},
                       follow_redirects=False).status_code == 303
    assert ui_htm.get("pref-tea") is not None
    assert ui_htm.operations(op="restore")[0].key == "pref-tea"
    mistyped = client.post("/purge", data={"key": "trip-kyoto", "typed": "trip", "csrf": token})
    assert mistyped.status_code == 400
    assert ui_htm.get("trip-kyoto", include_forgotten=True) is not None
    purged = client.post("/purge", data={"key": "trip-kyoto", "typed": "trip-kyoto",
                                         "csrf": token})
    assert purged.status_code == 200
    assert "Purged 1 forgotten memory" in purged.text
    assert ui_htm.get("trip-kyoto", include_forgotten=True) is None
    assert [o.key for o in ui_htm.operations(op="purge")] == ["trip-kyoto"]


def test_purge_all_needs_the_word_purge(client: TestClient, ui_htm: HTM) -> None:
    ui_htm.forget("pref-tea", confirm=True)
    token = csrf_of(client.get("/purge").text)
    assert client.post("/purge", data={"typed": "yes", "csrf": token}).status_code == 400
    assert ui_htm.get("pref-tea", include_forgotten=True) is not None
    assert client.post("/purge", data={"typed": "purge", "csrf": token}).status_code == 200
    assert ui_htm.get("pref-tea", include_forgotten=True) is None
    assert ui_htm.get("pref-vim") is not None  # only forgotten memories are purged


def test_importance_and_tags_are_changed_through_update(client: TestClient,
                                                       ui_htm: HTM) -> None:
    """Each change is ``HTM.update`` with the content kept: an ``update`` log line under
    the acting robot, a new version, the old one kept and listed on the page."""
    token = csrf_of(client.get("/memory?key=pref-tea").text)
    assert client.post("/importance", data={"key": "pref-tea", "importance": "9.5",
                                            "csrf": token}, follow_redirects=False).status_code == 303
    tagged = client.post("/tags", data={"key": "pref-tea", "tags": "drinks:tea, morning",
                                        "csrf": token})
    assert tagged.status_code == 200
    assert "Tags saved" in tagged.text
    memory = ui_htm.get("pref-tea")
    assert memory is not None
    assert (memory.importance, memory.version) == (9.5, 3)
    assert memory.content == "User drinks green tea in the morning"
    assert set(memory.tags) == {"drinks:tea", "morning"}  # user:preferences:food removed
    assert ui_htm.working_memory.peek("pref-tea").importance == 9.5  # type: ignore[union-attr]
    log = ui_htm.operations(limit=2)
    assert [(o.op, o.key, o.robot) for o in log] == [("update", "pref-tea", "inspector")] * 2
    versions = ui_htm.versions("pref-tea")
    assert [(v.version, v.importance, v.tags) for v in versions] == [
        (1, 3.0, ("user:preferences:food",)), (2, 9.5, ("user:preferences:food",)),
        (3, 9.5, memory.tags)]
    assert versions[0].superseded_at is not None and versions[-1].superseded_at is None
    page = client.get("/memory?key=pref-tea").text
    table = page[page.index('id="versions"'):page.index("<h2>Log</h2>")]
    assert table.count("<tr>") == 4  # the header and three versions
    assert "user:preferences:food" in table and "(current)" in table
    lines = len(ui_htm.operations(limit=10_000))
    for bad in ("eleven", "11", "nan"):
        response = client.post("/importance", data={"key": "pref-tea", "importance": bad,
                                                    "csrf": token})
        assert response.status_code == 400, bad
        assert "importance" in response.text
    assert client.post("/tags", data={"key": "pref-tea", "tags": "bad tag!",
                                      "csrf": token}).status_code == 400
    assert ui_htm.get("pref-tea").version == 3  # type: ignore[union-attr]
    assert len(ui_htm.operations(limit=10_000)) == lines


def test_tags_can_all_be_removed_and_a_no_op_makes_no_version(client: TestClient,
                                                              ui_htm: HTM) -> None:
    token = csrf_of(client.get("/memory?key=pref-vim").text)
    lines = len(ui_htm.operations(limit=10_000))
    same = client.post("/tags", data={"key": "pref-vim", "tags": "user:preferences:editor",
                                      "csrf": token})
    assert "Nothing changed" in same.text
    assert len(ui_htm.operations(limit=10_000)) == lines
    assert client.post("/tags", data={"key": "pref-vim", "tags": "", "csrf": token}
                       ).status_code == 200
    memory = ui_htm.get("pref-vim")
    assert memory is not None and memory.tags == () and memory.version == 2
    assert ui_htm.list(tags="user:preferences:editor").memories == ()


def test_a_stale_form_does_not_overwrite_a_newer_version(client: TestClient,
                                                         ui_htm: HTM) -> None:
    page = client.get("/memory?key=pref-tea").text
    token = csrf_of(page)
    assert 'name="version" value="1"' in page
    ui_htm.update("pref-tea", "User drinks green tea in the morning", tags=["elsewhere"])
    stale = client.post("/tags", data={"key": "pref-tea", "tags": "mine", "version": "1",
                                       "csrf": token})
    assert stale.status_code == 400
    assert "reload the page" in stale.text
    assert '<a id="back" href="/memory?key=pref-tea">' in stale.text  # the way back to it
    assert ui_htm.get("pref-tea").tags == ("elsewhere",)  # type: ignore[union-attr]


def test_a_forgotten_memory_must_be_restored_before_editing(client: TestClient,
                                                            ui_htm: HTM) -> None:
    ui_htm.forget("pref-tea", confirm=True)
    page = client.get("/memory?key=pref-tea").text
    assert 'id="restore-first"' in page and 'action="/tags"' not in page
    token = csrf_of(page)
    for action, field, value in (("/importance", "importance", "7"), ("/tags", "tags", "x")):
        response = client.post(action, data={"key": "pref-tea", field: value, "csrf": token})
        assert response.status_code == 400
        assert "restore it first" in response.text
    assert ui_htm.versions("pref-tea")[-1].version == 1
    assert '<a id="back" href="/memory?key=pref-tea">' in response.text
    missing = client.post("/tags", data={"key": "no-such-key", "tags": "x", "csrf": token})
    assert missing.status_code == 404
    assert 'id="back"' not in missing.text  # no memory to go back to: the list only


def test_editing_without_the_csrf_token_is_refused(client: TestClient, ui_htm: HTM) -> None:
    for action, field, value in (("/importance", "importance", "7"), ("/tags", "tags", "")):
        assert client.post(action, data={"key": "pref-tea", field: value}).status_code == 403
        assert client.post(action, data={"key": "pref-tea", field: value,
                                         "csrf": "0" * 64}).status_code == 403
    assert ui_htm.get("pref-tea").version == 1  # type: ignore[union-attr]


def test_pages_are_never_changed_by_get(client: TestClient) -> None:
    assert client.get("/restore?key=pref-tea").status_code == 405
    assert client.get("/importance?key=pref-tea&importance=1").status_code == 405


# -- escaping, secrets, headers --------------------------------------------------------


def test_a_memory_holding_markup_is_shown_as_text(client: TestClient, ui_htm: HTM) -> None:
    ui_htm.add("tagged <b>bold</b>", key='k"><script>alert(1)</script>',
               tags=["x:y"])
    for url in [*PAGES, "/memory?key=k%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E",
                "/memories?q=%3Cscript%3E"]:
        page = client.get(url).text
        assert "<script" not in page, url
        assert "onerror=" not in page.replace("onerror=&#34;", ""), url
    shown = client.get("/memory?key=evil").text
    assert "&lt;script&gt;window.__pwned = 1;" in shown
    assert INJECTION not in shown
    ui_htm.update("evil", INJECTION + " v2")
    shown = client.get("/memory?key=evil").text
    table = shown[shown.index('id="versions"'):shown.index("<h2>Log</h2>")]
    assert table.count("&lt;script&gt;window.__pwned = 1;") == 2
    assert "<script" not in shown and INJECTION not in shown


def test_responses_forbid_scripts_and_framing(client: TestClient) -> None:
    headers = client.get("/memories").headers
    policy = headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy
    assert "frame-ancestors 'none'" in policy
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "same-origin"


def test_the_database_password_is_never_shown(ui_htm: HTM, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    """The stores mask their URL already; the header names the store by its host and
    database only, whatever ``store.url`` says (set here to carry a user and a password,
    the only way to test it)."""
    monkeypatch.setattr(ui_htm.store, "url",
                        "postgresql://htmuser:hunter2-pass@db.example:5433/htm?sslmode=require")
    app = create_app(ui_htm)
    client = loopback_client(app)
    for url in PAGES:
        page = client.get(url).text
        assert "hunter2-pass" not in page and "htmuser" not in page, url
    assert '<b id="store">db.example:5433/htm</b>' in client.get("/memories").text


def test_the_header_names_a_sqlite_store_by_its_file(ui_htm: HTM,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ui_htm.store, "url", "sqlite:////home/someone/private/notes.db")
    page = loopback_client(create_app(ui_htm)).get("/memories").text
    assert '<b id="store">notes.db</b>' in page
    assert "/home/someone" not in page


# -- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "status", "says"), [
    ("/memories?timeframe=sometime%20soonish", 400, "timeframe"),
    ("/memories?q=tea&timeframe=blah", 400, "timeframe"),
    ("/memories?limit=lots", 400, "limit must be a whole number"),
    ("/memories?limit=0", 400, "limit must be from 1 to 500"),
    ("/memories?order=colour", 400, "order must be one of"),
    ("/memories?tag=not%20a%20tag!", 400, "tag"),
    ("/memories?cursor=garbage", 400, "cursor"),
    ("/memory?key=no-such-key", 404, "no memory has the key"),
    ("/memory", 400, "give a memory"),
    ("/recall?q=tea&strategy=psychic", 400, "strategy must be one of"),
    ("/recall?q=tea&timeframe=whenever", 400, "timeframe"),
    ("/working?robot=nobody", 404, "no robot named"),
    ("/forget?key=no-such-key", 404, "no memory to forget"),
    ("/timeline?limit=-1", 400, "limit"),
    ("/no/such/page", 404, "There is no page"),
])
def test_bad_input_gets_a_clear_message(client: TestClient, url: str, status: int,
                                        says: str) -> None:
    response = client.get(url)
    assert response.status_code == status, response.text[:400]
    assert says in response.text
    assert "Traceback" not in response.text
    assert "text/html" in response.headers["content-type"]


def test_restoring_an_unknown_key_is_a_404(client: TestClient) -> None:
    token = csrf_of(client.get("/memory?key=pref-tea").text)
    response = client.post("/restore", data={"key": "no-such-key", "csrf": token})
    assert response.status_code == 404
