"""``benchmarks.scale``: the shared store and the store alone are timed in turn, and
their ratio is the median of the passes' ratios."""

from __future__ import annotations

import pytest

import benchmarks.scale as scale


class Clocked:
    """An ``HTM`` stand-in whose recall advances a shared clock: by its own cost, plus
    what the "machine" adds at that moment (the same for both sides in one pass)."""

    def __init__(self, name: str, cost: float, log: list[str], clock: list[float],
                 load: list[float]) -> None:
        self.name, self.cost, self.log, self.clock, self.load = name, cost, log, clock, load

    def recall(self, text: str, *, tags: list[str], limit: int) -> list[object]:
        pass_index = sum(1 for name in self.log if name == self.name) // 3
        self.log.append(self.name)
        self.clock[0] += self.cost * self.load[min(pass_index, len(self.load) - 1)]
        return []


def test_passes_alternate_between_the_stores_after_warming_both(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock, log = [0.0], list[str]()
    monkeypatch.setattr(scale.time, "perf_counter", lambda: clock[0])
    load = [1.0, 1.0, 5.0, 1.0]  # the warm pass, then a slow second pass on both sides
    shared = Clocked("shared", 0.03, log, clock, load)
    alone = Clocked("alone", 0.02, log, clock, load)
    out = scale.paired_times((shared, alone), ["a", "b", "c"], "chat:user:ada", passes=3)
    assert log == ["shared"] * 3 + ["alone"] * 3 + (["shared"] * 3 + ["alone"] * 3) * 3
    # Whatever the load of a pass, the two sides' ratio is their own: 0.03 / 0.02.
    assert out["ratio"] == pytest.approx(1.5)
    assert out["shared_p50_s"] == pytest.approx(0.03)
    assert out["alone_p50_s"] == pytest.approx(0.02)


def test_the_report_uses_the_passes_in_turn_where_a_run_has_them() -> None:
    shared = {"hybrid_p50_s": 0.09, "hybrid_p95_s": 0.1}
    alone = {"hybrid_p50_s": 0.03, "hybrid_p95_s": 0.04,
             "paired": {"shared_p50_s": 0.05, "shared_p95_s": 0.06, "alone_p50_s": 0.04,
                        "alone_p95_s": 0.05, "ratio": 1.25}}
    assert scale.hybrid_pair(shared, alone)["ratio"] == 1.25
    del alone["paired"]
    assert scale.hybrid_pair(shared, alone)["ratio"] == pytest.approx(3.0)
    assert scale.hybrid_pair(shared, None)["ratio"] is None
