"""The scope's keys and the refusal of scope tags (``htm_core.scope``), without a store."""

from __future__ import annotations

import itertools
from datetime import datetime, timezone

import pytest

from htm_core.errors import InvalidKeyError, ValidationError
from htm_core.models import Memory
from htm_core.scope import ChatScope, check_topic_tags, scope_user

#: Ids drawn to collide: case, a Cyrillic lookalike, separators, a prefix of another,
#: the longest id kept as it is and one character more.
IDS = ["Ada", "ada", "\u0430da", "a:b", "a/b", "a", "ab", "a_b", "a-b", "x" * 64, "x" * 65]


def test_no_scope_can_write_a_key_of_another() -> None:
    """Whatever key a scope is given, it lands under that scope's own prefix only."""
    scopes = [ChatScope.of(user_id=u) for u in IDS] + [ChatScope.of(session_id=s)
                                                       for s in ("Ada", "ada", "a:b")]
    assert len({s.key_prefix for s in scopes}) == len(scopes)
    given = ["pref-vim", *(s.own_key("pref-vim") for s in scopes),
             *(s.note_key("Same words") for s in scopes)]
    for writer, owner in itertools.permutations(scopes, 2):
        for key in given:
            assert not writer.own_key(key).startswith(owner.key_prefix), (writer, owner, key)
    assert len({s.note_key("Same words") for s in scopes}) == len(scopes)


def test_a_key_too_long_for_the_scope_says_how_much_room_there_is() -> None:
    scope = ChatScope.of(user_id="ada")
    with pytest.raises(InvalidKeyError, match=r"leaves room for 237"):
        scope.own_key("k" * 240)
    assert scope.own_key("k" * 237).endswith("k" * 237)
    assert scope.find(lambda key: None, "k" * 240) is None  # a lookup is only "not found"


def test_find_sees_only_the_scope() -> None:
    ada, other = ChatScope.of(user_id="ada", shared_tags=["kb"]), ChatScope.of(user_id="Ada")

    def memory(key: str, tags: tuple[str, ...]) -> Memory:
        now = datetime(2024, 5, 15, tzinfo=timezone.utc)
        return Memory(id=1, key=key, content="x", robot="r", created_at=now,
                      last_accessed=now, tags=tags)

    stored = {m.key: m for m in (memory("chat:user:Ada:key:pref", ("chat:user:Ada",)),
                                 memory("office-hours", ("kb",)),
                                 memory("raw", ("chat:user:Ada",)))}
    assert ada.find(stored.get, "pref") is None
    assert ada.find(stored.get, "chat:user:Ada:key:pref") is None
    assert ada.find(stored.get, "raw") is None
    assert ada.find(stored.get, "office-hours") is stored["office-hours"]
    assert other.find(stored.get, "pref") is stored["chat:user:Ada:key:pref"]
    assert other.find(stored.get, "raw") is stored["raw"]


@pytest.mark.parametrize("tag", ["chat", "chat:user:bob", "CHAT:user:bob", "Chat",
                                 "chat:role:note", " chat:user:bob "])
def test_scope_tags_are_refused_by_name(tag: str) -> None:
    with pytest.raises(ValidationError, match=r"namespace") as refused:
        check_topic_tags(["ops", tag], name="--tag")
    assert repr(tag.strip()) in str(refused.value) and "--tag" in str(refused.value)


def test_other_tags_pass() -> None:
    assert check_topic_tags(["chatter", "chat-ops", "ops:chat", "user:chat"]) == (
        "chatter", "chat-ops", "ops:chat", "user:chat")


def test_the_user_comes_from_the_argument_then_htm_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HTM_USER", raising=False)
    assert scope_user() is None
    monkeypatch.setenv("HTM_USER", "  ")
    assert scope_user() is None
    monkeypatch.setenv("HTM_USER", "ada")
    assert (scope_user(), scope_user("Ada")) == ("ada", "Ada")
