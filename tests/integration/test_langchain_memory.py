"""``HTMMemory``: the classic ``BaseMemory`` driving real ``ConversationChain``/``LLMChain``s.

The chains, prompts and ``FakeListLLM`` are LangChain's own (``langchain-classic`` for the
chains); htm runs on a real database (every backend in ``BACKENDS``) with the hashing
embedder and the tiktoken counter. A callback records the exact prompt each LLM call gets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_classic.chains import ConversationChain, LLMChain
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.prompts import PromptTemplate

from htm_core import HTM
from htm_core.errors import (
    InvalidBudgetError,
    InvalidImportanceError,
    InvalidTagError,
    UnknownStrategyError,
    ValidationError,
)
from htm_integrations.langchain import HTMChatMessageHistory, HTMMemory

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::PendingDeprecationWarning")

FILLER = [
    ("What is the weather like in Oslo in winter?", "Cold and dark, around minus five."),
    ("Name a good book about sailing.", "Try 'Sailing Alone Around the World'."),
    ("How do I boil an egg?", "Boil it for about eight minutes."),
    ("Which planet has rings?", "Saturn has the brightest rings."),
    ("Give me a word that rhymes with cat.", "Hat rhymes with cat."),
]


class PromptRecorder(BaseCallbackHandler):
    """Keeps every prompt an LLM was called with."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any) -> None:
        self.prompts.extend(prompts)


def history_part(prompt: str) -> str:
    """The ``{history}`` part of ConversationChain's default prompt."""
    start = prompt.index("Current conversation:\n") + len("Current conversation:\n")
    end = prompt.rindex("\nHuman: ")
    return prompt[start:end]


