"""The pages about people and conversations (Users, a user, a session's transcript, the
context now), over HTTP on both backends and in the browser. The conversations are written
by the real LangChain chat history (``HTMChatMessageHistory``) with user ids drawn to
collide: ``Ada`` and ``ada`` (two users, each with a session ``s1``), ``Zoë`` (not a
plain id: stored as ``h-`` and a hash), and ``Ada`` with a Cyrillic ``А`` (hashed too)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from htm_core import HTM, FrozenClock, HashingEmbedder
from htm_core.scope import id_slug
from htm_integrations.ui import create_app

from .conftest import INJECTION, Served, loopback_client

pytest.importorskip("langchain_core", reason="the chat history needs the langchain extra")

from langchain_core.messages import AIMessage, HumanMessage

from htm_integrations.langchain import HTMChatMessageHistory

BUDGET = 600
ZOE = "Zoë"
LOOKALIKE = "\u0410da"  # a Cyrillic A: looks like Ada, another user
CONVERSATIONS: list[tuple[str | None, str, list[tuple[str, str]]]] = [
    ("Ada", "s1", [("human", "I am Ada, I write analytical engines"),
                   ("ai", "Nice to meet you, Ada"), ("human", "Remember I prefer tea")]),
    ("ada", "s1", [("human", "i am the lowercase ada and I like coffee"),
                   ("ai", "Noted: coffee for ada")]),
    ("Ada", "s2", [("human", "Second session of Ada about gardens")]),
    (ZOE, "café", [("human", "Zoë here, from the café"), ("ai", INJECTION)]),
    (LOOKALIKE, "s1", [("human", "Not Ada: a Cyrillic lookalike")]),
    (None, "loose", [("human", "A session without a user")]),
]


def converse(htm: HTM) -> None:
    """Write :data:`CONVERSATIONS` through the real chat history; forget one of ada's turns."""
    for user, session, turns in CONVERSATIONS:
        history = HTMChatMessageHistory(htm=htm, session_id=session, user_id=user)
        history.add_messages([HumanMessage(text) if role == "human" else AIMessage(text)
                              for role, text in turns])
    forgotten = HTMChatMessageHistory(htm=htm, session_id="s1", user_id="ada")
    htm.forget(htm.list(tags=[forgotten.session_tag], limit=1).memories[0].key, confirm=True)


@pytest.fixture
def people_htm(htm_factory: Callable[..., HTM]) -> HTM:
    htm = htm_factory(robot="inspector", working_memory_tokens=BUDGET)
    converse(htm)
    return htm


@pytest.fixture
def people_client(people_htm: HTM) -> Iterator[TestClient]:
    app = create_app(people_htm)
    with loopback_client(app) as c:
        yield c
    app.state.ui.close()


def _keys(page: str, table: str) -> list[str]:
    body = page.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    return [unescape(k) for k in re.findall(r'<a href="/memory\?key=[^"]*">([^<]*)</a>', body)]


def _scope_keys(htm: HTM, tag: str, *, forgotten: bool = False) -> set[str]:
    page = htm.list(tags=[tag], include_forgotten=True, limit=1000)
    return {m.key for m in page.memories if (m.forgotten_at is not None) == forgotten}


def test_the_users_page_lists_each_user_exactly(people_client: TestClient,
                                                people_htm: HTM) -> None:
    page = people_client.get("/users").text
    users = page.split('id="users"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<a class="user" href="/user\?id=([^"]*)">([^<]*)</a>.*?'
                      r'<td class="num">(\d+)</td><td class="num">(\d+)</td>'
                      r'<td class="num">(\d+)</td>', users)
    zoe = id_slug(ZOE, name="user_id")
    shown = {unescape(name): (slug, int(n), int(f), int(s)) for slug, name, n, f, s in rows}
    assert set(shown) == {"Ada", "ada", ZOE, LOOKALIKE}
    for name, sessions in (("Ada", 2), ("ada", 1), (ZOE, 1), (LOOKALIKE, 1)):
        stats = people_htm.stats(tags=[f"chat:user:{id_slug(name, name='user_id')}"])
        assert shown[name][1:] == (stats.long_term_total, stats.forgotten, sessions), name
    assert shown["ada"][2] == 1 and shown["Ada"][2] == 0
    assert shown[ZOE][0] == zoe  # the hashed slug in the link, the id as given shown
    newest = re.findall(r'<td class="newest"><a class="excerpt" href="[^"]*">([^<]*)</a>', users)
    assert "Human: Second session of Ada about gardens" in newest  # Ada's latest turn
    loose = page.split('id="loose-sessions"', 1)[1].split("</table>", 1)[0]
    assert "/session?id=loose" in loose


