"""LLM enrichers driven by LangChain's own fake chat models (no server, no network).

``FakeListChatModel`` answers from a list; ``GenericFakeChatModel`` replays ``AIMessage``
objects, which lets a test give the usage metadata a real provider reports.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage

from htm_core.enrich import (
    ImportanceScorer,
    InvalidModelOutputError,
    LLMImportanceScorer,
    LLMTagger,
    LLMUsage,
    ModelCallError,
    Summariser,
    Tagger,
    TokenBucket,
)
from htm_core.errors import InvalidBudgetError, InvalidContentError, InvalidTagError, ValidationError


class Recording:
    """Wraps a real fake chat model and keeps every prompt it was sent."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.prompts: list[str] = []

    def invoke(self, prompt: str) -> Any:
        self.prompts.append(prompt)
        return self.model.invoke(prompt)


def replay(*answers: str, usage: tuple[int, int] | None = None) -> GenericFakeChatModel:
    messages: Iterator[AIMessage] = iter(
        AIMessage(content=a, usage_metadata={"input_tokens": usage[0], "output_tokens": usage[1],
                                             "total_tokens": sum(usage)} if usage else None)
        for a in answers)
    return GenericFakeChatModel(messages=messages)


# -- tagger ----------------------------------------------------------------------------------

def test_tagger_returns_validated_normalised_tags() -> None:
    tagger = LLMTagger(FakeListChatModel(responses=['["Database:PostgreSQL:Indexes", "ops:on call"]']))
    assert isinstance(tagger, Tagger)
    assert tagger.tag("pgvector index slow; I am on call") == ["database:postgresql:indexes", "ops:on-call"]
    assert tagger.usage.snapshot() == {"calls": 1, "input_tokens": 0, "output_tokens": 0,
                                             "invalid_outputs": 0, "errors": 0, "succeeded": 1,
                                             "gave_up": 0}


@pytest.mark.parametrize("bad", [
    "database:postgresql",                    # not JSON
    '{"tags": ["a:b"]}',                      # JSON, not a list
    '["ok:tag", 3]',                          # not all strings
    '["bad tag!:x"]',                         # fails check_tags
    '["a:b:c:d:e:f"]',                        # deeper than max_depth
    '["a", "b", "c", "d", "e", "f"]',         # more than max_tags
    '["a::b"]',                               # empty segment
])
def test_tagger_rejects_malformed_then_accepts_retry(bad: str) -> None:
    model = Recording(FakeListChatModel(responses=[bad, '["programming:python"]']))
    tagger = LLMTagger(model, max_retries=2)
    assert tagger.tag("pytest fixtures") == ["programming:python"]
    assert tagger.usage.invalid_outputs == 1
    assert tagger.usage.calls == 2
    # the second request tells the model what was wrong with the first answer
    assert "rejected" in model.prompts[1] and bad[:20] in model.prompts[1]


def test_tagger_gives_up_after_bounded_retries_and_counts() -> None:
    model = Recording(FakeListChatModel(responses=["sure! here are tags: python"]))
    tagger = LLMTagger(model, max_retries=2)
    with pytest.raises(InvalidModelOutputError, match="3 malformed answers") as info:
        tagger.tag("python")
    assert len(model.prompts) == 3
    assert info.value.outputs == ["sure! here are tags: python"] * 3
    assert tagger.usage.snapshot()["invalid_outputs"] == 3
    assert tagger.usage.gave_up == 1 and tagger.usage.succeeded == 0


def test_tagger_ontology_hint_from_existing_tags() -> None:
    current = ["database:postgresql", "travel:japan"]
    model = Recording(FakeListChatModel(responses=['["database:postgresql"]']))
    tagger = LLMTagger(model, existing_tags=lambda: current, max_hint_tags=1)
    tagger.tag("psql is down")
    assert "database:postgresql" in model.prompts[0]
    assert "travel:japan" not in model.prompts[0]  # capped at max_hint_tags
    current.insert(0, "ops:incidents")  # the callable is read on each request
    tagger.tag("psql is down again")
    assert "ops:incidents" in model.prompts[1]


def test_tagger_rejects_bad_hint_and_bad_settings() -> None:
    model = FakeListChatModel(responses=["[]"])
    with pytest.raises(InvalidTagError):
        LLMTagger(model, existing_tags=["not a tag!"])
    with pytest.raises(InvalidBudgetError):
        LLMTagger(model, max_retries=-1)
    with pytest.raises(InvalidBudgetError):
        LLMTagger(model, max_tags=0)
    with pytest.raises(ValidationError, match="invoke"):
        LLMTagger(object())


def test_tagger_empty_list_means_no_tags() -> None:
    assert LLMTagger(FakeListChatModel(responses=["[]"])).tag("hmm") == []


