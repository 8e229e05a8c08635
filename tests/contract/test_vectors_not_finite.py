"""A vector holding infinity or NaN is refused with htm's own error on every backend: the
batch writes nothing, and numpy's warning about the division on the way (``inf / inf``)
does not reach the caller beside it."""

from __future__ import annotations

import warnings
from datetime import datetime, timezone

import pytest

from htm_core.errors import DimensionMismatchError
from htm_core.store import NewMemory, open_store


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
