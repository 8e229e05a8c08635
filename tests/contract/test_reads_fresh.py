"""What a recall reads always reflects the last commit, whoever made it.

The SQLite store skips reads while nothing was committed since it last made them (SQLite's
``data_version`` on its read connection): the vector index's and the window index's
catch-up, the full-text rule's word counts, the working-set version and the hits'
visibility. Another store object on the same file (as another process would) forgetting,
restoring, updating, purging or adding must be seen by the very next call; each step
below fails if a skip ignored such a commit. Both backends.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from htm_core.embeddings import HashingEmbedder
from htm_core.store import ArmQuery, NewMemory, SearchFilters, open_store
from htm_core.store.base import WorkingChange, WorkingState

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
EMB = HashingEmbedder(dim=16)
EVERYTHING = SearchFilters()


def _new(key: str, text: str, i: int = 0) -> NewMemory:
    return NewMemory(key=key, content=text, robot="r", importance=1.0, token_count=5,
                     created_at=T0 + timedelta(seconds=i), embedding=EMB.embed_query(text),
                     embedder=EMB.name)


def _ids(hits: list[tuple[int, float]]) -> list[int]:
    return [mid for mid, _ in hits]


def test_vector_search_follows_every_commit_of_another_store_object(store_url: str) -> None:
    reader, writer = open_store(store_url), open_store(store_url)
    try:
        writer.add_many([_new(f"k{i}", f"turn {i} about the garden", i) for i in range(5)])
        probe = "the lighthouse keeper polished the lens"
        query = EMB.embed_query(probe)

        def best() -> tuple[int, float] | None:
            (hits,) = reader.search_arms([ArmQuery(vector=query, limit=3, filters=EVERYTHING)])
            return hits[0] if hits else None

        def top() -> int | None:
            found = best()
            return found[0] if found else None

        before = top()
        assert top() == before  # a second search reads nothing new: still the same
        (added,) = writer.add_many([_new("probe", probe, 10)])
        mid = added.memory.id
        assert top() == mid  # another object's add
        writer.forget("probe", robot="r", at=T0)
        assert top() != mid  # its forget
        writer.restore("probe", robot="r")
        assert top() == mid  # its restore
        writer.update_memory(_new("probe", "turn 9 about the garden", 10), robot="r", at=T0)
        found = best()
        assert found is not None and found[1] < 0.99  # an update of its vector
        writer.update_memory(_new("probe", probe, 10), robot="r", at=T0)
        found = best()
        assert found is not None and found[1] > 0.99  # and back
        writer.forget("probe", robot="r", at=T0)
        reader.vector_search(query, limit=3, filters=EVERYTHING)
        writer.restore("probe", robot="r")
        writer.forget("probe", robot="r", at=T0)
        assert writer.purge(robot="r", key="probe") >= 1
        assert top() != mid  # its purge
        reader.add_many([_new("own", probe, 11)])
        assert top() != mid and top() is not None  # the reader's own write too
    finally:
        reader.close()
        writer.close()


def test_fulltext_word_counts_follow_another_store_objects_adds(store_url: str) -> None:
    """The rare-word rule counts each query word's memories; with 200 or more memories a
    word in more than a tenth of them stops selecting candidates. Counts kept from before
    another object's adds would still let "alpha" alone select."""
    reader, writer = open_store(store_url), open_store(store_url)
    try:
        writer.add_many([_new(f"f{i}", f"filler note number {i}", i) for i in range(200)]
                        + [_new(f"b{i}", f"beta sample {i}", 300 + i) for i in range(3)])

        def found() -> set[str]:
            hits = reader.fulltext_search("alpha beta", limit=50, filters=EVERYTHING)
            return {m.content.split()[0] for m in reader.get_many(_ids(hits))}

        assert found() == {"beta"}
        writer.add_many([_new("a0", "alpha only", 400)])
        assert found() == {"alpha", "beta"}  # alpha is rare: it selects
        writer.add_many([_new(f"a{i}", f"alpha again {i}", 400 + i) for i in range(1, 60)])
        assert found() == {"beta"}  # alpha is common now: only beta selects
    finally:
        reader.close()
        writer.close()


