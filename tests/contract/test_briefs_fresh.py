"""``briefs`` (what hybrid recall reads of its candidates) always reflect the last commit,
whoever made it: another store object (another process) forgetting, restoring, updating or
adding a memory is seen by the next call, also for ids asked before they existed. The
SQLite store answers repeated calls from what it read while nothing was committed in
between; this pins that it notices every commit. Both backends."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from htm_core.embeddings import HashingEmbedder
from htm_core.store import NewMemory, SearchFilters, open_store

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
EMB = HashingEmbedder(dim=16)
EVERYTHING = SearchFilters()


def _new(i: int, text: str | None = None) -> NewMemory:
    text = text or f"turn {i} of the conversation"
    return NewMemory(key=f"k{i}", content=text, robot="r", importance=1.0, token_count=5,
                     created_at=T0 + timedelta(seconds=i), embedding=EMB.embed_query(text),
                     embedder=EMB.name)


def test_briefs_follow_every_commit_of_another_store_object(store_url: str) -> None:
    reader, writer = open_store(store_url), open_store(store_url)
    try:
        ids = [r.memory.id for r in writer.add_many([_new(i) for i in range(6)])]
        later = max(ids) + 1  # asked before it exists, as a neighbor of the newest
        asked = [*ids, later]

        def contents() -> dict[int, str]:
            return {mid: b.content for mid, b in reader.briefs(asked, EVERYTHING).items()}

        assert contents() == {mid: f"turn {i} of the conversation" for i, mid in enumerate(ids)}
        writer.forget("k2", robot="r", at=T0)
        assert ids[2] not in contents()
        writer.restore("k2", robot="r")
        assert ids[2] in contents()
        writer.update_memory(_new(3, "turn 3, said again differently"), robot="r", at=T0)
        assert contents()[ids[3]] == "turn 3, said again differently"
        assert later not in contents()
        (added,) = writer.add_many([_new(6)])
        assert added.memory.id == later and contents()[later] == "turn 6 of the conversation"
        reader.forget("k0", robot="r", at=T0)  # the reader's own write, too
        assert ids[0] not in contents()
    finally:
        reader.close()
        writer.close()
