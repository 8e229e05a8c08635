"""The enricher protocols (htm_core/enrich/base.py) and the one rule built on them.

Every built-in enricher satisfies its protocol with the protocol's own signature; an
enricher is model-backed (runs in background jobs) exactly when it has a ``usage``
counter; a tagger with ``tag_many`` gets claimed tag jobs in one batch. Shown with plain
objects written here, so the rule is the protocols', not the built-in classes'.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from htm_core.enrich import (
    BatchHandler,
    BatchTagger,
    ImportanceScorer,
    LLMImportanceScorer,
    LLMTagger,
    LLMUsage,
    ModelBacked,
    RuleImportanceScorer,
    RuleTagger,
    Summariser,
    SummaryWriter,
    Tagger,
    enrichment_handlers,
    uses_model,
)
from htm_core.enrich.attach import FacadeEnrichment
from htm_core.errors import ValidationError
from htm_core.store import open_store


def _model() -> FakeListChatModel:
    return FakeListChatModel(responses=["[]"])


BUILT_IN: list[tuple[Any, set[type]]] = [
    (RuleImportanceScorer(), {ImportanceScorer}),
    (RuleTagger(), {Tagger}),
    (LLMImportanceScorer(_model()), {ImportanceScorer, ModelBacked}),
    (LLMTagger(_model()), {Tagger, BatchTagger, ModelBacked}),
    (Summariser(_model()), {SummaryWriter, ModelBacked}),
]
PROTOCOLS = (ImportanceScorer, Tagger, BatchTagger, SummaryWriter, ModelBacked)


@pytest.mark.parametrize("enricher,roles", BUILT_IN, ids=[type(e).__name__ for e, _ in BUILT_IN])
def test_built_in_enrichers_meet_exactly_their_protocols(enricher: Any, roles: set[type]) -> None:
    assert {p for p in PROTOCOLS if isinstance(enricher, p)} == roles
    assert uses_model(enricher) is (ModelBacked in roles)


@pytest.mark.parametrize("enricher,roles", BUILT_IN, ids=[type(e).__name__ for e, _ in BUILT_IN])
def test_built_in_methods_have_the_protocol_signatures(enricher: Any, roles: set[type]) -> None:
    for protocol in roles - {ModelBacked}:
        for name, member in vars(protocol).items():
            if name.startswith("_") or not callable(member):
                continue
            wanted = list(inspect.signature(member).parameters)[1:]
            assert list(inspect.signature(getattr(enricher, name)).parameters) == wanted, \
                f"{type(enricher).__name__}.{name} differs from {protocol.__name__}.{name}"


def test_old_import_paths_name_the_same_protocols() -> None:
    from htm_core.enrich import base, importance, tagging

    assert importance.ImportanceScorer is base.ImportanceScorer
    assert tagging.Tagger is base.Tagger


class PlainTagger:
    name = "plain"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def tag(self, content: str) -> list[str]:
        self.calls.append(content)
        return ["topic:plain"]


class CountingTagger(PlainTagger):
    """Has a ``usage`` counter: model-backed, whatever it does inside."""

    def __init__(self) -> None:
        super().__init__()
        self.usage = LLMUsage()


class BatchingTagger(CountingTagger):
    def tag_many(self, contents: Sequence[str]) -> list[list[str]]:
        return [["topic:batch"] for _ in contents]


class PlainScorer:
    name = "plain"

    def score(self, content: str) -> float:
        return 7.0


def test_the_rule_is_the_usage_counter() -> None:
    assert not uses_model(PlainTagger()) and not uses_model(None)
    assert uses_model(CountingTagger())
    assert isinstance(PlainTagger(), Tagger) and isinstance(PlainScorer(), ImportanceScorer)


def test_an_enricher_without_usage_runs_inline_one_with_usage_in_background() -> None:
    store = open_store(":memory:")
    try:
        def facade(**enrichers: Any) -> FacadeEnrichment:
            return FacadeEnrichment(store=store, robot="r", add_summary=lambda *a: None,
                                    refresh_importance=lambda *a: None, **enrichers)

        inline = facade(tagger=PlainTagger(), importance_scorer=PlainScorer())
        assert inline.background is None
        assert inline.tags_for("anything", ["given:tag"]) == ("given:tag", "topic:plain")
        assert inline.importance_for("anything") == 7.0

        background_tagger = CountingTagger()
        background = facade(tagger=background_tagger, importance_scorer=PlainScorer())
        assert background.background is not None and background.inline_tagger is None
        assert background.background.kinds == ["tags"]
        assert background.tags_for("anything", []) == ()
        assert background_tagger.calls == []  # never called inside add
        assert background.importance_for("anything") == 7.0
    finally:
        store.close()


def test_a_summariser_must_be_model_backed() -> None:
    class PlainSummary:
        def summarise(self, texts: Sequence[str]) -> str:
            return "short"

    store = open_store(":memory:")
    try:
        with pytest.raises(ValidationError, match="model-backed"):
            FacadeEnrichment(store=store, robot="r", summariser=PlainSummary(),
                             add_summary=lambda *a: None, refresh_importance=lambda *a: None)
    finally:
        store.close()


def test_a_batch_tagger_gets_a_batch_handler_only_when_asked() -> None:
    def handlers(tagger: Tagger, batch: bool) -> object:
        return enrichment_handlers(tagger=tagger, on_tags=lambda key, tags: None,
                                   batch_tags=batch)["tags"]

    assert isinstance(handlers(BatchingTagger(), True), BatchHandler)
    assert not isinstance(handlers(BatchingTagger(), False), BatchHandler)
    assert not isinstance(handlers(CountingTagger(), True), BatchHandler)
