"""The embedder's lists of floats become float32 rows bit for bit as numpy makes them."""

from __future__ import annotations

import numpy as np
import pytest

from htm_core import HTM
from htm_core._embedding import float32_rows
from htm_core.errors import EmbeddingError


def test_packed_rows_equal_numpys_cast_bit_for_bit() -> None:
    rng = np.random.default_rng(1)
    rows = (rng.standard_normal((40, 96)) * 10.0 ** rng.integers(-46, 39, (40, 96))).tolist()
    rows[0][:6] = [-0.0, 1e-46, 3.4028235e38, 1.401298464324817e-45, 7, True]
    rows[1][:3] = [float("nan"), float("inf"), -float("inf")]
    rows[2][:2] = [np.float64(0.1), np.float32(0.2)]
    got = float32_rows(rows)
    assert got is not None and got.dtype == np.float32 and got.flags.writeable
    want = np.asarray(rows, dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("vectors", [
    [], [[]], [[1.0], [1.0, 2.0]], [(1.0, 2.0)], [["1.0", 2.0]], [[None, 1.0]],
    np.ones((2, 3)), [np.ones(3)], ([1.0],)])
def test_anything_but_lists_of_numbers_is_left_to_numpy(vectors: object) -> None:
    assert float32_rows(vectors) is None  # type: ignore[arg-type]


class Lists:
    """Returns plain lists, optionally with a bad value in the second text's vector."""

    name = "lists-4"

    def __init__(self, bad: object = None) -> None:
        self.bad = bad

    def embed_documents(self, texts: list[str]) -> list[list[object]]:
        out: list[list[object]] = [[1.0, 2.0, float(i), 0.5] for i, _ in enumerate(texts)]
        if self.bad is not None and len(out) > 1:
            out[1][2] = self.bad
        return out

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 2.0, 0.0, 0.5]


@pytest.mark.parametrize("bad", [float("nan"), 1e300, float("inf")])
def test_a_bad_value_still_fails_the_batch(bad: float, tmp_path: object) -> None:
    with HTM(database_url=":memory:", embedder=Lists(bad)) as htm:
        with pytest.raises(EmbeddingError):
            htm.add_many(["one", "two", "three"])
        assert htm.stats().long_term_total == 0


def test_vectors_from_lists_are_stored_as_numpy_would_store_them() -> None:
    with HTM(database_url=":memory:", embedder=Lists()) as htm:
        added = htm.add_many(["one", "two", "three"])
        vec = htm.store.find_embeddings([added[1].content_hash], "lists-4").get(
            added[1].content_hash)
    want = np.asarray([1.0, 2.0, 1.0, 0.5], dtype=np.float32)
    assert vec is not None and np.allclose(vec, want / np.linalg.norm(want))
