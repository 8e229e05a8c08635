"""Enrichment through the HTM facade: rules inline, models in background jobs, documents.

The models are LangChain's own fake chat models (no network)."""

from __future__ import annotations

import time

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from htm_core import HTM, HashingEmbedder
from htm_core.enrich import (
    LLMImportanceScorer,
    LLMTagger,
    RuleImportanceScorer,
    RuleTagger,
    Summariser,
)
from htm_core.errors import InvalidBudgetError, ValidationError


def test_rules_run_inline_and_never_override_the_caller(htm_factory):
    htm = htm_factory(robot="a", importance_scorer=RuleImportanceScorer(), tagger=RuleTagger())
    m = htm.add("Remember that I prefer Postgres for new services")
    assert m.importance == 9.0  # explicit +4, preference +3, a name +1 on the 1.0 base
    assert "database:postgresql" in m.tags and "user:preferences" in m.tags
    given = htm.add("Remember that I prefer tea", importance=2.0, tags=["user:drinks"])
    assert given.importance == 2.0 and given.tags[0] == "user:drinks"
    assert htm.add("lol ok").importance == 0.5
    plain = htm_factory(robot="b")
    assert plain.add("Remember that I prefer Postgres").importance == 1.0  # off by default


def test_llm_tagger_and_scorer_run_in_the_background(htm_factory):
    slow = FakeListChatModel(responses=['["project:apollo"]'], sleep=0.5)
    scorer = LLMImportanceScorer(FakeListChatModel(responses=["7"]))
    htm = htm_factory(robot="a", tagger=LLMTagger(slow), importance_scorer=scorer)
    started = time.perf_counter()
    m = htm.add("Apollo launch review moved to Thursday")
    assert time.perf_counter() - started < 0.4  # add never waits for the model
    assert m.tags == () and m.importance == 1.0
    assert htm.flush_enrichment(timeout=30)
    stored = htm.retrieve(m.key)
    assert stored.tags == ("project:apollo",) and stored.importance == 7.0
    assert htm.working_memory.peek(m.key).importance == 7.0
    assert htm.recall("launch review", tags=["project"], limit=1)[0].memory.key == m.key
    stats = htm.stats().extra["enrichment"]
    assert stats["completed"] >= 2 and stats["pending"] == 0
    ops = {o.op for o in htm.operations(limit=20)}
    assert {"tag", "importance"} <= ops


def test_caller_importance_is_not_rescored(htm_factory):
    scorer = LLMImportanceScorer(FakeListChatModel(responses=["9"]))
    htm = htm_factory(robot="a", importance_scorer=scorer)
    m = htm.add("keep my importance", importance=3.0)
    assert htm.flush_enrichment(timeout=30)
    assert htm.retrieve(m.key).importance == 3.0


def test_evictions_are_summarised_long_term_and_offered_to_the_context(htm_factory):
    summariser = Summariser(FakeListChatModel(responses=["Earlier: Dana planned the Lisbon trip."]))
    htm = htm_factory(robot="a", working_memory_tokens=30, summariser=summariser)
    for i in range(6):
        htm.add(f"turn {i}: planning the Lisbon trip with Dana", importance=float(i))
    assert htm.flush_enrichment(timeout=30)
    summaries = htm.recall("Lisbon trip", tags=["htm:summary"], limit=5, strategy="fulltext")
    assert summaries, "no summary memory was written"
    summary = summaries[0].memory
    assert summary.content == "Earlier: Dana planned the Lisbon trip."
    assert summary.metadata["source_keys"]
    ctx = htm.create_context(max_tokens=200, include_summaries=1)
    assert ctx.text.startswith("Earlier: Dana planned the Lisbon trip.")
    with pytest.raises(InvalidBudgetError):
        htm.create_context(include_summaries=-1)


def test_bad_enrichers_are_rejected(htm_factory):
    with pytest.raises(ValidationError, match="tag"):
        htm_factory(robot="a", tagger=object())


DOC_V1 = """# Handbook

Welcome to the team handbook.

## Holidays

Everyone gets 28 days of paid holiday per year.

## Expenses

Submit receipts within 30 days through the finance portal.
"""


def test_documents_are_chunked_with_heading_paths_and_updated_in_place(sqlite_url, clock):
    with HTM(robot="a", database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock) as htm:
        chunks = htm.add_document(DOC_V1, source="handbook.md", chunk_tokens=20, overlap=0)
        assert "".join(c.content for c in chunks) == DOC_V1
        assert len(htm.working_memory) == 0  # documents live in long-term memory
        hit = htm.recall("how many days of paid holiday", limit=1)[0].memory
        assert "28 days" in hit.content and hit.metadata["heading"] == "Handbook > Holidays"
        v2 = DOC_V1.replace("30 days", "14 days")
        again = htm.add_document(v2, source="handbook.md", chunk_tokens=20, overlap=0)
        assert "".join(c.content for c in again) == v2
        changed = {c.key for c in again} - {c.key for c in chunks}
        dropped = {c.key for c in chunks} - {c.key for c in again}
        assert len(changed) == 1 and len(dropped) == 1
        assert {c.id for c in again} - {c.id for c in chunks} == {htm.retrieve(changed.pop()).id}
        old = dropped.pop()
        assert htm.retrieve(old) is None
        assert "30 days" in htm.restore(old).content  # never forget: recoverable


def test_background_jobs_belong_to_the_robot_that_caused_them(store_url, clock):
    """Robots a and b share a store and its job table; only b's runner works (a's process
    is gone, its runner stopped), so b's runner does a's summary and importance jobs. The
    results are a's: the summary is stored as a's memory and never enters b's context, and
    the importance writes are logged under a."""
    a = HTM(database_url=store_url, clock=clock, embedder=HashingEmbedder(), robot="a",
            working_memory_tokens=30,
            summariser=Summariser(FakeListChatModel(responses=["Earlier: a planned Lisbon."])),
            importance_scorer=LLMImportanceScorer(FakeListChatModel(responses=["7"])))
    a._enrichment.stop()  # a's runner is gone; b's is the one runner on the store
    b = HTM(database_url=store_url, clock=clock, embedder=HashingEmbedder(), robot="b",
            summariser=Summariser(FakeListChatModel(responses=["Earlier: a planned Lisbon."])),
            importance_scorer=LLMImportanceScorer(FakeListChatModel(responses=["7"])))
    try:
        for i in range(6):
            a.add(f"turn {i}: planning the Lisbon trip", key=f"a{i}")
        assert b.flush_enrichment(timeout=60)
        assert b.create_context(max_tokens=500, include_summaries=5).text == ""
        summaries = [b.store.get(k) for k in b.store.keys_with_prefix("summary:")]
        assert summaries, "b's runner wrote no summary"
        assert {m.robot for m in summaries} == {"a"}
        assert all(m.content == "Earlier: a planned Lisbon." for m in summaries)
        assert b.stats().long_term_robot == 0
        scored = b.operations(op="importance", limit=50)
        assert scored and {o.robot for o in scored} == {"a"}
    finally:
        a.close()
        b.close()
