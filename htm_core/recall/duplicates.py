"""Near-duplicate memories in hybrid recall: one place per group, the newest first.

Among the first ``pool`` fused candidates, memories whose word stems are the same (Jaccard
similarity of their Snowball stems at least ``threshold``; 1.0 by default, so the same stems
in any order, case and punctuation) form a group: the group keeps the place of its best
member, held by its newest member, and the others drop below every candidate outside a
group. Nothing is removed. Identical stem sets are grouped by hashing; a threshold below 1
compares the larger sets pairwise. See docs/recall-quality.md ("Near-duplicate demotion").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..store.base import Brief

__all__ = ["demote_duplicates"]


def _similar(a: frozenset[str], b: frozenset[str], threshold: float) -> bool:
    """Jaccard similarity of ``a`` and ``b`` at least ``threshold`` (it cannot exceed the
    ratio of their sizes, checked first)."""
    small, large = (len(a), len(b)) if len(a) <= len(b) else (len(b), len(a))
    if small < threshold * large or not small:
        return False
    shared = len(a & b)
    return shared >= threshold * (small + large - shared) - 1e-9


def demote_duplicates(order: Sequence[int], scores: Mapping[int, float],
                      known: Mapping[int, Brief], stems_of: Callable[[str], frozenset[str]], *,
                      pool: int, threshold: float) -> tuple[list[int], dict[int, float]]:
    """``order`` (best first) and ``scores`` with the near-duplicates among the first
    ``pool`` demoted: each group's best score goes to its newest member, the others score
    just below the weakest candidate (keeping their order). ``known`` holds the memories
    whose text could be read, ``stems_of`` gives a text's word stems."""
    # Two different sets reach the threshold only if the smaller has at least
    # threshold / (1 - threshold) stems (one stem more: n / (n + 1)); smaller ones only
    # match an identical set, found by hashing.
    least = threshold / (1.0 - threshold) - 1e-9 if threshold < 1.0 else float("inf")
    exact: dict[frozenset[str], int] = {}
    large: list[tuple[int, frozenset[str]]] = []
    groups: dict[int, list[int]] = {}
    for mid in order[:pool]:
        memory = known.get(mid)
        words = stems_of(memory.content) if memory is not None else frozenset()
        if not words:
            continue
        lead = exact.get(words)
        if lead is None and len(words) >= least:
            lead = next((other for other, have in large if _similar(words, have, threshold)),
                        None)
        if lead is None:
            exact[words] = mid
            groups[mid] = [mid]
            if len(words) >= least:
                large.append((mid, words))
        else:
            groups[lead].append(mid)
    if all(len(members) < 2 for members in groups.values()):
        return list(order), dict(scores)
    out = dict(scores)
    floor = min(scores.values(), default=0.0)
    demoted: list[int] = []
    for lead, members in groups.items():
        if len(members) < 2:
            continue
        newest = max(members, key=lambda m: (known[m].created_at, m))
        out[newest] = scores[lead]
        demoted.extend(m for m in members if m != newest)
    # Below every candidate, in their fused order (scores[m] only orders them).
    for i, mid in enumerate(sorted(demoted, key=lambda m: (-scores[m], m))):
        out[mid] = floor - (1 + i) * 1e-9
    ordered = sorted(out, key=lambda m: (-out[m], m))
    return ordered, out
