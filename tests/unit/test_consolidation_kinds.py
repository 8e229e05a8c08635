"""The kind vocabulary and the no-LLM rules that recognise plain statements."""

from __future__ import annotations

import pytest

from htm_core.consolidation.kinds import DEFAULT_KIND, KINDS, RuleKindClassifier, check_kind
from htm_core.errors import ValidationError

CLASSIFY = RuleKindClassifier().classify


@pytest.mark.parametrize(("text", "kind"), [
    ("My name is Ada Lovelace.", "fact"),
    ("Hi! my name's Kenji", "fact"),
    ("Call me Ishmael.", "fact"),
    ("Remember that the door code is 4521", "fact"),
    ("Please remember that I'm vegan.", "fact"),
    ("Don't forget that Bob's flight lands at 9", "fact"),
    ("I live in Lisbon", "fact"),
    ("My birthday is on 3 May", "fact"),
    ("I prefer tea over coffee", "preference"),
    ("I really prefer dark mode", "preference"),
    ("My favourite editor is Vim", "preference"),
    ("Ok, I love Rust", "preference"),
    ("I hate meetings before 10", "preference"),
    ("I don't like cilantro", "preference"),  # a preference all the same
    ("I know how to juggle", "skill"),
    ("I can speak French", "skill"),
    ("I'm good at chess", "skill"),
    ("I speak Portuguese and Tamil", "skill"),
    ("I'm allergic to peanuts", "fact"),
    ("please call me Zoë", "fact"),
    ("I don\u2019t like cilantro", "preference"),  # typographic apostrophes
    ("my name\u2019s Ada", "fact"),
    ("I\u2019m good at chess", "skill"),
])
def test_plain_statements(text: str, kind: str) -> None:
    assert CLASSIFY(text)[0] == kind


@pytest.mark.parametrize("text", [
    "What is my name?", "what is my name", "What's my name", "Do I prefer tea?",
    "Can I speak French?", "Do you remember that trip?",  # questions
    "My name is not Bob", "my name isn't Bob", "I can't swim", "I cannot swim",
    "I don't know how to juggle", "I can not come",  # negations that empty the statement
    "my name isn\u2019t Bob", "I can\u2019t swim", "I don\u2019t know how to juggle",
    "I remember that day in Paris", "When I was young I lived in Paris",  # recollection
    "I can come tomorrow", "I can do that on Friday",  # availability, not ability
    "I can see the problem", "I can help with the slides",  # perception, an offer
    "Remember that time we missed the train",  # reminiscing
    "Priya prefers tea", "She said her name is Ada",  # not the speaker
    "I'd like a coffee", "I would like to book a table",  # requests
    "Call me when you land", "I speak to my manager on Mondays",  # not a name, not a language
    "我叫艾达", "", "   ", "🎉", "the weather is nice",
])
def test_not_classified(text: str) -> None:
    assert CLASSIFY(text) == (DEFAULT_KIND, 0.5)
    assert RuleKindClassifier().explain(text) == []


def test_the_surest_sentence_decides_and_explain_lists_each() -> None:
    classifier = RuleKindClassifier(default_confidence=0.2)
    text = "What's your name? I like jazz. My name is Ada."
    assert classifier.classify(text) == ("fact", 0.9)
    assert classifier.explain(text) == ["like", "my-name"]
    assert classifier.classify("lol") == ("episodic", 0.2)
    assert 0 < CLASSIFY("I can juggle")[1] < CLASSIFY("I know how to juggle")[1] < 1


def test_kind_vocabulary() -> None:
    assert KINDS[0] == DEFAULT_KIND == "episodic"
    assert {check_kind(k) for k in KINDS} == set(KINDS)
    assert check_kind(" DIGEST ") == "digest"
    for bad in ("facts", "", None, 3, "episodic\x00", "ﬁct"):
        with pytest.raises(ValidationError, match="kind must be one of episodic, fact"):
            check_kind(bad)
