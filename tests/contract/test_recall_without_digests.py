"""Recall leaves digests out unless ``kinds`` names them, on every backend.

A digest repeats its period's sentences, so as a hit it would push the turns it was made
from down the list (docs/recall-quality.md, "Periods: tiered recall and digests"); ``tiered``
recall reads them on its way down instead, and ``kinds="digest"`` finds them.
"""

from __future__ import annotations

import pytest

from htm_core import HTM
from htm_core._recalling import DigestPresence

from .test_digests import WEEK, fill_week


@pytest.mark.parametrize("strategy", ["hybrid", "fulltext", "vector"])
def test_hits_are_the_turns_not_their_digests(htm_factory, strategy: str) -> None:
    htm: HTM = htm_factory(robot="ada")
    fill_week(htm)
    before = [h.memory.key for h in htm.recall("Atlas launch step", strategy=strategy,
                                                 limit=15, min_score=0)]
    digests = htm.consolidate("week", at=WEEK[0])
    assert digests and any("Atlas" in d.content for d in digests)
    hits = htm.recall("Atlas launch step", strategy=strategy, limit=5, min_score=0)
    assert [h.memory.kind for h in hits] == ["episodic"] * 5
    assert hits[0].memory.key == before[0] and {h.memory.key for h in hits} <= set(before)
    asked = htm.recall("Atlas launch step", strategy=strategy, kinds="digest", min_score=0)
    assert asked and {h.memory.kind for h in asked} == {"digest"}


def test_two_users_differing_in_case_see_only_turns(htm_factory) -> None:
    from htm_core.scope import ChatScope

    htm: HTM = htm_factory(robot="bot")
    for who in ("Ada", "ada"):
        scope = ChatScope.of(user_id=who)
        fill_week(htm, scope, who=who)
        htm.consolidate("week", at=WEEK[0], scope=scope)
    for who in ("Ada", "ada"):
        scope = ChatScope.of(user_id=who)
        hits = htm.recall(f"{who} planned the Atlas launch", tags=scope.filter_tags(),
                          limit=10, min_score=0)
        assert hits and all(h.memory.kind == "episodic" for h in hits)
        assert all(h.memory.content.startswith(who) for h in hits)


def test_presence_is_asked_again_until_a_digest_is_seen(htm_factory) -> None:
    htm: HTM = htm_factory(robot="ada")
    presence = DigestPresence(htm.store, every=0.0)
    assert presence.present() is False
    fill_week(htm)
    htm.consolidate("day", at=WEEK[0])
    assert presence.present() is True


def test_the_debugger_ranks_as_recall_does(htm_factory) -> None:
    from htm_core.explain import explain_recall

    htm: HTM = htm_factory(robot="ada")
    fill_week(htm)
    htm.consolidate("week", at=WEEK[0])
    why = explain_recall(htm, "Atlas launch step", limit=5)
    hits = htm.recall("Atlas launch step", limit=5, min_score=0)
    assert [h.memory.key for h in why.fused] == [h.memory.key for h in hits]
    assert all(h.memory.kind != "digest" for h in why.fused)
    asked = explain_recall(htm, "Atlas launch step", limit=5, kinds="digest")
    assert asked.fused and {h.memory.kind for h in asked.fused} == {"digest"}
