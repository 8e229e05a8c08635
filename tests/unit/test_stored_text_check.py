"""``StoredTextCheck``: the first read of a memory hashes its text, later reads compare the
text with the one kept from the read that passed, within a bound on the characters kept."""

from __future__ import annotations

import pytest

from htm_core.errors import DatabaseCorruptError
from htm_core.store.values import StoredTextCheck, content_hash


def test_a_text_that_does_not_match_its_hash_is_refused_whether_or_not_it_passed_before() -> None:
    check = StoredTextCheck("test database")
    check("k", 1, "good text", content_hash("good text"))
    with pytest.raises(DatabaseCorruptError, match="'k'.*test database.*htm check"):
        check("k", 1, "g00d text", content_hash("good text"))
    with pytest.raises(DatabaseCorruptError):
        check("k", 1, "good text", content_hash("other text"))
    with pytest.raises(DatabaseCorruptError):
        StoredTextCheck("fresh")("k", 1, "g00d text", content_hash("good text"))


def test_a_new_text_under_an_id_that_passed_is_hashed_again() -> None:
    check = StoredTextCheck("test database")
    check("k", 1, "first", content_hash("first"))
    check("k", 1, "second", content_hash("second"))  # an update: a new text and hash
    with pytest.raises(DatabaseCorruptError):
        check("k", 1, "first", content_hash("second"))


def test_the_kept_texts_stay_within_their_bound() -> None:
    check = StoredTextCheck("test database", kept_chars=100)
    texts = {i: f"text number {i:03d} " * 2 for i in range(50)}  # 32 characters each
    for i, text in texts.items():
        check(f"k{i}", i, text, content_hash(text))
    kept = check._passed
    assert sum(len(text) for text, _ in kept.values()) <= 100
    assert set(kept) == {47, 48, 49}  # the newest ones
    long = "x" * 500
    check("long", 99, long, content_hash(long))  # checked, not kept
    assert set(check._passed) == {47, 48, 49}
    with pytest.raises(DatabaseCorruptError):
        check("long", 99, "y" * 500, content_hash(long))
