"""HTMMemory and HTMMemoryBlock driven by real LlamaIndex engines, agents and ``Memory``.

LLMs are LlamaIndex's own fakes (``MockLLMWithChatMemoryOfLastCall`` records the messages
it was sent; ``MockFunctionCallingLLM`` drives ``FunctionAgent``); htm runs on a real
SQLite file (and on PostgreSQL when the backend joins ``BACKENDS``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import CondensePlusContextChatEngine, SimpleChatEngine
from llama_index.core.llms.mock import MockFunctionCallingLLM, MockLLMWithChatMemoryOfLastCall
from llama_index.core.memory import Memory
from llama_index.core.tools import FunctionTool

from htm_core import HTM, HashingEmbedder
from htm_core.errors import InvalidBudgetError, ValidationError
from htm_integrations.llama_index import HTMEmbedding, HTMMemory, HTMMemoryBlock
from htm_integrations.llama_index.memory import DEFAULT_MEMORY_HEADER

FILLER = ("Tell me something about the history of the printing press and how movable type "
          "changed the way books were made in fifteenth century Europe, in some detail.")


def tokens(htm: HTM, messages: Sequence[ChatMessage]) -> int:
    return sum(htm.token_counter.count(m.content or "") for m in messages)


def memory_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    return [m for m in messages if (m.content or "").startswith(DEFAULT_MEMORY_HEADER)]


@pytest.fixture
def htm(htm_factory: Callable[..., HTM]) -> HTM:
    return htm_factory(robot="assistant")


def test_simple_chat_engine_recalls_old_turns_within_the_limit(htm: HTM) -> None:
    htm.add("The user's favourite editor is Helix with Vim keybindings", importance=8.0,
            tags=["kb"])
    memory = HTMMemory.from_defaults(htm=htm, session_id="s1", token_limit=150,
                                     shared_tags=("kb",))
    llm = MockLLMWithChatMemoryOfLastCall(max_tokens=5)
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="Be brief.")

    engine.chat("My cat is called Tiberius and he is ginger.")
    for _ in range(4):
        engine.chat(FILLER)
        sent = llm.last_chat_messages
        assert sent is not None
        assert tokens(htm, sent[1:]) <= 150  # everything the memory supplied
    engine.chat("What is my cat called?")
    sent = list(llm.last_chat_messages or [])
    window = [m for m in sent if m.role in (MessageRole.USER, MessageRole.ASSISTANT)]
    assert all("Tiberius" not in (m.content or "") for m in window)  # fell out of the window
    recalled = memory_messages(sent)
    assert len(recalled) == 1 and "[user] My cat is called Tiberius" in (recalled[0].content or "")
    assert sent[0].content == "Be brief."
    assert tokens(htm, sent[1:]) <= 150

    engine.chat("Which editor do I like?")
    recalled = memory_messages(llm.last_chat_messages or [])
    assert "Helix with Vim keybindings" in (recalled[0].content or "")
    # Every user and assistant turn is in long-term memory: 7 turns, 14 messages.
    turns = [h for h in htm.recall("Tiberius", limit=50, strategy="fulltext")]
    assert any(h.memory.metadata == {"role": "user", "session_id": "s1", "source": "llama_index"}
               for h in turns)
    assert len(memory.get_all()) == 14


def test_condense_plus_context_engine_sends_recalled_memories(htm: HTM) -> None:
    htm.add("Deployments to production happen on Thursdays after the review", importance=6.0,
            tags=["kb"])
    embed = HTMEmbedding(HashingEmbedder())
    index = VectorStoreIndex.from_documents(
        [Document(text="The staging server is called Bramble and runs Debian.")],
        embed_model=embed)
    # A chat model, so the response synthesiser sends messages (not one prompt string).
    llm = MockLLMWithChatMemoryOfLastCall(max_tokens=5, is_chat_model=True)
    memory = HTMMemory.from_defaults(htm=htm, session_id="c1", token_limit=120,
                                     shared_tags=("kb",))
    engine = CondensePlusContextChatEngine.from_defaults(
        retriever=index.as_retriever(similarity_top_k=1), llm=llm, memory=memory)

    engine.chat("Hello, I am planning a release of the billing service.")
    for _ in range(3):
        engine.chat(FILLER)
        # [engine's context prompt] + what the memory gave + [the user's message]
        assert tokens(htm, (llm.last_chat_messages or [])[1:-1]) <= 120
    engine.chat("On which day do deployments to production happen?")
    sent = list(llm.last_chat_messages or [])
    assert tokens(htm, sent[1:-1]) <= 120
    recalled = memory_messages(sent)
    assert recalled and "Deployments to production happen on Thursdays" in (recalled[0].content or "")
    assert any("Bramble" in (m.content or "") for m in sent)  # the retriever's context too
    assert sent[-1].content == "On which day do deployments to production happen?"
    assert [m.role for m in memory.get_all()] == [MessageRole.USER, MessageRole.ASSISTANT] * 5


async def test_function_agent_uses_the_memory(htm: HTM) -> None:
    htm.add("The user's name is Ada and she lives in Lisbon", importance=7.0, tags=["kb"])
    seen: list[list[ChatMessage]] = []

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        seen.append(list(messages))
        return ChatMessage(role="assistant", content="Noted, Ada.")

    agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(response_generator=respond),
                          system_prompt="You are helpful.")
    memory = HTMMemory.from_defaults(htm=htm, session_id="agent", token_limit=300,
                                     shared_tags=("kb",))
    response = await agent.run(user_msg="Where does Ada live?", memory=memory)
    assert "Noted, Ada." in str(response)
    assert any("lives in Lisbon" in (m.content or "") for m in seen[-1])
    roles = [m.role for m in await memory.aget_all()]
    assert roles == [MessageRole.USER, MessageRole.ASSISTANT]
    assert htm.recall("Where does Ada live", limit=5, strategy="fulltext")


async def test_agent_tool_calls_stay_in_the_conversation_only(htm: HTM) -> None:
    def lookup_weather(city: str = "Porto") -> str:
        """The weather in a city."""
        return f"It is sunny in {city}."

    agent = FunctionAgent(tools=[FunctionTool.from_defaults(lookup_weather)],
                          llm=MockFunctionCallingLLM())  # calls every tool, then answers
    memory = HTMMemory.from_defaults(htm=htm, session_id="tools", token_limit=400)
    await agent.run(user_msg="What is the weather in Porto?", memory=memory)
    roles = [m.role for m in memory.get_all()]
    assert roles == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL,
                     MessageRole.ASSISTANT]
    assert memory.get_all()[2].content == "It is sunny in Porto."
    # Stored long-term: the user's text and the final answer; not the text-less tool call
    # nor the tool output (store_roles), which stay in the conversation.
    assert htm.stats().long_term_total == 2
    window = memory.get(input="weather")
    assert window[-2].role == MessageRole.TOOL and window[0].role != MessageRole.TOOL


def test_reset_clears_working_memory_only(htm: HTM) -> None:
    memory = HTMMemory.from_defaults(htm=htm, token_limit=500)
    memory.put(ChatMessage(role="user", content="Remember that the wifi password is on the fridge"))
    memory.put(ChatMessage(role="assistant", content="I will remember the fridge"))
    before = htm.stats()
    assert before.working_memory_count == 2 and before.long_term_total == 2
    memory.reset()
    after = htm.stats()
    assert memory.get_all() == []
    assert after.working_memory_count == 0
    assert after.long_term_total == 2 and after.forgotten == 0
    hits = htm.recall("wifi password", limit=1)
    assert hits[0].memory.content == "Remember that the wifi password is on the fridge"


def test_budget_rules(htm: HTM) -> None:
    memory = HTMMemory.from_defaults(htm=htm, token_limit=20)
    with pytest.raises(InvalidBudgetError, match="token_limit"):
        memory.get(initial_token_count=20)
    with pytest.raises(InvalidBudgetError, match="non-negative"):
        memory.get(initial_token_count=-1)
    big = ChatMessage(role="user", content=" ".join(["word"] * 60))
    memory.put(big)
    assert memory.get() == [big]  # the newest message alone, for the LLM to report
    with pytest.raises(ValidationError, match=r"htm_core\.HTM"):
        HTMMemory(htm="not an htm")


def test_set_and_chat_history_do_not_duplicate(htm: HTM) -> None:
    history = [ChatMessage(role="user", content="I live in Porto"),
               ChatMessage(role="assistant", content="Porto is lovely"),
               ChatMessage(role="system", content="not stored")]
    memory = HTMMemory.from_defaults(htm=htm, chat_history=history, token_limit=500)
    assert htm.stats().long_term_total == 2
    memory.set([*history, ChatMessage(role="user", content="And I work in Braga")])
    assert htm.stats().long_term_total == 3
    assert [m.content for m in memory.get_all()][-1] == "And I work in Braga"
    from_llm = HTMMemory.from_defaults(htm=htm, llm=MockLLMWithChatMemoryOfLastCall())
    assert from_llm.token_limit == int(from_llm_window() * 0.75)


def from_llm_window() -> int:
    return MockLLMWithChatMemoryOfLastCall().metadata.context_window


async def test_async_twins(htm: HTM) -> None:
    memory = HTMMemory.from_defaults(htm=htm, token_limit=300)
    await memory.aput(ChatMessage(role="user", content="Blue is my favourite colour"))
    await memory.aput_messages([ChatMessage(role="assistant", content="Blue, noted")])
    assert len(await memory.aget_all()) == 2
    got = await memory.aget(input="favourite colour")
    assert [m.role for m in got] == [MessageRole.USER, MessageRole.ASSISTANT]
    await memory.aset([ChatMessage(role="user", content="Green now, actually")])
    got = await memory.aget(input="favourite colour")
    assert "Blue is my favourite colour" in (got[0].content or "")
    await memory.areset()
    assert await memory.aget_all() == [] and htm.stats().working_memory_count == 0


async def test_memory_block_joins_llama_index_memory(htm: HTM) -> None:
    htm.add("The office plants are watered on Mondays", importance=5.0, tags=["kb"])
    block = HTMMemoryBlock(htm=htm, recall_limit=3, priority=1, shared_tags=("kb",))
    memory = Memory.from_defaults(session_id="blk", token_limit=120, token_flush_size=40,
                                  chat_history_token_ratio=0.5, memory_blocks=[block])
    await memory.aput(ChatMessage(role="user", content="My locker number is 4417."))
    await memory.aput(ChatMessage(role="assistant", content="Locker 4417, got it."))
    for _ in range(3):
        await memory.aput(ChatMessage(role="user", content=FILLER))
        await memory.aput(ChatMessage(role="assistant", content="Gutenberg, around 1440."))
    stored = htm.recall("locker number", limit=5, strategy="fulltext")
    assert any(h.memory.content == "My locker number is 4417." for h in stored)  # flushed
    assert stored[0].memory.metadata["session_id"] == "blk"

    got = await memory.aget(input="What is my locker number?")
    system = got[0]
    assert system.role == MessageRole.SYSTEM
    assert "<long_term_memory>" in (system.content or "")
    assert "My locker number is 4417." in (system.content or "")
    plants = await memory.aget(input="When are the plants watered?")
    assert "watered on Mondays" in (plants[0].content or "")

    truncated = await block.atruncate("- a b c\n- d e f\n- g h i", 4)
    assert truncated is not None and truncated.count("\n") < 2
    assert await block.atruncate("- a", 100) is None
