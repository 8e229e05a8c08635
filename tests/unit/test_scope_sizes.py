"""The kept scope sizes of the PostgreSQL searcher: by exact tags and cap, dropped by a
write at or below a filter tag, at most ``kept`` of them."""

from __future__ import annotations

from htm_core.store.postgres.search import ScopeSizes


def test_sizes_are_kept_by_exact_tags_and_cap() -> None:
    sizes = ScopeSizes()
    sizes.put(2000, ("chat:user:Ada",), 6)
    sizes.put(2000, ("chat:user:ada",), 2000)
    assert sizes.get(2000, ("chat:user:Ada",)) == 6
    assert sizes.get(2000, ("chat:user:ada",)) == 2000
    assert sizes.get(50, ("chat:user:ada",)) is None
    assert sizes.get(2000, ("chat:user:ADA",)) is None


def test_a_write_drops_the_filters_it_falls_under_only() -> None:
    sizes = ScopeSizes()
    for tag in ("chat", "chat:user", "chat:user:ada", "chat:user:Ada", "chat:user:adam",
                "chat/user/ada"):
        sizes.put(10, (tag,), 1)
    sizes.put(10, ("chat:user:adam", "chat:user:Ada"), 1)
    sizes.wrote(["chat:user:ada:session:s1"])
    kept = {tag for tag in ("chat", "chat:user", "chat:user:ada", "chat:user:Ada",
                            "chat:user:adam", "chat/user/ada")
            if sizes.get(10, (tag,)) is not None}
    assert kept == {"chat:user:Ada", "chat:user:adam", "chat/user/ada"}
    assert sizes.get(10, ("chat:user:adam", "chat:user:Ada")) == 1
    sizes.wrote(["chat:user:Ada"])
    assert sizes.get(10, ("chat:user:adam", "chat:user:Ada")) is None
    assert sizes.get(10, ("chat:user:adam",)) == 1
    sizes.wrote([])
    assert sizes.get(10, ("chat:user:adam",)) == 1
    sizes.wrote(None)
    assert sizes.get(10, ("chat:user:adam",)) is None and sizes.get(10, ("chat/user/ada",)) is None


def test_at_most_kept_sizes_the_least_recently_used_dropped_first() -> None:
    sizes = ScopeSizes(kept=2)
    sizes.put(10, ("a",), 1)
    sizes.put(10, ("b",), 2)
    assert sizes.get(10, ("a",)) == 1  # used: "b" is now the oldest
    sizes.put(10, ("c",), 3)
    assert [sizes.get(10, (t,)) for t in "abc"] == [1, None, 3]
    sizes.wrote(["b"])  # an evicted key leaves nothing behind to drop
    assert [sizes.get(10, (t,)) for t in "abc"] == [1, None, 3]


def test_a_size_older_than_seconds_is_not_used() -> None:
    sizes = ScopeSizes(seconds=0.0)
    sizes.put(10, ("a",), 1)
    assert sizes.get(10, ("a",)) is None