def test_a_users_page_holds_only_that_user(people_client: TestClient, people_htm: HTM) -> None:
    upper = people_client.get("/user?id=Ada").text
    lower = people_client.get("/user?id=ada").text
    assert set(_keys(upper, "memories")) == _scope_keys(people_htm, "chat:user:Ada")
    assert set(_keys(lower, "memories")) == _scope_keys(people_htm, "chat:user:ada")
    assert not set(_keys(upper, "memories")) & set(_keys(lower, "memories"))
    assert "coffee" not in upper and "analytical" not in lower and "lookalike" not in upper
    assert set(_keys(lower, "forgotten")) == _scope_keys(people_htm, "chat:user:ada",
                                                         forgotten=True) != set()
    assert _keys(upper, "forgotten") == []
    sessions = upper.split('id="sessions"', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'/session\?user=Ada&amp;id=(s\d)"', sessions) == ["s1", "s2"]
    assert people_client.get("/user?id=ADA").status_code == 404  # no case folding
    assert people_client.get("/user?id=").status_code == 400


def test_an_unsafe_id_in_the_address_is_refused_and_escaped(people_client: TestClient) -> None:
    for url in ("/user?id=%3Cscript%3Ealert(1)%3C/script%3E",
                "/session?user=Ada&id=s1%3Aextra", "/context?user=a%20b"):
        response = people_client.get(url)
        assert response.status_code == 404, url
        assert "<script>alert" not in response.text


def test_a_users_page_shows_the_id_as_given(people_client: TestClient) -> None:
    zoe = id_slug(ZOE, name="user_id")
    page = people_client.get("/user?id=" + zoe).text
    assert f'<span id="user">{ZOE}</span>' in page
    assert "from the café" in page
    assert "&lt;script&gt;" in page and "<script>" not in page


def test_the_transcript_is_the_session_in_order(people_client: TestClient,
                                                people_htm: HTM) -> None:
    page = people_client.get("/session?user=Ada&id=s1").text
    transcript = page.split('id="transcript"', 1)[1]
    turns = re.findall(r'<div class="turn ([a-z]*)[^"]*"><div class="role"><span class="who">'
                       r'([^<]*)</span>.*?'
                       r'<div class="content">([^<]*)</div>', transcript, re.S)
    assert all(style == role for style, role, _ in turns)
    prefix = {"human": "Human: ", "ai": "AI: "}  # the chat history's stored form
    assert [(role, unescape(text)) for role, _, text in turns] == [
        (role, prefix[role] + text) for role, text in CONVERSATIONS[0][2]]
    other = people_client.get("/session?user=ada&id=s1").text
    assert "coffee for ada" in other and "analytical" not in other
    assert 'class="badge">forgotten' in other  # the forgotten turn is there, marked
    assert "A session without a user" in people_client.get("/session?id=loose").text
    assert people_client.get("/session?user=Ada&id=s9").status_code == 404


