"""The agent tools (LangChain, LlamaIndex) and ``HTMMiddleware`` keep users apart.

A tag in the scopes' own ``chat`` namespace given as an argument (``shared_tags``) would
show one user another's memories, so every surface refuses it when it is made; the tools
of two users whose ids differ only in letter case, a lookalike or a separator write two
memories for the same words and never forget each other's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from htm_core import HTM
from htm_core.errors import ValidationError

pytest.importorskip("langchain")
pytest.importorskip("llama_index.core")

from htm_integrations.langchain import HTMMiddleware
from htm_integrations.langchain import htm_tools as langchain_tools
from htm_integrations.llama_index import htm_tools as llama_tools

SCOPE_TAGS = ["chat:user:bob", "chat", "Chat:User:bob", "chat:session:s1"]
PAIRS = [("Ada", "ada"), ("ada", "\u0430da"), ("a:b", "a/b")]


SURFACES: dict[str, Callable[..., Any]] = {
    "langchain htm_tools": lambda htm, **kw: langchain_tools(htm, user_id="ada", **kw),
    "llama_index htm_tools": lambda htm, **kw: llama_tools(htm, user_id="ada", **kw),
    "HTMMiddleware": lambda htm, **kw: HTMMiddleware(htm, user_id="ada", **kw),
}


@pytest.mark.parametrize("surface", list(SURFACES))
@pytest.mark.parametrize("tag", SCOPE_TAGS)
def test_scope_tags_are_refused_as_shared_tags(surface: str, tag: str) -> None:
    make = SURFACES[surface]
    with HTM(database_url=":memory:", embedder="hashing") as htm:
        with pytest.raises(ValidationError) as refused:
            make(htm, shared_tags=["kb", tag])
        assert repr(tag) in str(refused.value) and "'chat' namespace" in str(refused.value)
        make(htm, shared_tags=["kb"])  # a tag outside the namespace is fine


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_two_users_notes_stay_apart(htm_factory: Callable[..., HTM], first: str,
                                    second: str) -> None:
    htm = htm_factory(robot="assistant")
    a_remember, _, a_forget = langchain_tools(htm, user_id=first)
    b_remember, _, b_forget = llama_tools(htm, user_id=second)
    said_a = a_remember.invoke({"content": "The locker code is 4711"})
    said_b = b_remember.call(content="The locker code is 4711").content
    key_a = said_a.split("[", 1)[1].split("]", 1)[0]
    key_b = said_b.split("[", 1)[1].split("]", 1)[0]
    assert key_a != key_b
    assert "No memory" in b_forget.call(key=key_a, confirm=True).content
    assert "No memory" in a_forget.invoke({"key": key_b, "confirm": True})
    assert htm.get(key_a) is not None and htm.get(key_b) is not None
    assert "Forgotten" in a_forget.invoke({"key": key_a, "confirm": True})
    assert htm.get(key_b) is not None and htm.get(key_a) is None
