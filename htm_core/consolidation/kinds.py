"""What a memory is: the kind vocabulary, and rules (no LLM) that recognise the plain cases.

A memory is ``episodic`` (something that happened or was said) unless it is known to be a
``fact``, a ``preference``, a ``skill``, a ``document`` (a chunk of an imported file), a
``digest`` (a period's digest) or a ``summary`` (of evicted memories). The rules of
:class:`RuleKindClassifier` recognise the first three from plain first-person statements;
docs/consolidation.md lists them. A question is never classified, and a negation that
empties the statement ("my name is not Bob", "I can't swim") stops the rule.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..validation import check_filter

__all__ = ["DEFAULT_KIND", "KINDS", "KindRule", "RuleKindClassifier", "check_kind",
           "check_kinds"]

#: Every kind a memory can have; ``episodic`` is the default.
KINDS = ("episodic", "fact", "preference", "skill", "document", "digest", "summary")
DEFAULT_KIND = "episodic"


def check_kind(kind: Any) -> str:
    """``kind`` lower-cased, if it is one of :data:`KINDS`; else a ``ValidationError``.

    >>> check_kind(" Fact ")
    'fact'
    """
    folded = kind.strip().lower() if isinstance(kind, str) else ""
    if folded not in KINDS:
        raise ValidationError(
            f"kind must be one of {', '.join(KINDS)}, got {kind!r}; leave it out for "
            f"{DEFAULT_KIND!r}")
    return folded


def _filter_kind(kind: Any) -> str:
    """One kind of a filter, checked; the error names the filter's choices."""
    folded = kind.strip().lower() if isinstance(kind, str) else ""
    if folded not in KINDS:
        raise ValidationError(f"kinds must name kinds among {', '.join(KINDS)}; got "
                              f"{kind!r:.80}; leave kinds out for no kind filter")
    return folded


def check_kinds(kinds: Any) -> tuple[str, ...]:
    """A kind filter: None (every kind), one kind or several, each checked; in the order
    given, without repeats.

    >>> check_kinds(["fact", "Preference", "fact"])
    ('fact', 'preference')
    """
    return check_filter(kinds, _filter_kind, what="kinds", each="a kind",
                        empty_means="no kind filter")

@dataclass(frozen=True)
class KindRule:
    """One named pattern, the kind it recognises and how sure it is (0-1)."""

    name: str
    kind: str
    confidence: float
    pattern: re.Pattern[str]


_I = re.IGNORECASE
_NOT = r"(?!\s*(?:not|n't|never)\b)"
_START = r"(?:^|[,;:]\s*|\b(?:and|but|so|also|btw|well|oh|ok|okay|hi|hello|hey)\s+)"
#: Best first: the first rule that fires in a sentence decides.
RULES = (
    KindRule("remember-that", "fact", 0.9, re.compile(
        r"^(?:please\s+|(?:can|could|would|will) you\s+)?(?:always\s+)?(?:remember|note|"
        r"keep in mind|don'?t forget|do not forget)\s*(?:that\b(?!\s+(?:time|day|night|week|"
        r"trip|one|place|guy|song)\b)|:)", _I)),
    KindRule("my-name", "fact", 0.9, re.compile(
        r"\b(?:(?:my name(?:'s| is)|i(?: am|'m) called)" + _NOT + r"\s+\w|call me\s+(?-i:[A-Z]))",
        _I)),
    KindRule("prefer", "preference", 0.85, re.compile(
        _START + r"i(?:\s+(?:really|much|strongly|generally|usually|always))?\s+"
        r"(?:prefer|would rather|'d rather)\b|\bmy (?:favou?rite|preferred)\b", _I)),
    KindRule("like", "preference", 0.75, re.compile(
        _START + r"i(?:\s+(?:really|truly|absolutely|just))?\s+(?:(?:do not|don'?t|never)\s+)?"
        r"(?:like|love|enjoy|hate|dislike|can'?t stand|detest)\b", _I)),
    KindRule("know-how", "skill", 0.8, re.compile(
        _START + r"i(?: know how to| am able to|'m able to| am good at|'m good at|"
                 r" speak\s+(?-i:[A-Z]))", _I)),
    KindRule("i-can", "skill", 0.55, re.compile(_START + r"i can" + _NOT + r"\s+\w", _I)),
    KindRule("my-x-is", "fact", 0.7, re.compile(
        r"\bmy (?:birthday|email|e-mail|address|phone(?: number)?|job|title|role|employer|"
        r"pronouns|timezone|time zone|partner|wife|husband|daughter|son|dog|cat)"
        r"(?:'s| is| are)" + _NOT + r"\s+\w", _I)),
    KindRule("about-me", "fact", 0.7, re.compile(
        _START + r"i(?: live in| work (?:at|for|as)| was born| grew up in| am allergic|"
                 r"'m allergic)\b", _I)),
)
_QUESTION = re.compile(
    r"\?\s*$|^\W*(?:(?:what|who|where|when|why|how|which)(?:'s|\s+(?:is|are|was|were|do|does|"
    r"did|can|could|should|would|will)\b)|(?:do|does|did|is|are|am|was|can|could|would|will|"
    r"should|have|has)\s+(?:i|you|we|my)\b)", _I)