def test_the_transcript_shows_what_the_middleware_recalled_into_each_turn(
        people_htm: HTM) -> None:
    """A turn stored by ``HTMMiddleware`` (a real ``create_agent`` with a fake model) lists
    the memories its block held; Ada's own fact is among them, the lowercase ada's never."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from htm_integrations.langchain import HTMMiddleware
    from tests.fake_chat import RecordingChatModel

    people_htm.add("Ada takes her tea with lemon", tags=["chat:user:Ada"], key="ada-lemon")
    people_htm.add("ada takes her coffee black", tags=["chat:user:ada"], key="ada-black")
    agent = create_agent(RecordingChatModel(replies=[AIMessage("With lemon.")]),
                         middleware=[HTMMiddleware(people_htm, user_id="Ada",
                                                   session_id="tea")],
                         checkpointer=InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "How do I take my tea?"}]},
                 {"configurable": {"thread_id": "tea"}})
    app = create_app(people_htm)
    page = loopback_client(app).get("/session?user=Ada&id=tea").text
    recalled = page.split('class="recalled', 1)[1].split('<div class="turn', 1)[0]
    assert "recalled into this turn" in recalled
    assert "Ada takes her tea with lemon" in recalled and "ada-lemon" in recalled
    assert "ada takes her coffee black" not in recalled
    assert page.count('id="recalled-') == 1  # the answer records nothing
    app.state.ui.close()


def test_a_memory_links_to_its_user_and_conversation(people_client: TestClient,
                                                      people_htm: HTM) -> None:
    for user, session in (("Ada", "s1"), ("ada", "s1")):
        key = people_htm.list(tags=[f"chat:user:{user}:session:{session}"], limit=1,
                              include_forgotten=True).memories[0].key
        page = people_client.get("/memory", params={"key": key}).text
        links = page.split('id="conversations"', 1)[1].split("</dd>", 1)[0]
        assert f'href="/user?id={user}"' in links
        assert f'href="/session?user={user}&amp;id={session}"' in links
    plain = people_client.get("/memories").text  # memories outside any scope: no such line
    assert 'id="conversations"' not in plain


def test_the_context_is_what_create_context_builds(people_client: TestClient,
                                                   people_htm: HTM) -> None:
    for query, tag in (("user=Ada", "chat:user:Ada"), ("user=ada", "chat:user:ada"),
                       ("user=Ada&session=s2", "chat:user:Ada:session:s2"),
                       ("session=loose", "chat:session:loose")):
        page = people_client.get(f"/context?{query}&strategy=recent").text
        built = people_htm.create_context(strategy="recent", tags=[tag], scope_working=True)
        assert built.keys, tag
        assert _keys(page, "blocks") == list(built.keys), tag
        blocks = page.split('id="blocks"', 1)[1].split("</table>", 1)[0]
        counts = [int(n) for n in re.findall(r'<td class="num">(\d+)</td></tr>', blocks)]
        assert counts == [people_htm.token_counter.count(m.content) for m in built.memories]
        gauge = page.split('id="gauge"', 1)[1].split("</div>", 1)[0]
        assert gauge.startswith(f">{built.tokens} / {BUDGET} tokens"), gauge


def test_the_context_of_another_robot_is_measured_against_its_recorded_budget(
        people_htm: HTM, htm_factory: Callable[..., HTM]) -> None:
    sized = htm_factory(robot="sized", working_memory_tokens=50)
    HTMChatMessageHistory(htm=sized, session_id="s4", user_id="Ada").add_messages(
        [HumanMessage("Ada talking to the sized robot")])
    app = create_app(people_htm)
    page = loopback_client(app).get("/context?user=Ada&robot=sized").text
    gauge = page.split('id="gauge"', 1)[1].split("</div>", 1)[0]
    assert " / 50 tokens" in gauge and "Budget unknown" not in page
    app.state.ui.close()


def test_the_context_of_another_robot_says_its_budget_is_unknown(
        people_htm: HTM, htm_factory: Callable[..., HTM]) -> None:
    other = htm_factory(robot="other")
    HTMChatMessageHistory(htm=other, session_id="s3", user_id="Ada").add_messages(
        [HumanMessage("Ada again, talking to the other robot")])
    app = create_app(people_htm)
    page = loopback_client(app).get("/context?user=Ada&robot=other").text
    gauge = page.split('id="gauge"', 1)[1].split("</div>", 1)[0]
    assert "/ " not in gauge and "Budget unknown" in page
    assert "talking to the other robot" in page
    app.state.ui.close()


# -- in the browser --------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, HTM]]:
    clock = FrozenClock(datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc))
    path: Path = tmp_path_factory.mktemp("people") / "htm.db"
    with HTM(robot="inspector", database_url=str(path), embedder=HashingEmbedder(),
             clock=clock, working_memory_tokens=BUDGET) as htm:
        converse(htm)
        app = create_app(htm)
        server = Served(app)
        yield server, htm
        server.stop()
        app.state.ui.close()


@pytest.fixture
def page(browser: Any, served: tuple[Served, HTM]) -> Iterator[Any]:
    context = browser.new_context(base_url=served[0].url)
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()


def test_from_the_users_to_a_conversation_and_its_context(page: Any,
                                                          served: tuple[Served, HTM]) -> None:
    htm = served[1]
    page.goto("/memories")
    page.get_by_role("link", name="Users", exact=True).click()
    names = page.locator("#users a.user").all_inner_texts()
    assert sorted(names) == sorted(["Ada", "ada", ZOE, LOOKALIKE])
    page.get_by_role("link", name="ada", exact=True).click()
    assert page.locator("#user").inner_text() == "ada"
    assert "coffee" in page.locator("#memories").inner_text()
    assert "analytical" not in page.locator("#memories").inner_text()
    page.goto("/users")
    page.get_by_role("link", name="Ada", exact=True).click()
    assert page.locator("#user").inner_text() == "Ada"
    page.locator("#sessions").get_by_role("link", name="s1", exact=True).click()
    turns = page.locator("#transcript .turn")
    assert turns.count() == 3
    assert [r.split()[0] for r in page.locator("#transcript .role").all_inner_texts()] == \
        ["HUMAN", "AI", "HUMAN"]  # the role, shown in capitals by the style sheet
    assert turns.nth(2).locator(".content").inner_text() == "Human: Remember I prefer tea"
    page.click("#context-link")
    built = htm.create_context(tags=["chat:user:Ada:session:s1"], scope_working=True)
    assert page.locator("#gauge").inner_text().startswith(f"{built.tokens} / {BUDGET} tokens")
    assert page.locator("#blocks .key a").all_inner_texts() == list(built.keys)


def test_a_script_in_a_conversation_stays_text(page: Any) -> None:
    page.goto("/users")
    page.get_by_role("link", name=ZOE, exact=True).click()
    page.locator("#sessions a").first.click()
    assert page.locator("#session").inner_text() == "café"
    assert page.evaluate("() => window.__pwned") is None
    assert INJECTION in page.locator("#transcript").inner_text()


def test_a_user_whose_memories_are_all_forgotten(people_client: TestClient,
                                                 people_htm: HTM) -> None:
    history = HTMChatMessageHistory(htm=people_htm, session_id="s1", user_id="Grace")
    history.add_messages([HumanMessage("Grace says something she takes back")])
    history.clear()  # forgets every message, recoverably
    assert "/user?id=Grace" not in people_client.get("/users").text
    page = people_client.get("/user?id=Grace")
    assert page.status_code == 200
    assert _keys(page.text, "memories") == []
    assert set(_keys(page.text, "forgotten")) == _scope_keys(people_htm, "chat:user:Grace",
                                                             forgotten=True) != set()
