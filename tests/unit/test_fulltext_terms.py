"""The query side of the full-text rules (htm_core/store/_text.py), without a database."""

from __future__ import annotations

import pytest

from htm_core.recall import coverage
from htm_core.text import (
    MAX_TERMS,
    STOPWORDS,
    fold,
    merge_hits,
    parse_query,
)

# PostgreSQL's english.stop (PostgreSQL 16): a word its index drops must never be a term.
PG_ENGLISH_STOP = """i me my myself we our ours ourselves you your yours yourself yourselves he
him his himself she her hers herself it its itself they them their theirs themselves what
which who whom this that these those am is are was were be been being have has had having
do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on
off over under again further then once here there when where why how all any both each
few more most other some such no nor not only own same so than too very s t can will just
don should now""".split()


@pytest.mark.parametrize(("query", "words", "runs"), [
    ("Kenji don't", ("kenji",), ()),
    ("the what is it", (), ()),
    ("🎉 ?! ...", (), ()),
    ("Ana's café", ("ana", "cafe"), ()),
    ("v2.1 e-mail snake_case", ("v2 1", "e mail", "snake case"), ()),
    ("state-of-the-art", ("state of the art",), ()),
    ("https://example.com/a", ("https example com",), ()),
    ("ПРИВЕТ мир", ("привет", "мир"), ()),
    ("喝绿茶 and 茶", (), ("喝绿茶", "茶")),
    ("v2绿茶tea", ("v2", "tea"), ("绿茶",)),
    ("\"NEAR\" AND( * -x", ("near", "x"), ()),
])
def test_queries_become_words_phrases_and_runs(query, words, runs):
    parsed = parse_query(query)
    assert (parsed.words, parsed.runs) == (words, runs)
    assert bool(parsed) == bool(words or runs)


def test_every_postgres_stop_word_is_a_stop_word():
    assert set(PG_ENGLISH_STOP) <= STOPWORDS


def test_folding_removes_latin_diacritics_only():
    assert fold("CAFÉ Ærø naïve") == "cafe ærø naive"
    assert fold("Йод ά") == "йод ά"
    assert fold("cafe\u0301") == "cafe"  # decomposed input too


def test_mixed_queries_rank_cjk_holders_above_word_relevance():
    assert merge_hits([(1, 50.0), (2, 0.1)], [(3, 1.2)], 10)[0][0] == 3
    assert merge_hits([(1, 1.0)], [], 10) == [(1, 1.0)]
    assert merge_hits([], [(3, 1.2)], 10) == [(3, 1.2)]


def test_coverage_folds_and_counts_cjk_runs_as_substrings():
    assert coverage(["cafe", "station"], "The CAFÉ near the Station") == 1.0
    assert coverage(["绿茶", "红茶"], "我喜欢喝绿茶") == 0.5


def test_a_long_query_searches_its_first_terms_only():
    parsed = parse_query(" ".join(f"word{i}" for i in range(1000)) + " 绿茶")
    assert parsed.words == tuple(f"word{i}" for i in range(MAX_TERMS)) and parsed.runs == ()
