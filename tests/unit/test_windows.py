"""Long memories embedded in windows: splitting, and a fact deep in a long text."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htm_core import HTM, RetrievalConfig
from htm_core._windows import is_long, split_windows, windows_for
from htm_core.errors import EmbeddingError, ValidationError

#: About eighty words of talk about other things, said around the fact.
FILLER = ("We talked about the garden, the weather and the new bookshelf for a while. "
          "Then the conversation moved on to plans for the summer holidays in Spain. "
          "Someone mentioned that train tickets were cheaper on Tuesdays this year. ")
FACT = "By the way my laptop is a Framework thirteen with eight gigabytes of memory."
LONG = FILLER * 2 + FACT + " " + FILLER
QUERY = "framework gigabytes"
#: Short memories that each share one word with the query: more like it than the whole
#: long text (the fact is one sentence of it), less like it than the fact's window.
DISTRACTORS = ["The framework of the old shed needs some new paint before the winter.",
               "A film on a disc holds several gigabytes of data and some extras too.",
               "The framework agreement was signed by both parties in the autumn of that year."]


class BagOfWords:
    """A deterministic embedder: each word counts once in a hashed dimension."""

    name = "bag-of-words-test"

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim

    def _vector(self, text: str) -> list[float]:
        out = [0.0] * self.dim
        for word in re.findall(r"[a-z]+", text.lower()):
            out[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def test_split_windows_packs_whole_sentences_with_one_sentence_of_overlap():
    text = "One two three. Four five. Six seven eight nine. Ten."
    assert split_windows(text, 6) == ["One two three. Four five.",
                                      "Four five. Six seven eight nine.",
                                      "Six seven eight nine. Ten."]
    # Sentences as long as a window are windows of their own.
    assert split_windows(text, 4) == ["One two three.", "Four five.", "Six seven eight nine.",
                                      "Ten."]
    assert split_windows("short text", 4) == []  # not long: no windows
    assert split_windows("one sentence of exactly seven words here", 5) == []  # one window
    code = "Here is my code. ```x = 1\ny = 2``` Does it run? It fails on Tuesdays only."
    assert "```x = 1\ny = 2```" in split_windows(code, 5)  # a code block is one unit


def test_is_long_counts_spaces_as_the_stores_do():
    assert is_long(LONG, 20) and not is_long(FACT, 20)


def test_a_fact_deep_in_a_long_memory_is_found_by_its_window_not_by_its_whole_vector():
    off = RetrievalConfig(window_words=None)
    with HTM(database_url=":memory:", embedder=BagOfWords()) as htm:
        htm.add(LONG, key="long")
        htm.add_many([{"content": d, "key": f"d{i}"} for i, d in enumerate(DISTRACTORS)])
        assert htm.store.window_count() > 3
        found = [h.memory.key for h in htm.recall(QUERY, strategy="vector", limit=4)]
        assert found[0] == "long"
        with HTM(store=htm.store, embedder=BagOfWords(), retrieval=off) as whole:
            missed = [h.memory.key for h in whole.recall(QUERY, strategy="vector", limit=4)]
        assert missed[-1] == "long"  # by its whole vector it is behind every distractor
        assert [h.memory.key for h in htm.recall(QUERY, limit=1)] == ["long"]  # hybrid too


def test_window_words_none_makes_no_windows_and_bad_values_are_refused():
    with HTM(database_url=":memory:", embedder=BagOfWords(),
             retrieval=RetrievalConfig(window_words=None)) as htm:
        htm.add(LONG)
        htm.flush()
        assert htm.store.window_count() == 0
    for bad in (0, 1, 2.5, True, "20"):
        with pytest.raises(ValidationError, match="window_words"):
            RetrievalConfig(window_words=bad)  # type: ignore[arg-type]


def test_windows_the_embedder_rejects_fall_back_to_the_whole_vector_unless_it_is_down():
    items = [(1, "h1", LONG, {}), (2, "h2", "short", {}), (3, "h3", LONG + " Again.", {})]

    def rejects_one(texts: list[str]) -> list[list[float]]:
        if any("Again" in t for t in texts):
            raise EmbeddingError("rejected")
        return BagOfWords().embed_documents(texts)

    out = windows_for(items, rejects_one, 20, probe=lambda: None)
    assert [(mid, len(vectors) > 1) for mid, _, vectors in out] == [(1, True), (3, False)]

    def down(_texts: list[str]) -> list[list[float]]:
        raise EmbeddingError("down")

    def probe() -> None:
        raise EmbeddingError("still down")

    with pytest.raises(EmbeddingError, match="still down"):
        windows_for(items, down, 20, probe=probe)


def test_an_empty_window_index_finds_nothing() -> None:
    """A store whose windows are all gone (damage, a purge) searches an empty index: no
    window, no hit, and no error from grouping zero windows by memory."""
    import numpy as np

    from htm_core.store.vector_index import VectorIndex
    from htm_core.store.window_index import WindowIndex

    windows = WindowIndex(4)
    query = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    assert windows.best(query, 5, VectorIndex(4), start=None, end=None, robot=None,
                        allowed_ids=None) == []


def _reference_sentences(text: str) -> list[str]:
    """The sentences of ``text`` by the plain definition: code blocks whole, else cut at
    whitespace after ``.``, ``!`` or ``?`` and at newlines (a lookbehind split)."""
    out: list[str] = []
    for part in re.split(r"(```.*?```)", text, flags=re.S):
        if part.startswith("```"):
            out.append(part.strip())
        else:
            out.extend(s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", part) if s.strip())
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", "bb", " ", "  ", ".", "!", "?", "\n", "\n\n", "\t", "```",
                                 "x```y", "\u00a0", "\u2003", "\x85", "\r\n", "?!", "...", "。"]),
                max_size=50), st.sampled_from([1, 2, 3, 5, 20]))
def test_windows_are_made_of_the_sentences_of_the_plain_definition(parts: list[str],
                                                                    words: int) -> None:
    """The quick sentence cut (from each mark, one pass without a code-block split when
    there is no fence) gives the sentences of the plain definition."""
    from htm_core._windows import _sentences, window_plan

    text = "".join(parts)
    assert _sentences(text) == _reference_sentences(text)
    windows, spans = window_plan(text, words)
    assert windows == split_windows(text, words) and len(spans) == len(windows)
