"""Where window vectors come from, on every backend: an embedder's ``embed_windows``
capability (one call makes a long text's vector and its windows'), and every window
embedded as a text of its own for an embedder without it.

The embedders here count what they are asked to embed. ``PooledBag`` makes a window's
vector as the bag of words of the text between the window's offsets, so a test can tell
vectors made from the spans from vectors made from the window texts.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from htm_core import RetrievalConfig
from htm_core._windows import split_windows, window_plan
from htm_core.embeddings import WindowEmbedder
from htm_core.errors import EmbeddingError
from tests.unit.test_windows import DISTRACTORS, FILLER, LONG, QUERY, BagOfWords

#: A second long text whose sentences are separated by newlines (its spans then hold
#: newlines where its windows' texts hold spaces).
LINES = "\n".join(["The garden needs water.", FILLER.strip(), "My cat is named Pixel.",
                   FILLER.strip()])


class CountingBag(BagOfWords):
    """A bag-of-words embedder without the capability, counting the texts it embeds."""

    name = "bag-of-words-test"

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return super().embed_documents(texts)


class PooledBag(CountingBag):
    """:class:`CountingBag` with ``embed_windows``: one call per batch of long texts."""

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__()
        self.window_calls: list[tuple[list[str], list[list[tuple[int, int]]]]] = []
        self.fail = fail

    def embed_windows(self, texts: list[str], spans: list[list[tuple[int, int]]]
                      ) -> tuple[list[list[float]], list[list[list[float]]]]:
        if self.fail:
            raise RuntimeError("no windows today")
        self.window_calls.append((list(texts), [list(s) for s in spans]))
        return ([self._vector(t) for t in texts],
                [[self._vector(t[a:b]) for a, b in s] for t, s in zip(texts, spans, strict=True)])


def _items() -> list[dict[str, str]]:
    return [{"content": LONG, "key": "long"}, {"content": LINES, "key": "lines"},
            *({"content": d, "key": f"d{i}"} for i, d in enumerate(DISTRACTORS))]


def _vector_keys(htm, query: str) -> list[str]:
    return [h.memory.key for h in htm.recall(query, strategy="vector", limit=10)]


def test_the_capability_is_the_optional_embed_windows_method():
    assert isinstance(PooledBag(), WindowEmbedder)
    assert not isinstance(CountingBag(), WindowEmbedder)


def test_an_embedder_without_embed_windows_embeds_each_window_text(htm_factory):
    embedder = CountingBag()
    htm = htm_factory(embedder=embedder)
    htm.add_many(_items())
    windows = split_windows(LONG, 20) + split_windows(LINES, 20)
    # each distinct text once (the two texts share windows of FILLER)
    assert sorted(embedder.texts) == sorted(set([i["content"] for i in _items()] + windows))
    assert htm.store.window_count() == len(windows)
    assert _vector_keys(htm, QUERY)[0] == "long"


def test_embed_windows_makes_a_long_texts_vector_and_windows_in_one_call(htm_factory):
    embedder = PooledBag()
    htm = htm_factory(embedder=embedder)
    htm.add_many(_items())
    assert sorted(embedder.texts) == sorted(DISTRACTORS)  # no window text, no long text again
    [(texts, spans)] = embedder.window_calls
    assert texts == [LONG, LINES]
    assert spans == [window_plan(LONG, 20)[1], window_plan(LINES, 20)[1]]
    assert htm.store.window_count() == len(split_windows(LONG, 20)) + len(
        split_windows(LINES, 20))
    assert _vector_keys(htm, QUERY)[0] == "long"
    assert _vector_keys(htm, "cat named pixel")[0] == "lines"


def test_pool_windows_false_turns_the_capability_off(htm_factory):
    embedder = PooledBag()
    embedder.pool_windows = False  # type: ignore[attr-defined]
    htm = htm_factory(embedder=embedder)
    htm.add_many(_items())
    assert embedder.window_calls == []
    assert set(split_windows(LONG, 20)) <= set(embedder.texts)
    assert _vector_keys(htm, QUERY)[0] == "long"


def test_windows_made_in_the_background_come_from_embed_windows(htm_factory):
    embedder = PooledBag()
    htm = htm_factory(embedder=embedder, background_embeddings=True)
    htm.add_many(_items())
    htm.flush(timeout=60)
    assert htm.store.window_count() == len(split_windows(LONG, 20)) + len(
        split_windows(LINES, 20))
    assert not set(embedder.texts) & set(split_windows(LONG, 20))
    assert _vector_keys(htm, QUERY)[0] == "long"


def test_a_failing_embed_windows_stores_nothing_and_says_which_embedder(htm_factory):
    htm = htm_factory(embedder=PooledBag(fail=True))
    with pytest.raises(EmbeddingError, match="bag-of-words-test failed: no windows today"):
        htm.add_many(_items())
    assert htm.store.counts(htm.robot).total == 0


def test_set_windows_writes_a_batch_at_once_skips_stale_rows_and_refuses_other_dimensions(
        htm_factory):
    from htm_core.errors import DimensionMismatchError

    htm = htm_factory(embedder=BagOfWords(), retrieval=RetrievalConfig(window_words=None))
    first, second = htm.add_many([LONG, LINES])
    store, dim = htm.store, BagOfWords().dim
    assert store.window_count() == 0
    with pytest.raises(DimensionMismatchError, match=r"store's dimension"):
        store.set_windows([(first.id, first.content_hash, [[1.0] * dim]),
                           (second.id, second.content_hash, [[1.0] * (dim + 1)])])
    assert store.window_count() == 0  # nothing half written
    done = store.set_windows([(first.id, first.content_hash, [[1.0] * dim, [0.0, 2.0] * (dim // 2)]),
                              (second.id, "a stale hash", [[1.0] * dim]),
                              (second.id, second.content_hash, [])])
    assert done == 2 and store.window_count() == 2
    assert store.missing_windows(window_words=20, limit=10) == []  # both done (one marked)
