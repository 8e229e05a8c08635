"""``htm_core.explain.explain_recall``: the recall debugger's read-only look inside a recall,
checked against what ``recall`` then really does, on both backends."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from htm_core import HTM, FrozenClock
from htm_core.errors import InvalidContentError, TimeframeError, UnknownStrategyError
from htm_core.explain import explain_recall

from .conftest import fill


def _state(htm: HTM) -> tuple[object, ...]:
    page = htm.list(limit=100, include_forgotten=True)
    return (tuple((m.key, m.access_count, m.last_accessed) for m in page.memories),
            len(htm.operations(limit=10_000)), htm.store.working_version(htm.robot),
            tuple(htm.working_memory.keys()))


def test_the_fused_list_is_what_recall_returns(ui_htm: HTM) -> None:
    for query, kwargs in [("tea", {}), ("vim editor keybindings", {"limit": 2}),
                          ("tea", {"strategy": "fulltext"}), ("memories", {"strategy": "vector"}),
                          ("tea houses", {"tags": "travel"}),
                          ("tea", {"timeframe": "last 3 days"})]:
        why = explain_recall(ui_htm, query, **kwargs)  # type: ignore[arg-type]
        hits = ui_htm.recall(query, **kwargs)  # type: ignore[arg-type]
        assert [(h.memory.key, h.ranks) for h in why.fused] == \
            [(h.memory.key, h.ranks) for h in hits], (query, kwargs)
        assert [h.relevance for h in why.fused] == pytest.approx([h.score for h in hits])
        assert all(a.score >= b.score for a, b in zip(why.fused, why.fused[1:], strict=False))
        assert hits, (query, kwargs)


def test_explaining_changes_nothing(ui_htm: HTM) -> None:
    before = _state(ui_htm)
    why = explain_recall(ui_htm, "green tea in the morning", limit=3)
    assert why.fused
    assert _state(ui_htm) == before
    ui_htm.recall("green tea in the morning", limit=3)
    assert _state(ui_htm) != before  # a real recall counts accesses: the check can fail


def test_each_hit_sits_at_its_rank_in_each_arm(ui_htm: HTM) -> None:
    why = explain_recall(ui_htm, "tea in the morning", limit=5)
    assert set(why.arms) == {"vector", "fulltext"}
    ranked_somewhere = 0
    for hit in why.fused:
        for arm, rank in hit.ranks.items():
            if arm == "neighbor":
                continue
            assert why.arms[arm][rank - 1].memory.key == hit.memory.key
            assert why.arms[arm][rank - 1].rank == rank
            ranked_somewhere += 1
    assert ranked_somewhere >= len(why.fused)
    for hits in why.arms.values():
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)


def test_a_time_in_the_query_is_read_and_searched(ui_htm: HTM) -> None:
    why = explain_recall(ui_htm, "what did we plan last week about tea")
    assert why.query_time is not None
    assert why.query_time.phrase == "last week"
    assert {"vector@time", "fulltext@time"} <= set(why.arms)
    for hit in why.arms["fulltext@time"]:
        assert why.query_time.start <= hit.memory.created_at < why.query_time.end
    windowed = explain_recall(ui_htm, "tea", timeframe="last 3 days")
    assert windowed.filters.start is not None and windowed.filters.end is not None
    assert all(windowed.filters.start <= h.memory.created_at for h in windowed.fused)


def test_the_predicted_evictions_are_the_real_ones(htm_factory: Callable[..., HTM],
                                                   clock: FrozenClock) -> None:
    htm = htm_factory(robot="small", working_memory_tokens=25)
    fill(htm, clock)
    htm.clear_working_memory()
    for key in ("pref-vim", "proj-htm", "trip-kyoto"):
        htm.retrieve(key)  # an access does not enter working memory...
    htm.recall("Vim keybindings", limit=1)
    htm.recall("Project htm stores memories", limit=1)
    resident = set(htm.working_memory.keys())
    assert resident
    why = explain_recall(htm, "green tea in the morning tea houses", limit=2)
    assert why.fused
    seen = htm.operations(limit=1)[0].id
    htm.recall("green tea in the morning tea houses", limit=2)
    evicted = [o.key for o in htm.operations(op="evict", limit=100) if o.id > seen][::-1]
    assert evicted == why.would_evict
    assert set(why.would_evict) & resident, "the test needs a recall that evicts a resident"
    assert why.working_tokens == (htm.working_memory.tokens, 25)


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"query": "  "}, InvalidContentError),
    ({"query": "tea", "timeframe": "whenever"}, TimeframeError),
    ({"query": "tea", "strategy": "psychic"}, UnknownStrategyError),
])
def test_bad_arguments_raise_what_recall_raises(ui_htm: HTM, kwargs: dict[str, str],
                                                error: type[Exception]) -> None:
    with pytest.raises(error):
        explain_recall(ui_htm, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(error):
        ui_htm.recall(**kwargs)  # type: ignore[arg-type]
