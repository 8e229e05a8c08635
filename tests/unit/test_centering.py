"""Query centering for hybrid recall: the maths of ``centered_query`` and the running centroid
of the in-process vector index (exact, also after rows are replaced)."""

from __future__ import annotations

import numpy as np
import pytest

from htm_core.recall import RetrievalConfig, centered_query
from htm_core.store.vector_index import VectorIndex, normalise


def _unit(rng: np.random.Generator, dim: int = 16) -> np.ndarray:
    return normalise(rng.normal(size=dim))


def test_centered_query_removes_the_common_direction() -> None:
    rng = np.random.default_rng(1)
    query, centroid = _unit(rng), _unit(rng)
    out = np.asarray(centered_query(query.tolist(), centroid.tolist()))
    assert float(out @ centroid) == pytest.approx(0.0, abs=1e-6)
    assert float(np.linalg.norm(out)) == pytest.approx(1.0)
    # What is left of the query is kept: the residual points the same way.
    residual = query - (query @ centroid) * centroid
    assert float(out @ normalise(residual)) == pytest.approx(1.0)


def test_centered_query_leaves_the_query_alone_when_it_cannot_apply() -> None:
    q = [0.6, 0.8, 0.0]
    assert centered_query(q, None) == q
    assert centered_query([0.0, 0.0, 0.0], [1.0, 0.0, 0.0]) == [0.0, 0.0, 0.0]
    assert centered_query(q, [1.0, 0.0]) == q  # wrong dimension: the arm reports it
    assert centered_query([1.0, 0.0, 0.0], [1.0, 0.0, 0.0]) == [1.0, 0.0, 0.0]  # nothing left


def test_ranking_between_two_memories_is_unchanged_by_their_own_mean() -> None:
    """With two stored vectors the centroid is their bisector: centering cannot flip them."""
    rng = np.random.default_rng(2)
    for _ in range(50):
        a, b, q = _unit(rng), _unit(rng), _unit(rng)
        mu = normalise(a + b)
        c = np.asarray(centered_query(q.tolist(), mu.tolist()))
        assert (a @ q > b @ q) == (a @ c > b @ c)


def test_centroid_is_the_exact_mean_and_follows_replacements() -> None:
    rng = np.random.default_rng(3)
    index = VectorIndex(16, capacity=4)
    assert index.centroid() is None
    rows = [_unit(rng) for _ in range(10)]
    index.add_arrays(np.arange(1, 11), np.stack(rows), np.zeros(10), np.ones(10, dtype=np.int64))
    assert np.allclose(index.centroid(), normalise(np.mean(rows, axis=0)), atol=1e-6)
    new = _unit(rng)
    index.add([(11, new, 0.0, 1)])  # appended after a centroid was taken: summed incrementally
    rows.append(new)
    assert np.allclose(index.centroid(), normalise(np.mean(rows, axis=0)), atol=1e-6)
    replaced = _unit(rng)
    index.add([(3, replaced, 0.0, 1)])  # a stored row changes: the sum is rebuilt
    rows[2] = replaced
    assert np.allclose(index.centroid(), normalise(np.mean(rows, axis=0)), atol=1e-6)


def test_centroid_kept_between_calls_follows_every_change() -> None:
    """centroid() and centroid_list() answer from what they worked out while nothing was
    added or replaced; every add or replacement is seen by the next call."""
    rng = np.random.default_rng(5)
    index = VectorIndex(16, capacity=2)
    assert index.centroid_list() is None
    rows = [_unit(rng) for _ in range(3)]
    index.add_arrays(np.arange(1, 4), np.stack(rows), np.zeros(3), np.ones(3, dtype=np.int64))
    for step in range(4):
        if step == 1:
            rows.append(_unit(rng))
            index.add([(4, rows[-1], 0.0, 1)])
        elif step == 2:
            rows[0] = _unit(rng)
            index.add([(1, rows[0], 0.0, 1)])
        want = normalise(np.mean(rows, axis=0))
        first, again = index.centroid_list(), index.centroid_list()
        assert first == again and first is not again
        assert np.allclose(first, want, atol=1e-6)
        got = index.centroid()
        got[:] = 0.0  # a caller's copy: changing it changes nothing kept
        assert index.centroid().tolist() == first


def test_plain_config_does_not_center() -> None:
    assert RetrievalConfig().centering is True
    assert RetrievalConfig.plain().centering is False
