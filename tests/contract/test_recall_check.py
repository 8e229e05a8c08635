"""``recall_check``: a robot's working-set version and which hits are hidden, in one read,
on every backend. It must agree with ``working_version`` and with visibility read apart
(``get_many``), also after another store object (another process) forgets, purges or changes membership."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from htm_core.embeddings import HashingEmbedder
from htm_core.store import NewMemory, open_store
from htm_core.store.base import WorkingChange, WorkingState

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
EMB = HashingEmbedder(dim=16)


def _new(i: int) -> NewMemory:
    text = f"memory number {i}"
    return NewMemory(key=f"k{i}", content=text, robot="r", importance=1.0, token_count=3,
                     created_at=T0 + timedelta(seconds=i), embedding=EMB.embed_query(text),
                     embedder=EMB.name)


def test_recall_check_agrees_with_the_two_reads_it_replaces(store_url: str) -> None:
    reader, writer = open_store(store_url), open_store(store_url)
    try:
        ids = [r.memory.id for r in reader.add_many([_new(i) for i in range(6)])]
        asked = [*ids, 10_000]  # an id no memory has
        assert reader.recall_check("r", asked) == (reader.working_version("r"),
                                                   frozenset({10_000}))
        writer.apply_working(WorkingChange(robot="r", at=T0, put=[
            WorkingState(key=f"k{i}", last_accessed=T0, access_count=0, seq=i, access_seq=i)
            for i in range(3)]))
        writer.forget("k1", robot="r", at=T0)
        writer.forget("k4", robot="r", at=T0)
        writer.purge(robot="r", key="k4")
        version, hidden = reader.recall_check("r", asked)
        assert version == writer.working_version("r") and version > 0
        visible = {m.id for m in reader.get_many(asked)}
        assert hidden == {i for i in asked if i not in visible} == {ids[1], ids[4], 10_000}
        assert reader.recall_check("nobody", ids[:1]) == (0, frozenset())
        assert reader.recall_check("r", []) == (version, frozenset())
    finally:
        reader.close()
        writer.close()


def test_a_hit_forgotten_while_the_reranker_runs_is_left_out(htm_factory: Any) -> None:
    """``recall`` reads its hits, reranks them (a reranker may take long), then reads the
    working-set version and the hits' visibility in one read before they enter working
    memory: a hit another object forgets meanwhile is neither returned nor entered."""
    reader, writer = htm_factory(robot="reader"), htm_factory(robot="writer")
    for i in range(5):
        writer.add(f"notes about the garden, part {i}", key=f"g{i}")

    def rerank(query: str, texts: list[str]) -> list[float]:
        writer.forget("g3", confirm=True)
        return [float(len(texts) - i) for i in range(len(texts))]

    hits = reader.recall("garden notes", limit=5, rerank=rerank)
    assert hits and "g3" not in {h.memory.key for h in hits}
    assert "g3" not in reader.working_memory
    assert {h.memory.key for h in reader.recall("garden notes", limit=5)} == \
        {"g0", "g1", "g2", "g4"}