def _put(key: str) -> WorkingState:
    return WorkingState(key=key, last_accessed=T0, access_count=1, seq=1, access_seq=1)


def test_recall_check_follows_every_commit_of_another_store_object(store_url: str) -> None:
    reader, writer = open_store(store_url), open_store(store_url)
    try:
        ids = [r.memory.id for r in writer.add_many([_new(f"k{i}", f"turn {i}", i)
                                                      for i in range(4)])]
        assert {m.id for m in reader.get_many(ids)} == set(ids)
        version, hidden = reader.recall_check("r", ids)
        assert hidden == frozenset() and reader.working_version("r") == version
        assert reader.recall_check("r", ids) == (version, frozenset())
        writer.forget("k1", robot="r", at=T0)
        assert reader.recall_check("r", ids)[1] == {ids[1]}  # another object's forget
        writer.restore("k1", robot="r")
        assert reader.recall_check("r", ids)[1] == frozenset()  # its restore
        writer.forget("k2", robot="r", at=T0)
        assert reader.recall_check("r", ids)[1] == {ids[2]}
        writer.restore("k2", robot="r")
        assert reader.recall_check("r", ids)[1] == frozenset()
        writer.forget("k2", robot="r", at=T0)
        assert writer.purge(robot="r", key="k2") >= 1
        assert reader.recall_check("r", ids)[1] == {ids[2]}  # its purge
        result = writer.apply_working(WorkingChange(robot="r", at=T0, put=[_put("k0")]))
        assert result.version != version
        assert reader.working_version("r") == result.version  # its working-memory write
        assert reader.recall_check("r", [ids[0]]) == (result.version, frozenset())
    finally:
        reader.close()
        writer.close()


def test_window_search_follows_another_store_objects_windows(store_url: str) -> None:
    reader, writer = open_store(store_url), open_store(store_url)
    try:
        if not hasattr(writer, "set_windows"):
            return
        text = " ".join(f"word{i}" for i in range(80))
        (added,) = writer.add_many([_new("long", text)])
        mid = added.memory.id
        probe = EMB.embed_query("a window only this memory has")

        def score() -> float:
            hits: Any = reader.vector_search(probe, limit=1, filters=EVERYTHING)
            return float(hits[0][1]) if hits else -2.0

        plain = score()
        assert score() == plain
        assert writer.set_windows([(mid, added.memory.content_hash, [probe])]) == 1
        assert score() > plain + 1e-6 and abs(score() - 1.0) < 1e-5  # another object's windows
        writer.update_memory(_new("long", text + " more"), robot="r", at=T0)
        assert score() < 1.0 - 1e-5  # an update drops the old windows
    finally:
        reader.close()
        writer.close()


def test_recall_follows_another_htm_objects_writes(htm_factory: Any) -> None:
    """Two HTM objects on one database: each recall of one sees the other's last write."""
    one, two = htm_factory(robot="one"), htm_factory(robot="two")
    two.add_many([{"content": f"note {i} about the harbour", "key": f"n{i}"}
                  for i in range(8)])

    def keys(query: str) -> list[str]:
        return [h.memory.key for h in one.recall(query, limit=3)]

    assert "n3" in keys("note 3 about the harbour")
    two.forget("n3", confirm=True)
    assert "n3" not in keys("note 3 about the harbour")
    two.restore("n3")
    assert "n3" in keys("note 3 about the harbour")
    two.update("n3", "the lighthouse keeper polished the lens")
    (hit,) = one.recall("lighthouse keeper lens", limit=1)
    assert hit.memory.key == "n3" and "lighthouse" in hit.memory.content
    two.add("a zebra crossed the quay", key="z")
    assert keys("zebra quay")[0] == "z"
    two.forget("z", confirm=True)
    two.purge(key="z", confirm=True)
    assert "z" not in keys("zebra quay")
