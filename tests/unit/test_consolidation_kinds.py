"""The kind vocabulary and the no-LLM rules that recognise plain statements."""

from __future__ import annotations

import random

import pytest

from htm_core.consolidation import kinds
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


def _every_rule_fired(sentence: str) -> str | None:
    """The first rule that fires in a sentence, every rule's pattern run (the reference)."""
    if kinds._is_question(sentence):
        return None
    for rule in kinds.RULES:
        if rule.pattern.search(sentence) and not (
                rule.name == "i-can" and kinds._AVAILABILITY.search(sentence)):
            return rule.name
    return None


def _every_rule(text: str) -> list[str]:
    """The rules of each sentence, read without the quick tests for words (the reference)."""
    plain = text.replace("\u2019", "'")
    found = (_every_rule_fired(m.group().strip()) for m in kinds._SENTENCE.finditer(plain))
    return [name for name in found if name is not None]


def test_the_quick_word_test_never_changes_what_the_rules_find() -> None:
    """A rule runs on a sentence only when it holds one of the rule's words (a text only
    when it holds one of any rule's); over statements that fire, their case variants (the
    long s, the Kelvin sign, the Turkish i) and words glued or spaced oddly, the rules
    find the same as without these tests."""
    fragments = ["I prefer tea", "my name is Ada", "remember that the code is 9", "I can swim",
                 "my dog is Rex", "I live in Lisbon", "I know how to sail", "call me Ishmael",
                 "I'd rather walk", "I love jazz", "I speak French", "I work at ACME",
                 "Note: the door sticks", "rememberthat it rains", "Keep in mind: tea",
                 "my favorite is Vim", "I am allergic to nuts", "the weather is nice",
                 "we met at noon", "I\tprefer\ttea", "ok i like it", "my e-mail is a@b.c"]
    variants = [str.upper, str.lower, str.title,
                lambda t: t.replace("s", "\u017f"), lambda t: t.replace("k", "\u212a"),
                lambda t: t.replace("i", "\u0131"), lambda t: t.replace("I", "\u0130")]
    rng = random.Random(7)
    texts = [*fragments] + [v(f) for f in fragments for v in variants]
    texts += [". ".join(rng.sample(texts, 3)) for _ in range(300)]
    fired = 0
    for text in texts:
        expected = _every_rule(text)
        assert RuleKindClassifier().explain(text) == expected, text
        fired += bool(expected)
    assert fired > len(texts) // 2


@pytest.mark.parametrize("kinds", ["facts", ["fact", "Facts"], [3]])
def test_a_bad_kind_filter_does_not_offer_the_default_kind(kinds: object) -> None:
    from htm_core._provenance import check_kinds

    with pytest.raises(ValidationError) as raised:
        check_kinds(kinds)
    assert "leave kinds out for no kind filter" in str(raised.value)
    assert "for 'episodic'" not in str(raised.value)
