"""The extractive digest with the real token counter, on colliding and Unicode inputs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htm_core.consolidation.base import SourceItem, source_items
from htm_core.consolidation.extractive import ExtractiveSummariser, split_sentences
from htm_core.errors import (
    InvalidBudgetError,
    InvalidContentError,
    InvalidTimeError,
    ValidationError,
)
from htm_core.tokens import TiktokenCounter

COUNTER = TiktokenCounter()
SUMMARISER = ExtractiveSummariser(COUNTER)

DAY = [
    "Standup at 9. Ada moved the launch of Atlas to May 3 because QA found bug #4521.",
    "ok",
    "Ada moved the launch of Atlas to May 3 because QA found bug #4521.",
    "ADA MOVED THE LAUNCH OF ATLAS TO MAY 3 BECAUSE QA FOUND BUG #4521!",
    "Lunch was pasta. The weather was grey.",
    "Kenji will review the Atlas release notes on Friday.",
    "   \n\t ",
    "",
    "我喜欢喝绿茶。他不喜欢喝咖啡。",
    "Priya can't stand cilantro.",
    "Priya can stand on her hands.",
    "Café Zoë serves crêpes; Zoe's café is closed on Mondays.",
    "🎉🎉🎉",
]


@pytest.mark.parametrize("target", [1, 3, 8, 15, 25, 40, 80, 400])
def test_never_over_the_target(target: int) -> None:
    digest = SUMMARISER.summarise(DAY, target)
    assert digest.tokens == COUNTER.count(digest.text) <= target
    assert digest.strategy == "extractive"
    sentences = {s for text in DAY for s in split_sentences(text)}
    for part in split_sentences(digest.text):  # every sentence comes from a source, cut at most
        assert any(s.startswith(part.rstrip("…")) for s in sentences)


def test_repeats_are_dropped_and_their_items_are_sources() -> None:
    digest = SUMMARISER.summarise(DAY, 40)
    assert digest.text.lower().count("moved the launch") == 1
    texts = [item.text for item in digest.sources]
    assert DAY[2] in texts and DAY[3] in texts  # their words are in the digest
    assert "Lunch" not in digest.text  # the least central goes first


def test_negation_and_diacritics_are_not_duplicates_but_case_is() -> None:
    items = ["Priya can't stand cilantro.", "Priya can stand cilantro.",
             "Zoë likes crêpes.", "zoe likes crepes", "ZOË LIKES CRÊPES!"]
    digest = SUMMARISER.summarise(items, 200)
    assert digest.text.splitlines() == ["Priya can't stand cilantro.",
                                        "Priya can stand cilantro.", "Zoë likes crêpes."]
    assert [i.text for i in digest.sources] == items


def test_names_and_numbers_are_kept_first() -> None:
    items = ["we talked about things and stuff for a while",
             "things and stuff came up again and again",
             "Invoice 7731 for Marta is due on 2026-12-01."]
    digest = SUMMARISER.summarise(items, 20)
    assert digest.text == items[2]


def test_output_in_source_order_by_created_at() -> None:
    t0 = datetime(2026, 11, 28, 9, tzinfo=timezone.utc)
    items = [SourceItem(text="Kenji merged the parser fix.", key="b", created_at=t0 + timedelta(hours=2)),
             {"content": "Ada opened issue 12 about the parser.", "key": "a", "created_at": t0},
             {"text": "Bob released parser 1.4 with the fix.", "key": "c",
              "created_at": datetime(2026, 11, 28, 12)}]  # naive: read as UTC
    digest = SUMMARISER.summarise(items, 200)
    assert digest.source_keys == ["a", "b", "c"]
    assert digest.text.splitlines() == ["Ada opened issue 12 about the parser.",
                                        "Kenji merged the parser fix.",
                                        "Bob released parser 1.4 with the fix."]


def test_cjk_without_spaces() -> None:
    items = ["我喜欢喝绿茶。我喜欢喝绿茶！我们明天去东京开会。", "東京の会議は明日です。",
             "회의는 내일 서울에서 합니다."]
    digest = SUMMARISER.summarise(items, 30)
    assert digest.tokens <= 30 and digest.text
    assert digest.text.count("我喜欢喝绿茶") <= 1
    assert split_sentences(items[0]) == ["我喜欢喝绿茶。", "我喜欢喝绿茶！", "我们明天去东京开会。"]


def test_one_sentence_longer_than_the_target_is_cut_at_a_word() -> None:
    long = "Ada " + " ".join(f"reviewed module{n}" for n in range(200)) + "."
    digest = SUMMARISER.summarise([long], 12)
    assert 0 < digest.tokens <= 12 and digest.text.endswith("…")
    assert long.startswith(digest.text[:-1]) and long[len(digest.text) - 1] == " "
    cjk = "会" * 500
    digest = SUMMARISER.summarise([cjk], 5)
    assert 0 < digest.tokens <= 5 and digest.sources[0].text == cjk


def test_nothing_to_say() -> None:
    for items in ([], [""], ["   ", "\n\t"], ["🎉", "…!?"]):
        digest = SUMMARISER.summarise(items, 50)
        assert (digest.text, digest.sources, digest.tokens) == ("", (), 0)


def test_embeddings_steer_centrality() -> None:
    """With vectors, the item nearest the others' centroid wins a one-sentence target."""
    texts = ["Ada likes the red bicycle.", "Bob likes the blue car.", "Carl likes the green boat."]
    vectors = [(1.0, 0.0, 0.0), (0.7, 0.7, 0.0), (0.0, 1.0, 0.0)]
    items = [SourceItem(text=t, id=n, embedding=v) for n, (t, v) in enumerate(zip(texts, vectors,
                                                                                strict=True))]
    assert SUMMARISER.summarise(items, 8).source_ids == [1]
    blank = SourceItem(text=" ", id=3)  # a blank item needs no vector
    assert SUMMARISER.summarise([*items, blank], 8).source_ids == [1]
    vectors[0], vectors[1] = vectors[1], vectors[0]
    items = [SourceItem(text=t, id=n, embedding=v) for n, (t, v) in enumerate(zip(texts, vectors,
                                                                                strict=True))]
    assert SUMMARISER.summarise(items, 8).source_ids == [0]
    items[2] = SourceItem(text=texts[2], id=2)  # one item without a vector: words alone
    assert SUMMARISER.summarise(items, 8).source_ids == [0]  # the first of equals


