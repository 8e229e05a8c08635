"""The allow-list rule the shape tests share: a size over its budget must be on the list,
and an entry may only shrink (one that fits the budget, or is gone, must leave it)."""

from __future__ import annotations


def over(sizes: dict[str, int], budget: int, allowed: dict[str, int], *,
         advice: str = "") -> dict[str, str]:
    """What breaks the rule, by name (empty when nothing does); ``advice`` is added to
    what is over its allowance."""
    problems: dict[str, str] = {}
    for name, size in sizes.items():
        if size > allowed.get(name, budget):
            problems[name] = f"{size} (allowed {allowed.get(name, budget)})" + (
                f": {advice}" if advice else "")
    for name, size in allowed.items():
        now = sizes.get(name)
        if now is None or now <= budget:
            problems[name] = "fits the budget now (or is gone): remove it from the allow-list"
        elif now < size:
            problems[name] = f"shrank to {now}: lower its allow-list entry"
    return problems