def test_conversation_chain_recalls_an_evicted_fact_within_budget(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(working_memory_tokens=80)
    memory = HTMMemory(htm=htm, max_tokens=60, recall_limit=2, context_strategy="recent")
    responses = ["Teal is a lovely colour."] + [a for _, a in FILLER] + ["Your favourite is teal."]
    recorder = PromptRecorder()
    chain = ConversationChain(llm=FakeListLLM(responses=responses, callbacks=[recorder]),
                              memory=memory)

    chain.invoke({"input": "My favourite colour is teal."})
    for question, _ in FILLER:
        chain.invoke({"input": question})
    # the second call saw the first turn
    assert "Human: My favourite colour is teal.\nAI: Teal is a lovely colour." in \
        history_part(recorder.prompts[1])
    # by now the fact has been pushed out of working memory, but not out of htm
    assert "chat:default:00000000" not in htm.working_memory
    assert htm.retrieve("chat:default:00000000") is not None

    answer = chain.invoke({"input": "What is my favourite colour?"})
    assert answer["response"] == "Your favourite is teal."
    last = history_part(recorder.prompts[-1])
    assert "Human: My favourite colour is teal." in last
    counter = htm.token_counter
    for prompt in recorder.prompts:
        assert counter.count(history_part(prompt)) <= 60
    # every turn is stored, in order, as two memories
    stored = HTMChatMessageHistory(htm=htm, session_id="default").messages
    assert len(stored) == 2 * (len(FILLER) + 2)
    assert stored[0] == HumanMessage("My favourite colour is teal.")
    assert stored[-1] == AIMessage("Your favourite is teal.")


def test_history_is_in_the_order_the_turns_happened(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    memory = HTMMemory(htm=htm)
    memory.save_context({"input": "I live in Lisbon"}, {"response": "Lovely city"})
    memory.save_context({"input": "I work as a baker"}, {"response": "Early mornings then"})
    history = memory.load_memory_variables({"input": "Where do I live and work?"})["history"]
    assert history == ("Human: I live in Lisbon\nAI: Lovely city\n"
                       "Human: I work as a baker\nAI: Early mornings then")


def test_llm_chain_with_several_inputs_and_explicit_keys(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    prompt = PromptTemplate.from_template(
        "Persona: {persona}\nKnown:\n{chat}\nUser: {question}\nBot:")
    memory = HTMMemory(htm=htm, memory_key="chat", input_key="question", output_key="text",
                       importance=4.0, human_prefix="User", ai_prefix="Bot")
    recorder = PromptRecorder()
    chain = LLMChain(llm=FakeListLLM(responses=["Noted, Rex.", "Rex."], callbacks=[recorder]),
                     prompt=prompt, memory=memory)
    chain.invoke({"persona": "pirate", "question": "My dog is called Rex"})
    chain.invoke({"persona": "pirate", "question": "What is my dog called?"})
    assert "Known:\nUser: My dog is called Rex\nBot: Noted, Rex.\nUser: What is my dog called?" \
        in recorder.prompts[1]
    stored = htm.retrieve("chat:default:00000000")
    assert stored is not None and stored.importance == 4.0
    assert stored.content == "User: My dog is called Rex"
    with pytest.raises(ValueError, match="One input key expected"):
        HTMMemory(htm=htm).load_memory_variables({"persona": "x", "question": "y"})
    with pytest.raises(ValidationError, match="output_key"):
        HTMMemory(htm=htm).save_context({"input": "x"}, {"a": "1", "b": "2"})


def test_return_messages_gives_message_objects(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    htm.add("The user's cat is called Miso", key="cat", importance=6.0, tags=["kb"])
    memory = HTMMemory(htm=htm, return_messages=True, shared_tags=["kb"])
    memory.save_context({"input": "Hello"}, {"output": "Hi there"})
    messages = memory.load_memory_variables({"input": "what is my cat called"})["history"]
    assert messages == [SystemMessage("The user's cat is called Miso"), HumanMessage("Hello"),
                        AIMessage("Hi there")]


def test_clear_empties_working_memory_only(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    memory = HTMMemory(htm=htm)
    memory.save_context({"input": "My locker code is 4711"}, {"output": "Got it"})
    memory.clear()
    assert len(htm.working_memory) == 0
    assert htm.retrieve("chat:default:00000000") is not None
    # the turn comes back through recall for a related question
    history = memory.load_memory_variables({"input": "what is my locker code"})["history"]
    assert "Human: My locker code is 4711" in history
    assert memory.load_memory_variables({"input": " "})["history"] == \
        "Human: My locker code is 4711\nAI: Got it"


def test_same_htm_serves_the_chain_and_direct_recall(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    htm.add("Project Falcon ships on the 3rd of June", key="falcon", importance=8.0,
            tags=["kb:projects"])
    recorder = PromptRecorder()
    chain = ConversationChain(llm=FakeListLLM(responses=["June 3rd."], callbacks=[recorder]),
                              memory=HTMMemory(htm=htm, shared_tags=["kb"]))
    chain.invoke({"input": "When does Project Falcon ship?"})
    assert "Project Falcon ships on the 3rd of June" in history_part(recorder.prompts[0])
    hits = htm.recall("Project Falcon ship", limit=3)
    assert {h.memory.key for h in hits} >= {"falcon", "chat:default:00000000"}
    assert htm.retrieve("chat:default:00000001").content == "AI: June 3rd."  # type: ignore[union-attr]


def test_recall_can_be_scoped_to_one_conversation(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    HTMMemory(htm=htm, session_id="work").save_context(
        {"input": "The server password rotates monthly"}, {"output": "Noted"})
    htm.clear_working_memory()
    everywhere = HTMMemory(htm=htm, session_id="home", shared=True)
    scoped = HTMMemory(htm=htm, session_id="home")
    narrowed = HTMMemory(htm=htm, session_id="home", recall_tags=["chat:session:home"])
    assert "server password" in everywhere.load_memory_variables(
        {"input": "when does the server password rotate"})["history"]
    # the shared recall put the work turn into working memory; the scoped history leaves it out
    assert "chat:work:00000000" in htm.working_memory
    for memory in (scoped, narrowed):
        assert memory.load_memory_variables(
            {"input": "when does the server password rotate"})["history"] == ""
    with pytest.raises(InvalidTagError):
        HTMMemory(htm=htm, recall_tags=["not a tag"])
    with pytest.raises(ValidationError, match="outside this memory's scope"):
        HTMMemory(htm=htm, session_id="home", recall_tags=["chat:session:work"])


def test_bad_settings_raise_htm_errors(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    with pytest.raises(InvalidBudgetError):
        HTMMemory(htm=htm, max_tokens=0)
    with pytest.raises(InvalidImportanceError):
        HTMMemory(htm=htm, importance=11)
    with pytest.raises(UnknownStrategyError):
        HTMMemory(htm=htm, context_strategy="newest")
    with pytest.raises(UnknownStrategyError):
        HTMMemory(htm=htm, recall_strategy="semantic")
    with pytest.raises(ValidationError, match=r"\['max_token'\].*did you mean 'max_tokens'"):
        HTMMemory(htm=htm, max_token=500)  # misspelt: refused, not ignored


def test_the_budget_is_htm_working_memory_by_default(htm_factory: Callable[..., HTM]) -> None:
    """With no ``max_tokens`` the history is htm's working-memory context, within htm's own
    budget: every resident turn of a conversation larger than the old fixed 2,000 tokens,
    and no more than a small working memory holds."""
    turn = " ".join(["harbour lighthouse keeper evening shift"] * 20)  # about 100 tokens
    big = htm_factory(working_memory_tokens=128_000)
    memory = HTMMemory(htm=big, session_id="long", recall_limit=1)
    for i in range(20):
        memory.save_context({"input": f"{i}: {turn}"}, {"output": f"noted {i}"})
    history = memory.load_memory_variables({"input": "lighthouse"})["history"]
    assert big.token_counter.count(history) > 2_000
    assert all(f"Human: {i}: " in history for i in range(20))
    small = htm_factory(working_memory_tokens=600)
    memory = HTMMemory(htm=small, session_id="long", recall_limit=1)
    history = memory.load_memory_variables({"input": "lighthouse"})["history"]
    assert 0 < small.token_counter.count(history) <= 600


async def test_async_chain(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    recorder = PromptRecorder()
    chain = ConversationChain(
        llm=FakeListLLM(responses=["Hi Bo.", "You are Bo."], callbacks=[recorder]),
        memory=HTMMemory(htm=htm))
    await chain.ainvoke({"input": "I am Bo"})
    await chain.ainvoke({"input": "Who am I?"})
    assert "Human: I am Bo\nAI: Hi Bo." in history_part(recorder.prompts[1])
    memory = HTMMemory(htm=htm)
    await memory.aclear()
    assert len(htm.working_memory) == 0
    assert "I am Bo" in (await memory.aload_memory_variables({"input": "Bo"}))["history"]
