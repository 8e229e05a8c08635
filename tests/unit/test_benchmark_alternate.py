"""``benchmarks.alternate``: how result files are read and two sides compared."""

from __future__ import annotations

from benchmarks.alternate import compare, numbers


def test_numbers_name_list_items_by_their_size_and_skip_the_machine() -> None:
    result = {"machine": {"cpus": 2}, "when": "today", "ok": True,
              "rows": [{"size": 1000, "hybrid": 0.5}, {"x": 2}], "single": {"add": 3}}
    assert dict(numbers(result)) == {"rows[size=1000].size": 1000.0,
                                     "rows[size=1000].hybrid": 0.5, "rows[1].x": 2.0,
                                     "single.add": 3.0}


def test_compare_takes_the_median_of_the_pair_ratios() -> None:
    before = [{"a": 1.0, "gone": 1.0}, {"a": 2.0}, {"a": 4.0}]
    after = [{"a": 2.0}, {"a": 2.0}, {"a": 2.0, "new": 1.0}]
    [row] = compare(before, after)
    assert row == ["a", "2", "2", "1.000", "0.50-2.00"]