_POLITE = re.compile(r"^\s*(?:can|could|would|will) you\s+(?:please\s+)?(?:remember|note|keep in mind)"
                     r"\b[^?]*$", _I)
#: "I can" about a time, a plan, an offer or a perception, not an ability ("I can come
#: tomorrow", "I can help", "I can see it").
_AVAILABILITY = re.compile(r"\b(?:today|tonight|tomorrow|later|soon|now|next|this (?:week|"
                           r"weekend|morning|afternoon|evening)|on (?:mon|tue|wed|thu|fri|sat|"
                           r"sun)\w*|at \d|by \d|make it|come|join|do that)\b|\bi can\s+(?:see|"
                           r"hear|feel|tell|imagine|understand|guess|try|help|send|check|ask|"
                           r"give|wait|look|get|go|call|meet|bring|take|show|share|assure)\b",
                           _I)
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]*")
#: The words each rule's pattern holds one of (case folded): a rule whose words a sentence
#: lacks cannot fire in it and is not run, and a text holding none of any rule's costs a
#: couple of microseconds instead of the rules' passes over each sentence. Case folding
#: matches what the rules' IGNORECASE matches, but for the Turkish dotted and dotless i,
#: which are made a plain i first.
_WORDS = {"remember-that": ("remember", "note", "keep in mind", "forget"),
          "my-name": ("name", "call"), "prefer": ("prefer", "rather", "favo"),
          "like": ("like", "love", "enjoy", "hate", "stand", "detest"),
          "know-how": ("know how", "able to", "good at", "speak"), "i-can": ("i can",),
          "my-x-is": ("my",), "about-me": ("live in", "work", "born", "grew up", "allergic")}


def _folded(text: str) -> str:
    """``text`` case folded as the rules' IGNORECASE compares it (see ``_WORDS``)."""
    if "\u0130" in text or "\u0131" in text:
        text = text.replace("\u0130", "i").replace("\u0131", "i")
    return text.casefold()


def _candidates(sentence: str, rules: Sequence[KindRule] = RULES) -> list[KindRule]:
    """Those of ``rules``, best first, whose words ``sentence`` holds. Of a whole text,
    the only rules that can fire in a sentence of it (case folding works character by
    character, so a sentence's folded words are in the folded text)."""
    holds = _folded(sentence).__contains__
    return [rule for rule in rules if any(map(holds, _WORDS[rule.name]))]


def _is_question(sentence: str) -> bool:
    return bool(_QUESTION.search(sentence)) and not _POLITE.search(sentence)


def _fired(sentence: str, rules: Sequence[KindRule] = RULES) -> KindRule | None:
    """The first of ``rules`` that fires in one sentence (none for a question)."""
    candidates = _candidates(sentence, rules)
    if not candidates or _is_question(sentence):
        return None
    for rule in candidates:
        if rule.pattern.search(sentence):
            if rule.name == "i-can" and _AVAILABILITY.search(sentence):
                continue
            return rule
    return None


class RuleKindClassifier:
    """The kind of a text from plain first-person statements, with a confidence.

    Each sentence is read on its own; the surest rule that fires in any sentence decides.
    When none fires the kind is ``episodic`` with confidence :attr:`default_confidence`.

    >>> RuleKindClassifier().classify("Hi! My name is Ada.")
    ('fact', 0.9)
    >>> RuleKindClassifier().classify("What is my name?")
    ('episodic', 0.5)
    """

    name = "kind-rules-v1"

    def __init__(self, default_confidence: float = 0.5) -> None:
        self.default_confidence = default_confidence

    def rules(self, content: str) -> list[KindRule]:
        """The rules that decide each sentence of ``content`` (in order; none for some)."""
        plain = content.replace("\u2019", "'")  # a typographic apostrophe: don’t, I’m
        possible = _candidates(plain)
        if not possible:
            return []
        found = (_fired(match.group().strip(), possible) for match in _SENTENCE.finditer(plain))
        return [rule for rule in found if rule is not None]

    def explain(self, content: str) -> list[str]:
        """The names of the rules that fire for ``content``, sentence by sentence."""
        return [rule.name for rule in self.rules(content)]

    def classify(self, content: str) -> tuple[str, float]:
        """``(kind, confidence)`` of ``content``."""
        fired = self.rules(content)
        if not fired:
            return DEFAULT_KIND, self.default_confidence
        best = max(fired, key=lambda rule: rule.confidence)
        return best.kind, best.confidence
