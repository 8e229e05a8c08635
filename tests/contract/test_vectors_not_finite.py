"""A vector holding infinity or NaN is refused with htm's own error on every backend: the
batch writes nothing, and numpy's warning about the division on the way (``inf / inf``)
does not reach the caller beside it."""

from __future__ import annotations

import warnings
from datetime import datetime, timezone

import pytest

from htm_core.errors import DimensionMismatchError
from htm_core.store import NewMemory, SearchFilters, open_store


def _rec(i: int, vector: list[float]) -> NewMemory:
    return NewMemory(key=f"k{i}", content=f"memory {i}", robot="r1", importance=1.0,
                     token_count=2, created_at=datetime(2024, 5, 1, tzinfo=timezone.utc),
                     embedding=vector, embedder="test-vectors")


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_a_vector_that_is_not_finite_is_refused_alone(store_url: str, bad: float) -> None:
    store = open_store(store_url)
    try:
        store.add_many([_rec(0, [1.0, 0.0, 0.0, 0.0])])
        batch = [_rec(1, [0.0, 1.0, 0.0, 0.0]), _rec(2, [bad, 1.0, 1.0, bad])]
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with pytest.raises(DimensionMismatchError, match="k2"):
                store.add_many(batch)
        assert store.get("k1", include_forgotten=True) is None
        assert [m.key for m in store.get_many([1, 2, 3])] == ["k0"]
    finally:
        store.close()


def _top(store, vector: list[float]) -> list[tuple[str, float]]:
    hits = store.vector_search(vector, limit=3, filters=SearchFilters())
    keys = {m.id: m.key for m in store.get_many([mid for mid, _ in hits])}
    return [(keys[mid], round(score, 4)) for mid, score in hits]


def test_a_vector_too_long_for_float32_keeps_its_direction(store_url: str) -> None:
    """Components above ~1.8e19 are finite, but their squares overflow float32: the row's
    length was infinity and the stored vector became zeros (found by nothing), with a numpy
    overflow warning. Its direction is what a cosine store keeps: batch and single adds,
    vectors set later (background embedding) and queries alike."""
    store = open_store(store_url)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            store.add_many([_rec(0, [0.0, 1.0, 0.0, 0.0]),
                            _rec(1, [3e19, 4e19, 0.0, 0.0]),
                            _rec(2, [0.0, 0.0, -2e38, 2e38])])
            store.add_many([_rec(3, [1.0, 0.0, 0.0, 0.0])])
            later = store.add_many([_rec(4, [0.0, 0.0, 0.0, 1.0])])[0].memory
            store.set_embeddings([(later.id, [0.0, 0.0, 5e30, 0.0])], "test-vectors")
            assert _top(store, [3.0, 4.0, 0.0, 0.0])[0] == ("k1", 1.0)
            assert _top(store, [3e30, 4e30, 0.0, 0.0])[0] == ("k1", 1.0)
            assert _top(store, [0.0, 0.0, -1.0, 1.0])[0] == ("k2", 1.0)
            assert _top(store, [1e20, 0.0, 0.0, 0.0])[0] == ("k3", 1.0)
            assert _top(store, [0.0, 0.0, 1.0, 0.0])[0] == ("k4", 1.0)
    finally:
        store.close()


@pytest.mark.parametrize("where", ["batch", "later"])
def test_a_value_beyond_float32_is_refused_alone(store_url: str, where: str) -> None:
    """1e39 is a finite Python float but infinity in float32: refused with htm's error,
    without numpy's overflow warning beside it, and nothing is written."""
    store = open_store(store_url)
    try:
        first = store.add_many([_rec(0, [1.0, 0.0, 0.0, 0.0])])[0].memory
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with pytest.raises(DimensionMismatchError, match="float32"):
                if where == "batch":
                    store.add_many([_rec(1, [1e39, 1.0, 0.0, 0.0])])
                else:
                    store.set_embeddings([(first.id, [1e39, 1.0, 0.0, 0.0])], "test-vectors")
        assert store.get("k1", include_forgotten=True) is None
        assert _top(store, [1.0, 0.0, 0.0, 0.0]) == [("k0", 1.0)]
    finally:
        store.close()