def test_bad_input_says_what_to_do() -> None:
    with pytest.raises(InvalidBudgetError, match="target_tokens must be a positive integer"):
        SUMMARISER.summarise(["a"], 0)
    with pytest.raises(InvalidBudgetError):
        SUMMARISER.summarise(["a"], True)
    with pytest.raises(InvalidContentError, match="not one string"):
        SUMMARISER.summarise("Ada said hi", 10)
    with pytest.raises(InvalidContentError, match="a dict with 'text'"):
        SUMMARISER.summarise([42], 10)
    with pytest.raises(InvalidTimeError):
        source_items([{"text": "a", "created_at": "yesterday"}])
    with pytest.raises(ValidationError, match="different dimensions"):
        SUMMARISER.summarise([SourceItem(text="a b", embedding=(1.0,)),
                              SourceItem(text="c d", embedding=(1.0, 2.0))], 10)
    with pytest.raises(ValidationError, match="finite numbers"):
        source_items([{"text": "a", "embedding": [float("nan")]}])


def test_stop_words_that_change_the_meaning_keep_sentences_apart() -> None:
    items = ["Deploy before the freeze.", "Deploy after the freeze.",
             "The report is due on Friday 5.", "the report is due Friday 5"]
    digest = SUMMARISER.summarise(items, 200)
    assert digest.text.splitlines() == ["Deploy before the freeze.", "Deploy after the freeze.",
                                        "The report is due on Friday 5."]
    assert len(digest.sources) == 4  # the last one's words are in the third line


@pytest.mark.parametrize("text", ["Ada \ud800 said hi.", "x\x00y z"])
def test_text_no_memory_could_hold_is_refused(text: str) -> None:
    with pytest.raises(InvalidContentError, match=r"NUL|surrogate"):
        SUMMARISER.summarise(["Fine text.", {"text": text}], 20)
    with pytest.raises(InvalidContentError, match="must be a string"):
        source_items([SourceItem(text=None)])  # type: ignore[arg-type]


_PIECES = ["Ada", "ada", "ÁDA", "Zoë", "zoe", "v2.1", "#4521", "can't", "can", "not", "the",
           "会議", "我喜欢喝绿茶", "회의", "🎉", "…", ".", "!", "?", "。", "\n", " ", "\t", "café",
           "cafe", "A" * 40, "9" * 30]


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(st.lists(st.sampled_from(_PIECES), max_size=30).map(" ".join),
                      max_size=12),
       target=st.integers(min_value=1, max_value=120))
def test_any_mix_stays_within_the_target_and_names_true_sources(items: list[str],
                                                                target: int) -> None:
    digest = SUMMARISER.summarise(items, target)
    assert digest.tokens == COUNTER.count(digest.text) <= target
    given = [SourceItem(text=t) for t in items]  # distinct objects, to find them by identity
    digest = SUMMARISER.summarise(given, target)
    positions = [next(n for n, g in enumerate(given) if g is s) for s in digest.sources]
    assert positions == sorted(set(positions))  # each source once, in source order
    sentences = {s for text in items for s in split_sentences(text)}
    for part in split_sentences(digest.text):  # each sentence written is a source's (or its start)
        assert any(s.startswith(part.rstrip("…")) for s in sentences)
    assert bool(digest.text) == bool(digest.sources)


def test_lines_without_a_full_stop_stay_lines_and_cjk_sentences_join_without_a_space() -> None:
    notes = "Standup notes\nAda: ship Atlas on Friday\nBob: ok, 2 reviewers"
    digest = SUMMARISER.summarise([notes, "我喜欢喝绿茶。他不喜欢喝咖啡。"], 200)
    assert digest.text == ("Standup notes\nAda: ship Atlas on Friday\nBob: ok, 2 reviewers\n"
                           "我喜欢喝绿茶。他不喜欢喝咖啡。")


def test_memories_are_items_with_their_ids_keys_and_times() -> None:
    from htm_core import HTM, HashingEmbedder

    with HTM(robot="digest", database_url=":memory:", embedder=HashingEmbedder()) as htm:
        late = htm.add("Kenji shipped Atlas 2.0 to production.", key="m-late",
                       created_at=datetime(2026, 11, 28, 18, tzinfo=timezone.utc))
        early = htm.add("Ada planned the Atlas 2.0 release.", key="m-early",
                        created_at=datetime(2026, 11, 28, 9, tzinfo=timezone.utc))
        memories = [htm.get(late.key), htm.get(early.key)]
    items = source_items(memories)
    assert [i.key for i in items] == ["m-early", "m-late"]
    assert all(isinstance(i.id, int) for i in items)
    digest = SUMMARISER.summarise(memories, 100)
    assert digest.text.splitlines() == ["Ada planned the Atlas 2.0 release.",
                                        "Kenji shipped Atlas 2.0 to production."]
    assert digest.source_ids == [early.id, late.id]
