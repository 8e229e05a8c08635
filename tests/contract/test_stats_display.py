"""``Stats`` reads well when printed and turns into plain JSON, on both backends."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import datetime, timezone

from htm_core import HTM
from htm_core.models import Stats
from htm_core.serialize import stats_to_dict


def two_robots(htm_factory: Callable[..., HTM]) -> tuple[Stats, Stats]:
    """Stats of ``Ada`` and ``ada`` (names that differ only by case) on one store."""
    upper = htm_factory(robot="Ada", working_memory_tokens=1_000)
    lower = htm_factory(robot="ada", working_memory_tokens=2_000)
    upper.add_many([f"Ada's fact number {i}: she prefers tabs" for i in range(3)])
    lower.add("ada keeps one fact", key="ada:one")
    upper.forget(upper.add("a passing thought").key, confirm=True)
    return upper.stats(), lower.stats()


def test_print_shows_the_main_figures_in_a_few_short_lines(
        htm_factory: Callable[..., HTM]) -> None:
    upper, lower = two_robots(htm_factory)
    text = str(upper)
    lines = text.splitlines()
    assert 3 <= len(lines) <= 6
    # every line short, but the store's, which names its database in full (a path or URL)
    assert all(len(line) <= 120 for line in lines if upper.database not in line), lines
    assert lines[0] == "Stats for robot 'Ada'"
    assert f"3 memories, {upper.working_memory_tokens:,} of 1,000 tokens" in text
    assert "4 memories (3 by this robot), 1 forgotten, 2 robots" in text
    assert upper.database in text and upper.backend in text
    assert "metrics" not in text and "latency" not in text
    other = str(lower)
    assert other.splitlines()[0] == "Stats for robot 'ada'"
    assert "1 memory, " in other and "of 2,000 tokens" in other
    assert "4 memories (1 by this robot), 1 forgotten" in other


def test_repr_is_one_short_line(htm_factory: Callable[..., HTM]) -> None:
    upper, lower = two_robots(htm_factory)
    for stats in (upper, lower):
        shown = repr(stats)
        assert "\n" not in shown and len(shown) < 300, shown
        assert shown.startswith(f"<Stats robot={stats.robot!r} working=")
        assert "extra" not in shown
    assert repr(upper) != repr(lower)


def test_to_dict_is_plain_json_with_every_field(htm_factory: Callable[..., HTM]) -> None:
    upper, _ = two_robots(htm_factory)
    out = upper.to_dict()
    assert json.loads(json.dumps(out)) == out
    names = {f.name for f in dataclasses.fields(Stats)}
    assert set(out) == names | {"working_memory_utilisation"}
    assert out["long_term_total"] == 4 and out["robots"] == 2 and out["robot"] == "Ada"
    assert out["working_memory_utilisation"] == round(upper.working_memory_utilisation, 6)
    assert out["extra"]["metrics"]["adds"] == upper.extra["metrics"]["adds"]
    assert stats_to_dict(upper) == out
    assert "working_memory_utilisation" not in stats_to_dict(upper, utilisation=False)


def test_to_dict_turns_any_extra_into_json(htm_factory: Callable[..., HTM]) -> None:
    upper, _ = two_robots(htm_factory)
    when = datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc)
    odd = dataclasses.replace(upper, extra={
        "at": when, "pair": (1, "a"), "kinds": frozenset({"x"}), 3: {"nested": [when]},
        "thing": ValueError("not JSON")})
    out = odd.to_dict()["extra"]
    assert json.loads(json.dumps(out)) == out
    assert out["at"] == "2024-05-15T12:00:00+00:00"
    assert out["pair"] == [1, "a"] and out["kinds"] == ["x"]
    assert out["3"] == {"nested": ["2024-05-15T12:00:00+00:00"]}
    assert out["thing"] == "not JSON"
    assert odd.extra["at"] is when  # the Stats itself keeps its values