def test_model_exception_becomes_model_call_error_and_is_counted() -> None:
    class Down:
        def invoke(self, prompt: str) -> Any:
            raise ConnectionError("connection refused")

    tagger = LLMTagger(Down())
    with pytest.raises(ModelCallError, match="connection refused") as info:
        tagger.tag("x")
    assert isinstance(info.value.__cause__, ConnectionError)
    assert tagger.usage.errors == 1 and tagger.usage.calls == 0


def test_tokens_counted_from_usage_metadata() -> None:
    usage = LLMUsage()
    tagger = LLMTagger(replay("nope", '["a:b"]', usage=(100, 7)), usage=usage)
    scorer = LLMImportanceScorer(replay("6", usage=(50, 1)), usage=usage)
    assert tagger.tag("x") == ["a:b"]
    assert scorer.score("y") == 6.0
    snap = usage.snapshot()
    assert (snap["calls"], snap["input_tokens"], snap["output_tokens"]) == (3, 250, 15)
    assert snap["invalid_outputs"] == 1


# -- importance ------------------------------------------------------------------------------

@pytest.mark.parametrize(("answer", "value"), [("7", 7.0), (" 7.5 ", 7.5), ("8/10", 8.0), ("**9**", 9.0),
                                               ("0", 0.0), ("10.", 10.0)])
def test_importance_accepts_bare_numbers(answer: str, value: float) -> None:
    scorer = LLMImportanceScorer(FakeListChatModel(responses=[answer]))
    assert isinstance(scorer, ImportanceScorer)
    assert scorer.score("I will ship on Friday") == value


@pytest.mark.parametrize("bad", ["11", "-1", "seven", "I'd say 7", "7 or 8", "", "nan"])
def test_importance_rejects_and_retries(bad: str) -> None:
    scorer = LLMImportanceScorer(FakeListChatModel(responses=[bad, "4"]), max_retries=1)
    assert scorer.score("some text") == 4.0
    assert scorer.usage.invalid_outputs == 1


def test_importance_gives_up() -> None:
    scorer = LLMImportanceScorer(FakeListChatModel(responses=["very important"]), max_retries=0)
    with pytest.raises(InvalidModelOutputError):
        scorer.score("x")
    assert scorer.usage.calls == 1 and scorer.usage.gave_up == 1


async def test_async_twins_use_ainvoke() -> None:
    tagger = LLMTagger(FakeListChatModel(responses=["bad", '["a:b"]']))
    scorer = LLMImportanceScorer(FakeListChatModel(responses=["3"]))
    summariser = Summariser(FakeListChatModel(responses=["They met."]))
    tags, score, summary = await asyncio.gather(tagger.atag("x"), scorer.ascore("y"),
                                                summariser.asummarise(["hi", "we met"]))
    assert (tags, score, summary) == (["a:b"], 3.0, "They met.")
    assert tagger.usage.invalid_outputs == 1


def test_limiter_applies_to_every_request() -> None:
    now = [0.0]
    bucket = TokenBucket(2.0, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    tagger = LLMTagger(FakeListChatModel(responses=["bad", '["a:b"]']), limiter=bucket)
    tagger.tag("x")
    tagger.tag("y")  # FakeListChatModel cycles: "bad" again, then valid
    assert bucket.acquired == 4
    assert now[0] == pytest.approx(1.5)  # 4 requests at 2/s with a burst of 1


# -- summaries -------------------------------------------------------------------------------

def test_summariser_writes_bounded_summary() -> None:
    model = Recording(FakeListChatModel(responses=["  Alice chose Postgres;\n deadline Friday.  "]))
    summariser = Summariser(model, max_chars=100)
    summary = summariser.summarise(["Alice: let's use Postgres", "Bob: deadline is Friday", "lol"])
    assert summary == "Alice chose Postgres; deadline Friday."
    assert "- Bob: deadline is Friday" in model.prompts[0]


def test_summariser_rejects_empty_and_too_long() -> None:
    model = FakeListChatModel(responses=["   ", "x" * 500, "Short summary."])
    summariser = Summariser(model, max_chars=100, max_retries=2)
    assert summariser.summarise(["a", "b"]) == "Short summary."
    assert summariser.usage.invalid_outputs == 2
    with pytest.raises(InvalidModelOutputError):
        Summariser(FakeListChatModel(responses=[""]), max_retries=1).summarise(["a"])


def test_summariser_bounds_input_and_validates_it() -> None:
    model = Recording(FakeListChatModel(responses=["ok then, a summary"]))
    summariser = Summariser(model, max_chars=100, max_input_chars=300)
    summariser.summarise(["y" * 250, "z" * 250, "never sent"])
    assert "z" * 51 not in model.prompts[0] and "never sent" not in model.prompts[0]
    with pytest.raises(InvalidContentError):
        summariser.summarise([])
    with pytest.raises(InvalidContentError):
        summariser.summarise(["fine", "   "])
    with pytest.raises(InvalidBudgetError):
        Summariser(model, max_chars=10)
