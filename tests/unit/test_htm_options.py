"""``HTM``'s grouped settings (``htm_core.options``): a group does what its keywords do, is
shared by several ``HTM`` objects, and a group given with one of its keywords is refused
before anything is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from htm_core import (
    HTM,
    EmbeddingOptions,
    EnrichmentOptions,
    HashingEmbedder,
    Observability,
    ValidationError,
    WorkingMemoryOptions,
)
from htm_core.enrich import RuleImportanceScorer


def test_groups_do_what_their_keywords_do(tmp_path: Path) -> None:
    db = tmp_path / "grouped.db"
    working = WorkingMemoryOptions(tokens=300, eviction="lru", context_margin=0.2)
    embedding = EmbeddingOptions(embedder=HashingEmbedder(dim=32), batch_size=2)
    with HTM("ada", database_url=db, working=working, embedding=embedding,
             enrichment=EnrichmentOptions(importance_scorer=RuleImportanceScorer()),
             observability=Observability()) as grouped, \
            HTM("bob", database_url=db, working_memory_tokens=300, eviction="lru",
                context_margin=0.2, embedder=HashingEmbedder(dim=32), embed_batch_size=2,
                importance_scorer=RuleImportanceScorer()) as keywords:
        for htm in (grouped, keywords):
            memory = htm.add("Remember that my passport expires in March")
            assert memory.importance > 1.0  # the rule scorer ran
            assert htm.working_memory.max_tokens == 300
            assert htm.settings.eviction == "lru" and htm.settings.context_margin == 0.2
            assert htm.stats().extra["embed_batch_size"] == 2
        assert {r.name: r.working_memory_tokens for r in grouped.robots()} == {"ada": 300,
                                                                                 "bob": 300}


def test_one_group_serves_several_htm_objects(tmp_path: Path) -> None:
    embedding = EmbeddingOptions(embedder=HashingEmbedder(dim=16))
    with HTM("a", database_url=tmp_path / "s.db", embedding=embedding) as a, \
            HTM("b", database_url=tmp_path / "s.db", embedding=embedding) as b:
        a.add("shared vectors", key="k")
        assert [h.memory.key for h in b.recall("shared vectors", limit=1)] == ["k"]


@pytest.mark.parametrize(("group", "keyword"), [
    ({"working": WorkingMemoryOptions(tokens=100)}, {"eviction": "lru"}),
    ({"embedding": EmbeddingOptions()}, {"embed_batch_size": 8}),
    ({"embedding": EmbeddingOptions()}, {"background_embeddings": False}),
    ({"enrichment": EnrichmentOptions()}, {"tagger": object()}),
    ({"observability": Observability()}, {"telemetry": True}),
])
def test_a_group_and_one_of_its_keywords_are_refused(tmp_path: Path, group: dict,
                                                      keyword: dict) -> None:
    db = tmp_path / "never.db"
    [name] = keyword
    with pytest.raises(ValidationError, match=f"give {name} either as keywords or inside"):
        HTM("r", database_url=db, **group, **keyword)
    assert not db.exists()


def test_a_group_of_the_wrong_kind_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"embedding must be EmbeddingOptions\(\.\.\.\), got dict"):
        HTM("r", database_url=tmp_path / "x.db", embedding={"batch_size": 2})  # type: ignore[arg-type]
