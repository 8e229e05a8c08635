"""Exact search of the in-process vector index when some rows do not pass (forgotten
memories, a filter, the graph's threshold): the same answer as scoring the passing rows
alone, without copying them out of the matrix first (which cost four times the search on a
large store). Real numpy arrays; allocations measured with ``tracemalloc``, no timings."""

from __future__ import annotations

import tracemalloc

import numpy as np

from htm_core.store.vector_index import VectorIndex

DIM = 64


def _index(n: int, seed: int = 3) -> tuple[VectorIndex, np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = VectorIndex(DIM, n)
    ids = np.arange(1, n + 1, dtype=np.int64)
    index.add_arrays(ids, vectors, np.arange(n, dtype=np.float64), ids % 2)
    return index, vectors


def _reference(vectors: np.ndarray, alive: np.ndarray, query: np.ndarray,
               limit: int) -> list[tuple[int, float]]:
    rows = np.flatnonzero(alive)
    scores = np.einsum("ij,j->i", vectors[rows], query)
    order = sorted(range(len(rows)), key=lambda i: (-scores[i], rows[i]))[:limit]
    return [(int(rows[i]) + 1, float(scores[i])) for i in order]


def test_most_rows_passing_gives_the_answer_of_the_passing_rows_alone() -> None:
    index, vectors = _index(3_000)
    alive = np.ones(3_000, dtype=bool)
    for mid in range(1, 3_001, 7):  # every seventh memory forgotten
        index.set_alive(mid, False)
        alive[mid - 1] = False
    rng = np.random.default_rng(9)
    for _ in range(20):
        query = rng.standard_normal(DIM).astype(np.float32)
        query /= np.linalg.norm(query)
        assert index.search(query, 25) == _reference(vectors, alive, query, 25)
    few = index.search(query, 10, robot=1)  # a filter passing half the rows
    assert few == _reference(vectors, alive & (np.arange(1, 3_001) % 2 == 1), query, 10)
    window = index.search(query, 10, start=100.0, end=400.0)  # a tenth of the rows
    created = np.arange(3_000)
    assert window == _reference(vectors, alive & (created >= 100) & (created < 400), query, 10)


def test_an_exact_search_with_a_forgotten_row_copies_no_matrix() -> None:
    n = 20_000
    index, _vectors = _index(n)
    index.set_alive(17, False)
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    index.search(query, 50)  # warm up
    tracemalloc.start()
    try:
        index.search(query, 50)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < n * DIM * 4 / 2  # the passing rows' vectors would be n * DIM * 4 bytes
