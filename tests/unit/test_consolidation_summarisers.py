"""The model strategies with fake chat models (deterministic, and ones that misbehave),
the real token counter, and a real LlamaIndex LLM class with a fake completion."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from htm_core.consolidation.base import Digest, DigestStrategy, SourceItem
from htm_core.consolidation.summarisers import (
    DigestWriter,
    HierarchicalSummariser,
    MapReduceSummariser,
    SimpleSummariser,
    chat_model_of,
    strategy_named,
)
from htm_core.enrich.errors import EnrichmentError, InvalidModelOutputError
from htm_core.enrich.llm import LLMUsage
from htm_core.errors import InvalidBudgetError, UnknownStrategyError, ValidationError
from htm_core.jobs import TokenBucket
from htm_core.tokens import TiktokenCounter

COUNTER = TiktokenCounter()


class Reply:
    """A chat message: ``content`` and the usage a provider reports."""

    def __init__(self, content: str) -> None:
        self.content = content
        self.usage_metadata = {"input_tokens": 10, "output_tokens": 2}


class FirstWords:
    """Answers with the first words of the notes in the prompt, within the word limit it
    states (deterministic); records every prompt and how many calls ran at once."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self._lock = threading.Lock()
        self._running = 0
        self.most_at_once = 0

    def invoke(self, prompt: str, /) -> Reply:
        with self._lock:
            self.prompts.append(prompt)
            self._running += 1
            self.most_at_once = max(self.most_at_once, self._running)
        try:
            limit = int(re.search(r"at most\s+(\d+)\s+words", prompt).group(1))  # type: ignore[union-attr]
            notes = [line[2:] for line in prompt.splitlines() if line.startswith("- ")]
            words = " ".join(note.split()[0] for note in notes).split()
            threading.Event().wait(0.01)  # long enough for the threads to overlap
            return Reply(" ".join(words[: max(1, limit // 2)]))
        finally:
            with self._lock:
                self._running -= 1


class Scripted:
    """Answers with ``answers`` in order (the last one again when they run out)."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def invoke(self, prompt: str, /) -> Reply:
        self.prompts.append(prompt)
        return Reply(self.answers.pop(0) if len(self.answers) > 1 else self.answers[0])


TURNS = [f"Turn{n} Ada said the release of Atlas {n}.{n} moved to day {n}, Zoë agreed."
         for n in range(40)]


def test_simple_asks_once_and_names_every_non_blank_item() -> None:
    model = FirstWords()
    items = [SourceItem(text=t, key=f"k{n}") for n, t in enumerate(TURNS[:5])] + [
        SourceItem(text="   ", key="blank")]
    digest = SimpleSummariser(model, token_counter=COUNTER).summarise(items, 30)
    assert len(model.prompts) == 1
    assert re.search(r"at most\s+22 words \(30 tokens\)", model.prompts[0])
    assert digest.text == "Turn0 Turn1 Turn2 Turn3 Turn4"
    assert digest.source_keys == ["k0", "k1", "k2", "k3", "k4"]
    assert (digest.strategy, digest.tokens) == ("simple", COUNTER.count(digest.text))


def test_simple_refuses_what_does_not_fit_one_request() -> None:
    model = FirstWords()
    with pytest.raises(InvalidBudgetError, match="'hierarchical' or 'map-reduce'"):
        SimpleSummariser(model, max_input_tokens=100).summarise(TURNS, 30)
    assert model.prompts == []


def test_too_long_and_malformed_answers_are_re_asked_then_given_up() -> None:
    usage = LLMUsage()
    long = "word " * 200
    model = Scripted("", "```\n" + long + "\n```", "Ada moved the launch.")
    writer = SimpleSummariser(model, token_counter=COUNTER, usage=usage)
    assert writer.summarise(["Ada: let's move the launch"], 20).text == "Ada moved the launch."
    assert "has 200 tokens; write at most 20 tokens" in model.prompts[2]
    assert (usage.invalid_outputs, usage.succeeded, usage.calls) == (2, 1, 3)
    nul = Scripted("Ada\x00moved it", "Ada moved it.")
    assert SimpleSummariser(nul).summarise(["Ada: move it"], 20).text == "Ada moved it."
    assert "cannot be stored" in nul.prompts[1] and "NUL" in nul.prompts[1]
    stubborn = Scripted(long)
    with pytest.raises(InvalidModelOutputError, match="3 malformed answers"):
        SimpleSummariser(stubborn, max_retries=2).summarise(["a b c"], 20)
    assert len(stubborn.prompts) == 3


def test_hierarchical_rounds_until_it_fits() -> None:
    model = FirstWords()
    strategy = HierarchicalSummariser(model, token_counter=COUNTER, max_input_tokens=120)
    digest = strategy.summarise(TURNS, 40)
    assert digest.tokens <= 40 and digest.text.startswith("Turn0")
    assert len(digest.sources) == len(TURNS)  # every item went into some summary
    assert len(model.prompts) > 4 and "summaries" in model.prompts[-1]
    assert all(COUNTER.count(p.split("\n\n", 1)[1]) <= 120 + 60 for p in model.prompts)


def test_hierarchical_gives_up_when_the_summaries_do_not_shrink() -> None:
    sixteen = " ".join(["Ada"] * 16)
    assert COUNTER.count(sixteen) == 16
    notes = [" ".join(["Bob"] * 12)] * 3  # one note per request: each summary grows to 16
    with pytest.raises(EnrichmentError, match="did not shorten the text"):
        HierarchicalSummariser(Scripted(sixteen), token_counter=COUNTER,
                               max_input_tokens=16).summarise(notes, 40)


def test_hierarchical_gives_up_after_its_rounds() -> None:
    model = Scripted("Ada moved it.")  # 4 tokens
    with pytest.raises(EnrichmentError, match=r"160 tokens after 1 round, .*raise max_rounds"):
        HierarchicalSummariser(model, token_counter=COUNTER, max_input_tokens=40,
                               max_rounds=1).summarise(TURNS, 40)
    assert len(model.prompts) == 40  # one request per turn (each over 20 tokens)
    digest = HierarchicalSummariser(model, token_counter=COUNTER, max_input_tokens=40,
                                    max_rounds=2).summarise(TURNS, 40)
    assert digest.text == "Ada moved it." and len(digest.sources) == 40
    assert len(model.prompts) == 40 + 40 + 4 + 1  # 40 turns, 4 chunks of 10 summaries, 1


def test_a_source_longer_than_a_request_is_split() -> None:
    model = FirstWords()
    long = " ".join(f"Ada{n} reviewed module {n}." for n in range(300))
    digest = HierarchicalSummariser(model, max_input_tokens=200).summarise([long, "Bob: ok"], 30)
    assert digest.tokens <= 30 and len(digest.sources) == 2


def test_map_reduce_runs_chunks_concurrently_then_combines_once() -> None:
    model = FirstWords()
    usage = LLMUsage()
    strategy = MapReduceSummariser(model, token_counter=COUNTER, max_input_tokens=300,
                                   max_workers=3, usage=usage,
                                   limiter=TokenBucket(1000.0, burst=1000))
    digest = strategy.summarise(TURNS, 60)
    chunks = len(model.prompts) - 1
    assert chunks >= 3 and 1 < model.most_at_once <= 3
    assert "summaries of consecutive parts" in model.prompts[-1]
    assert digest.tokens <= 60 and len(digest.sources) == len(TURNS)
    assert usage.calls == chunks + 1 and usage.input_tokens == 10 * (chunks + 1)
    assert strategy.writer.limiter is not None and strategy.writer.limiter.acquired == chunks + 1


def test_map_reduce_refuses_too_many_chunks_before_asking() -> None:
    model = FirstWords()
    with pytest.raises(InvalidBudgetError, match="hierarchical"):
        MapReduceSummariser(model, max_input_tokens=30).summarise(TURNS, 60)
    assert model.prompts == []


def test_a_failing_chunk_fails_the_whole_digest() -> None:
    class Flaky(FirstWords):
        def invoke(self, prompt: str, /) -> Reply:
            if "Turn20" in prompt:
                raise TimeoutError("the server went away")
            return super().invoke(prompt)

    with pytest.raises(EnrichmentError, match="the server went away"):
        MapReduceSummariser(Flaky(), max_input_tokens=300).summarise(TURNS, 60)


def test_nothing_to_summarise_asks_nothing() -> None:
    model = FirstWords()
    for strategy in (SimpleSummariser(model), HierarchicalSummariser(model),
                     MapReduceSummariser(model)):
        assert strategy.summarise(["", "  \n"], 20) == Digest("", (), 0, strategy.name)
    assert model.prompts == []


def test_unicode_notes_reach_the_model_whole() -> None:
    model = Scripted("艾达把发布推迟到五月三日。")
    digest = SimpleSummariser(model).summarise(["艾达：我们把发布推迟到五月三日吧", "Zoë: d'accord 👍"], 40)
    assert digest.text == "艾达把发布推迟到五月三日。"
    assert "我们把发布推迟到五月三日吧" in model.prompts[0] and "Zoë: d'accord 👍" in model.prompts[0]


def test_strategy_named() -> None:
    assert isinstance(strategy_named("extractive"), DigestStrategy)
    for name, cls in (("simple", SimpleSummariser), ("hierarchical", HierarchicalSummariser),
                      ("map-reduce", MapReduceSummariser), ("Map_Reduce", MapReduceSummariser)):
        assert type(strategy_named(name, chat_model=FirstWords(), max_input_tokens=500)) is cls
    with pytest.raises(UnknownStrategyError, match="extractive, simple, hierarchical, map-reduce"):
        strategy_named("abstractive")
    with pytest.raises(UnknownStrategyError):
        strategy_named(None)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="pass chat_model="):
        strategy_named("simple")
    with pytest.raises(ValidationError, match="not a chat model"):
        strategy_named("simple", chat_model=object())
    with pytest.raises(InvalidBudgetError, match="max_workers"):
        strategy_named("map-reduce", chat_model=FirstWords(), max_workers=0)


def test_a_langchain_chat_model_and_a_llamaindex_llm() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    lc = FakeListChatModel(responses=["Ada moved the launch."])
    assert SimpleSummariser(lc).summarise(["Ada: move the launch"], 20).text == \
        "Ada moved the launch."
    llama_index = pytest.importorskip("llama_index.core.llms")

    class Fixed(llama_index.CustomLLM):  # type: ignore[misc,name-defined]
        @property
        def metadata(self) -> Any:
            return llama_index.LLMMetadata(model_name="fixed")

        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            return llama_index.CompletionResponse(text="Bob reviews Atlas on Friday.")

        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            raise NotImplementedError

    writer = DigestWriter(Fixed())
    assert writer.name == "llm:fixed"
    assert writer.write(["Bob: I'll review Atlas on Friday"], 20) == "Bob reviews Atlas on Friday."
    assert chat_model_of(lc) is lc
