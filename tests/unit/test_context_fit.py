"""``working.context.fit``: the last step of ``create_context``, a pure function."""

from __future__ import annotations

from datetime import datetime, timezone

from htm_core.models import Memory
from htm_core.working.context import SEPARATOR, fit

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def words(text: str) -> int:
    return len(text.split())


def memory(n: int, content: str, *, key: str | None = None) -> Memory:
    return Memory(id=n, key=key or f"k{n}", content=content, robot="r",
                  token_count=words(content), created_at=NOW, last_accessed=NOW)


def test_takes_candidates_in_order_while_they_fit() -> None:
    a, b, c = memory(1, "one two three"), memory(2, "four five six seven"), memory(3, "eight")
    chosen, text, tokens = fit([a, b, c], 8, count=words, separator_tokens=0)
    # a (3) + b (4) = 7; c (1) fits too: 8
    assert [m.key for m in chosen] == ["k1", "k2", "k3"]
    assert text == SEPARATOR.join([a.content, b.content, c.content])
    assert tokens == words(text) == 8
    chosen, _, _ = fit([a, b, c], 6, count=words, separator_tokens=0)
    assert [m.key for m in chosen] == ["k1", "k3"]  # b does not fit; a later, smaller one does


def test_each_key_once_and_separators_cost_tokens() -> None:
    a = memory(1, "alpha beta")
    again = memory(1, "alpha beta")
    b = memory(2, "gamma delta")
    chosen, _, _ = fit([a, again, b], 100, count=words, separator_tokens=0)
    assert [m.key for m in chosen] == ["k1", "k2"]
    chosen, _, _ = fit([a, b], 4, count=words, separator_tokens=1)
    assert [m.key for m in chosen] == ["k1"]  # 2 + 1 separator + 2 > 4


def test_drops_from_the_end_when_the_recount_is_over_budget() -> None:
    """Stored counts can undercount the joined text; the recount decides."""
    a, b = memory(1, "x y"), memory(2, "z w")
    def by_chars(text: str) -> int:
        return len(text)
    chosen, text, tokens = fit([a, b], 4, count=by_chars, separator_tokens=0)
    assert [m.key for m in chosen] == ["k1"] and text == "x y" and tokens == 3
    assert fit([], 10, count=by_chars, separator_tokens=0) == ([], "", 0)
