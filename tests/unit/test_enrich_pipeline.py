"""The Enrichment seam next to a real HTM on a SQLite file: add never waits for the model,
jobs queue in the store's database file, results come back through the callbacks."""

from __future__ import annotations

import time
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from htm_core import HTM, FrozenClock, HashingEmbedder
from htm_core.enrich import (
    Enrichment,
    InMemoryJobQueue,
    LLMImportanceScorer,
    LLMTagger,
    LLMUsage,
    SQLJobQueue,
    Summariser,
)
from htm_core.errors import ValidationError


def test_add_returns_before_the_model_and_results_arrive_by_callback(
        sqlite_url: str, clock: FrozenClock) -> None:
    htm = HTM(database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock)
    usage = LLMUsage()
    slow = 0.3  # seconds per model call
    tagger = LLMTagger(FakeListChatModel(responses=['["ops:deploy"]'], sleep=slow), usage=usage)
    scorer = LLMImportanceScorer(FakeListChatModel(responses=["8"], sleep=slow), usage=usage)
    summariser = Summariser(FakeListChatModel(responses=["They deployed, then had lunch."], sleep=slow),
                            usage=usage)
    results: dict[str, Any] = {}
    enrichment = Enrichment(
        SQLJobQueue.from_url(f"sqlite:///{sqlite_url}"), tagger=tagger,
        on_tags=lambda key, tags: results.__setitem__(("tags", key), tags),
        scorer=scorer, on_importance=lambda key, value: results.__setitem__(("importance", key), value),
        summariser=summariser,
        on_summary=lambda key, text, sources: results.__setitem__(key, (text, sources)),
        batch_tags=False, poll_interval=0.02, batch_size=8)
    assert enrichment.kinds == ["importance", "summary", "tags"]
    with_user_importance = htm.add("Lunch was pasta", importance=2.0)
    enrichment.start()
    try:
        start = time.perf_counter()
        deploy = htm.add("We deploy on Friday")
        enrichment.memories_added([(deploy.key, deploy.content)])
        enrichment.memories_added([(with_user_importance.key, with_user_importance.content)],
                                  importance=False)
        summary_key = enrichment.memories_evicted([(deploy.key, deploy.content),
                                                   (with_user_importance.key, "Lunch was pasta")])
        queued = time.perf_counter() - start
        assert queued < slow  # adding and queueing never waited for a model call
        assert enrichment.flush(timeout=30)
    finally:
        assert enrichment.stop(timeout=10)
        enrichment.queue.close()
        htm.close()
    assert results[("importance", deploy.key)] == 8.0
    assert ("importance", with_user_importance.key) not in results
    assert results[("tags", deploy.key)] == results[("tags", with_user_importance.key)] == ["ops:deploy"]
    assert summary_key is not None
    assert results[summary_key] == ("They deployed, then had lunch.",
                                    [deploy.key, with_user_importance.key])
    stats = enrichment.stats()
    assert stats["completed"] == 4 and stats["pending"] == 0 and stats["calls"] >= 3


def test_pipeline_needs_an_enricher_and_skips_kinds_it_lacks() -> None:
    with pytest.raises(ValidationError, match="at least one enricher"):
        Enrichment(InMemoryJobQueue())
    queue = InMemoryJobQueue()
    enrichment = Enrichment(queue, scorer=LLMImportanceScorer(FakeListChatModel(responses=["1"])),
                            on_importance=lambda key, value: None)
    assert enrichment.memories_added([("m1", "text")]) != []
    assert enrichment.memories_added([("m2", "text")], importance=False) == []
    assert enrichment.memories_evicted([("m1", "text")]) is None
    assert queue.counts()["pending"] == 1
