"""Near-duplicate memories in hybrid recall: one place per group, the newest first.

A long conversation says the same thing many times: "Work has been crazy lately." in a
dozen sessions, "How is your family doing?" in twenty. When one of them matches a
question, all of them do, equally, and together they fill the top of the list while the
memory that answers sits just below. Memories whose words are nearly the same (the
Jaccard similarity of their word stems is at least ``threshold``) form a group among the
first ``pool`` fused candidates: the group keeps the place of its best member, which goes
to its **newest** member (when a value was restated, the current statement comes first),
and the other members drop below every candidate outside a group, in their fused order.

Nothing is removed: a duplicate only loses its place to memories that say something else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .store.base import Brief

__all__ = ["demote_duplicates"]


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


def demote_duplicates(order: Sequence[int], scores: Mapping[int, float],
                      known: Mapping[int, Brief], stems_of: Callable[[str], frozenset[str]], *,
                      pool: int, threshold: float) -> tuple[list[int], dict[int, float]]:
    """``order`` (best first) and ``scores`` with the near-duplicates among the first
    ``pool`` demoted: each group's best score goes to its newest member, the others score
    just below the weakest candidate (keeping their order). ``known`` holds the memories
    whose text could be read, ``stems_of`` gives a text's word stems."""
    out = dict(scores)
    stems = {mid: stems_of(known[mid].content) for mid in order[:pool] if mid in known}
    head = [mid for mid in order[:pool] if stems.get(mid)]
    leaders: list[int] = []
    groups: dict[int, list[int]] = {}
    for mid in head:
        for lead in leaders:
            if _jaccard(stems[mid], stems[lead]) >= threshold:
                groups[lead].append(mid)
                break
        else:
            leaders.append(mid)
            groups[mid] = [mid]
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
