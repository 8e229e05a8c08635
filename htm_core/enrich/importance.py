"""Importance when the caller gives none: :class:`RuleImportanceScorer`, a transparent rule
set (its rules are in its docstring; ``explain(text)`` lists which fired). The
``ImportanceScorer`` protocol is in :mod:`htm_core.enrich.base`; docs/enrichment.md."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import ImportanceScorer

__all__ = ["ImportanceScorer", "Rule", "RuleImportanceScorer"]


@dataclass(frozen=True)
class Rule:
    """One named pattern and what it adds."""

    name: str
    pattern: re.Pattern[str]
    boost: float


_I = re.IGNORECASE
RULES = (
    Rule("explicit", re.compile(r"\b(remember (that|this|to)|don'?t forget|note:|keep in mind|"
                                r"important:)", _I), 4.0),
    Rule("preference", re.compile(r"\b(i (really )?(prefer|like|love|hate|dislike|want|need)|"
                                  r"i don'?t (like|want)|my favou?rite|always use|never use|"
                                  r"(he|she|they|user) prefers?)\b", _I), 3.0),
    Rule("commitment", re.compile(r"\b(we decided|decided to|decision|i will|i'll|we will|we'll|"
                                  r"promise[ds]?|deadline|due (on|by)|commit(ted)? to|agreed|"
                                  r"must|plan to)\b", _I), 2.5),
    Rule("fact", re.compile(r"(\d|\b[\w.+-]+@[\w-]+\.[\w.]+\b|https?://)"), 1.0),
)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}\b")
_SMALL_TALK = re.compile(r"^\s*(hi|hello|hey|thanks|thank you|ok(ay)?|lol|haha|cool|nice|"
                         r"good (morning|night|evening)|bye|see you|how are you)\b|\bweather\b", _I)


class RuleImportanceScorer:
    """The transparent default scorer.

    :class:`RuleImportanceScorer` starts from 1.0 (the default importance) and applies the
    rules below; ``explain(text)`` lists which fired. The result is clamped to 0–10.

    =========================================  ======
    rule                                       effect
    =========================================  ======
    "remember that", "don't forget", "note:"   +4
    a stated preference ("I prefer", "I like",
    "I hate", "my favourite", "always use")     +3
    a decision or commitment ("we decided",
    "I will", "deadline", "promise", "due")     +2.5
    a name (capitalised word mid-sentence)      +1 (once)
    a number, date, e-mail or URL               +1 (once)
    small talk (greetings, thanks, "ok", "lol",
    weather chat, fewer than 4 words)           set to 0.5 unless another rule fired
    =========================================  ======

    >>> RuleImportanceScorer().score("Remember that I prefer dark mode")
    8.0
    >>> RuleImportanceScorer().score("lol ok")
    0.5
    """

    name = "rules-v1"

    def __init__(self, base: float = 1.0) -> None:
        self.base = base

    def explain(self, content: str) -> list[str]:
        """The names of the rules that fire for ``content``."""
        fired = [rule.name for rule in RULES if rule.pattern.search(content)]
        if _NAME.search(content):
            fired.append("name")
        if not fired and (_SMALL_TALK.search(content) or len(content.split()) < 4):
            fired.append("small-talk")
        return fired

    def score(self, content: str) -> float:
        fired = self.explain(content)
        if fired == ["small-talk"]:
            return 0.5
        boosts = {rule.name: rule.boost for rule in RULES} | {"name": 1.0}
        return max(0.0, min(10.0, self.base + sum(boosts[name] for name in fired)))
