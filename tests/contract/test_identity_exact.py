"""Ids, keys and tags compare exactly, byte for byte, on every backend (htm_core/identity.py).

One store holds memories of several owners whose ids are drawn to collide: by case
(``Ada``/``ada``/``ADA``, ``Chat1``/``chat1``), by Unicode lookalikes (Latin ``a`` and
Cyrillic ``а``; NFC and NFD ``é``), by separators and wildcards (``a_b``, ``a-b``, ``a.b``,
``a%b``, ``a/b``, ``a:b``, a trailing ``:``). Every tag filter of recall (each arm), of
``list`` and of contexts, every key prefix of ``list`` and of the store, and the tag counts
see exactly their own owner's memories and never another's.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import pytest

from htm_core import HTM

NFC = unicodedata.normalize("NFC", "café")
NFD = unicodedata.normalize("NFD", "café")
#: Tag segments (letters, digits, ``_``, ``-``, ``.``) drawn to collide.
OWNERS = ["Ada", "ada", "ADA", "\u0430da", NFC, "a_b", "a-b", "a.b", "aXb", "a"]
#: Keys drawn to collide, under a common root.
KEYS = ["chat:Chat1:0", "chat:chat1:0", "chat:CHAT1:0", "chat:\u0441hat1:0", f"chat:{NFC}:0",
        f"chat:{NFD}:0", "chat:a_b:0", "chat:a-b:0", "chat:a%b:0", "chat:aXb:0",
        "chat:a/b:0", "chat:a:b:0", "chat:a::0", "chat:a:", "chat:a", "chat:a\U0010ffff:0",
        "chat:b:0"]
PREFIXES = ["chat:Chat1:", "chat:chat1:", "chat:\u0441hat1:", f"chat:{NFC}", f"chat:{NFD}",
            "chat:a_", "chat:a_b:", "chat:a%", "chat:a%b:", "chat:a/", "chat:a:", "chat:a::",
            "chat:a", "chat:a\U0010ffff", "chat:", "CHAT:", "chat:b"]


def _secret(owner: str) -> str:
    return f"{owner}'s bank PIN is {4700 + OWNERS.index(owner)}"


@pytest.fixture
def htm(htm_factory: Callable[..., HTM]) -> HTM:
    htm = htm_factory(robot="r")
    htm.add_many([{"content": _secret(o), "key": f"pin-{i}", "tags": [f"user:{o}"]}
                  for i, o in enumerate(OWNERS)]
                 + [{"content": f"{o}'s bank PIN note in a session", "key": f"pin-{i}-s",
                     "tags": [f"user:{o}:session:s1"]} for i, o in enumerate(OWNERS)])
    return htm


def _own(owner: str) -> set[str]:
    i = OWNERS.index(owner)
    return {f"pin-{i}", f"pin-{i}-s"}


@pytest.mark.parametrize("strategy", ["vector", "fulltext", "hybrid"])
def test_recall_by_tag_sees_exactly_its_owner(htm: HTM, strategy: str) -> None:
    wrong = []
    for owner in OWNERS:
        got = {h.memory.key for h in htm.recall("bank PIN", tags=[f"user:{owner}"], limit=50,
                                                strategy=strategy)}
        if got != _own(owner):
            wrong.append((owner, sorted(got)))
    assert wrong == []


def test_list_context_and_counts_by_tag_see_exactly_their_owner(htm: HTM) -> None:
    for owner in OWNERS:
        tag = f"user:{owner}"
        assert {m.key for m in htm.list(tags=[tag], limit=100).memories} == _own(owner)
        context = htm.create_context(tags=[tag], scope_working=True)
        assert {m.key for m in context.memories} == _own(owner)
    counts = htm.tags()
    assert {t: counts[t] for t in counts if t.startswith("user:")} == {
        **{f"user:{o}": 1 for o in OWNERS}, **{f"user:{o}:session:s1": 1 for o in OWNERS}}


def test_a_tag_filter_admits_tags_below_it_and_nothing_beside_it(htm: HTM) -> None:
    assert {m.key for m in htm.list(tags=["user:a"], limit=100).memories} == _own("a")
    assert htm.list(tags=["user:A"], limit=100).memories == ()
    assert htm.list(tags=["user:a_"], limit=100).memories == ()
    session = {m.key for m in htm.list(tags=["user:Ada:session:s1"], limit=100).memories}
    assert session == {f"pin-{OWNERS.index('Ada')}-s"}


def test_key_prefixes_select_exactly_the_keys_that_start_with_them(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="r")
    htm.add_many([{"content": f"turn stored under {k!r}", "key": k} for k in KEYS])
    htm.forget("chat:b:0", confirm=True)
    wrong = []
    for prefix in PREFIXES:
        expected = sorted(k for k in KEYS if k.startswith(prefix))
        listed = sorted(m.key for m in htm.list(key_prefix=prefix, include_forgotten=True,
                                                limit=100).memories)
        stored = htm.store.keys_with_prefix(prefix, include_forgotten=True)
        visible = htm.store.keys_with_prefix(prefix)
        if listed != expected or sorted(stored) != expected \
                or sorted(visible) != [k for k in expected if k != "chat:b:0"]:
            wrong.append((prefix, listed, stored, expected))
    assert wrong == []


def _indexes(htm: HTM, sqlite: bool) -> set[str]:
    from sqlalchemy import text

    sql = ("SELECT name FROM sqlite_master WHERE type = 'index'" if sqlite
           else "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")
    with htm.store.engine.connect() as conn:  # type: ignore[attr-defined]
        return {str(r[0]) for r in conn.execute(text(sql))}


def test_a_store_of_version_5_loses_its_folded_tag_index(htm_factory: Callable[..., HTM],
                                                         store_url: str) -> None:
    """The index of case-folded tag names served the old filters only; the schema step to
    version 6 drops it (and on PostgreSQL adds the code-point-order indexes the exact
    ranges use). A store reopened at version 5 with the index still there is migrated."""
    from sqlalchemy import text

    from htm_core.store import SCHEMA_VERSION

    htm = htm_factory(robot="r")
    htm.add("Ada's note", tags=["chat:user:Ada"])
    folded = ("lower(name)" if store_url.endswith(".db") else 'lower(name COLLATE "C")')
    with htm.store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(text(f"CREATE INDEX tags_name_folded ON tags ({folded})"))
        conn.execute(text("UPDATE htm_meta SET value = '5' WHERE key = 'schema_version'"))
    htm.close()
    again = htm_factory(robot="r")
    assert again.store.schema_version() == SCHEMA_VERSION
    names = _indexes(again, store_url.endswith(".db"))
    assert "tags_name_folded" not in names
    if not store_url.endswith(".db"):
        assert {"tags_name_c", "memories_key_c"} <= names
    assert [h.memory.content for h in again.recall("note", tags=["chat:user:Ada"])] == [
        "Ada's note"]
    assert again.recall("note", tags=["chat:user:ada"]) == []
