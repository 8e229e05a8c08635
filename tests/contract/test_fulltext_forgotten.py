"""Full-text search with forgotten memories among the best matches, on every backend.

Forgetting hides a memory from search without changing how the others rank: an unfiltered
search returns the visible memories of the ranking it had before, in the same order, and
the first ``limit`` of them, however many of the best matches were forgotten (a few, so the
SQLite store's unjoined read of the best matches suffices, or most of them, so it must read
further). The forgets are made through a second store object, as another process would.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from htm_core.embeddings import HashingEmbedder
from htm_core.store import NewMemory, SearchFilters, open_store
from htm_core.store.sqlite import search as sqlite_search

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
EMB = HashingEmbedder(dim=32)


def _memories(n: int) -> list[NewMemory]:
    # "apple" and "pear" in (almost) every memory; longer texts rank lower.
    texts = [f"apple {' '.join(['pear'] * (i % 40))} n{i}" for i in range(n)]
    return [NewMemory(key=f"m{i}", content=t, robot="r", importance=1.0, token_count=5 + i,
                      created_at=T0 + timedelta(seconds=i), embedding=EMB.embed_query(t),
                      embedder=EMB.name) for i, t in enumerate(texts)]


@pytest.mark.parametrize("unjoined", [True, False])
@pytest.mark.parametrize("forget", ["three of the best", "most of the best", "every other"])
def test_forgotten_matches_leave_the_visible_ones_in_their_order(
        store_url: str, forget: str, unjoined: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``unjoined``: SQLite reads the matches unjoined from any number of them (else from
    its default number, more than this store has: joined)."""
    if unjoined:
        monkeypatch.setattr(sqlite_search, "_UNJOINED_FROM", 0)
    reader, writer = open_store(store_url), open_store(store_url)
    try:
        reader.add_many(_memories(240))
        everything = SearchFilters()
        before = reader.fulltext_search("apple pear", limit=240, filters=everything)
        assert len(before) == 240
        ranked = [mid for mid, _score in before]
        if forget == "three of the best":
            gone = set(ranked[:5:2])
        elif forget == "most of the best":
            gone = set(ranked[:40])
        else:
            gone = set(ranked[::2])
        keys = {m.id: m.key for m in reader.get_many(ranked)}
        for mid in gone:
            writer.forget(keys[mid], robot="r", at=T0 + timedelta(days=1))
        for limit in (1, 10, 30, 50):
            got = reader.fulltext_search("apple pear", limit=limit, filters=everything)
            assert got == [hit for hit in before if hit[0] not in gone][:limit]
    finally:
        reader.close()
        writer.close()
