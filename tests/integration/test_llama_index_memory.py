"""HTMMemory and HTMMemoryBlock driven by real LlamaIndex engines, agents and ``Memory``.

LLMs are LlamaIndex's own fakes (``MockLLMWithChatMemoryOfLastCall`` records the messages
it was sent; ``MockFunctionCallingLLM`` drives ``FunctionAgent``); htm runs on a real
SQLite file (and on PostgreSQL when the backend joins ``BACKENDS``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import CondensePlusContextChatEngine, SimpleChatEngine
from llama_index.core.llms.mock import MockFunctionCallingLLM, MockLLMWithChatMemoryOfLastCall
from llama_index.core.memory import Memory, StaticMemoryBlock
from llama_index.core.tools import FunctionTool

from htm_core import HTM, HashingEmbedder
from htm_core.clock import local_now
from htm_core.errors import InvalidBudgetError, ValidationError
from htm_integrations.llama_index import HTMEmbedding, HTMMemory, HTMMemoryBlock
from htm_integrations.llama_index.memory import DEFAULT_MEMORY_HEADER

ROOT = Path(__file__).resolve().parents[2]
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
    assert sent[0].content == "Be brief."
    assert tokens(htm, sent[1:]) <= 150
    turns = [m for m in sent if m.role in (MessageRole.USER, MessageRole.ASSISTANT)]
    # The window is what fits: not every filler turn, but the old turn recall brought back,
    # as the user's message, in the order it was said.
    assert sum(m.content == FILLER for m in turns) < 4
    said = [m.content for m in turns]
    assert "My cat is called Tiberius and he is ginger." in said
    assert said.index("My cat is called Tiberius and he is ginger.") == 0
    assert turns[-1].content == "What is my cat called?"
    assert turns[said.index("My cat is called Tiberius and he is ginger.")].role == \
        MessageRole.USER

    engine.chat("Which editor do I like?")
    recalled = memory_messages(llm.last_chat_messages or [])
    assert "Helix with Vim keybindings" in (recalled[0].content or "")
    # Every user and assistant turn is in long-term memory: 7 turns, 14 messages.
    turns_stored = [h for h in htm.recall("Tiberius", limit=50, strategy="fulltext")]
    assert any(h.memory.metadata == {"role": "user", "session_id": "s1", "source": "llama_index"}
               for h in turns_stored)
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


class RecordingModel:
    """The fake model of the agent tests: LlamaIndex's ``MockFunctionCallingLLM`` (a real
    ``FunctionCallingLLM``; only the answer is faked) answering through this recorder,
    which keeps every message list the agent sent it."""

    def __init__(self, answer: str = "Noted.") -> None:
        self.answer = answer
        self.seen: list[list[ChatMessage]] = []
        self.llm = MockFunctionCallingLLM(response_generator=self.respond)

    def respond(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.seen.append(list(messages))
        return ChatMessage(role="assistant", content=self.answer)


async def test_function_agent_gets_the_earlier_turn(htm: HTM) -> None:
    htm.add("The user's name is Ada and she lives in Lisbon", importance=7.0, tags=["kb"])
    model = RecordingModel("Noted, Ada.")
    agent = FunctionAgent(tools=[], llm=model.llm, system_prompt="You are helpful.")
    memory = HTMMemory.from_defaults(htm=htm, session_id="agent", shared_tags=("kb",))
    await agent.run(user_msg="My favourite colour is teal.", memory=memory)
    response = await agent.run(user_msg="Where does Ada live?", memory=memory)
    assert "Noted, Ada." in str(response)
    sent = model.seen[-1]
    assert [(m.role, m.content) for m in sent if m.role != MessageRole.SYSTEM] == [
        (MessageRole.USER, "My favourite colour is teal."),
        (MessageRole.ASSISTANT, "Noted, Ada."),
        (MessageRole.USER, "Where does Ada live?")]
    assert any("lives in Lisbon" in (m.content or "") for m in sent)  # shared knowledge
    roles = [m.role for m in await memory.aget_all()]
    assert roles == [MessageRole.USER, MessageRole.ASSISTANT] * 2


async def test_agent_workflow_with_two_agents_shares_the_conversation(htm: HTM) -> None:
    model = RecordingModel("Filed.")
    workflow = AgentWorkflow(agents=[
        FunctionAgent(name="clerk", description="Files notes.", llm=model.llm, tools=[],
                      can_handoff_to=["reviewer"]),
        FunctionAgent(name="reviewer", description="Reviews notes.", llm=model.llm, tools=[])],
        root_agent="clerk")
    memory = HTMMemory.from_defaults(htm=htm, user_id="ada", session_id="wf")
    await workflow.run(user_msg="Note that the invoice number is INV-2291.", memory=memory)
    await workflow.run(user_msg="What was the invoice number?", memory=memory)
    texts = [m.content or "" for m in model.seen[-1]]
    assert "Note that the invoice number is INV-2291." in texts
    assert [m.role for m in memory.get_all()] == [MessageRole.USER, MessageRole.ASSISTANT] * 2


async def test_agent_tool_calls_stay_with_the_run(htm: HTM) -> None:
    def lookup_weather(city: str = "Porto") -> str:
        """The weather in a city."""
        return f"It is sunny in {city}."

    agent = FunctionAgent(tools=[FunctionTool.from_defaults(lookup_weather)],
                          llm=MockFunctionCallingLLM())  # calls every tool, then answers
    memory = HTMMemory.from_defaults(htm=htm, session_id="tools")
    await agent.run(user_msg="What is the weather in Porto?", memory=memory)
    # Stored: the user's text and the final answer; not the text-less tool call nor the
    # tool output (store_roles), so no later model call gets a tool result without its call.
    assert [m.role for m in memory.get_all()] == [MessageRole.USER, MessageRole.ASSISTANT]
    assert htm.stats().long_term_total == 2
    window = memory.get(input="weather")
    assert MessageRole.TOOL not in [m.role for m in window]
    with pytest.raises(ValidationError, match="store_roles"):
        HTMMemory.from_defaults(htm=htm, store_roles=("user", "tool"))


RESTART_SCRIPT = """
import asyncio, sys
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM
from htm_core import HTM, HashingEmbedder
from htm_core.clock import local_now
from htm_integrations.llama_index import HTMMemory

def answer(messages, **kwargs):
    return ChatMessage(role="assistant", content="I will remember the blue door.")

async def main():
    with HTM(robot="assistant", database_url=sys.argv[1], embedder=HashingEmbedder()) as htm:
        memory = HTMMemory.from_defaults(htm=htm, user_id="ada", session_id="s1")
        agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(response_generator=answer))
        await agent.run(user_msg="My house is the one with the blue door.", memory=memory)

asyncio.run(main())
"""


async def test_conversation_continues_after_a_process_restart(
        store_url: str, htm_factory: Callable[..., HTM], tmp_path: Path) -> None:
    """One process talks and exits; a new process (a new HTM and HTMMemory on the same
    database, same user and session) gets the earlier turns back, with their roles."""
    script = tmp_path / "first_process.py"
    script.write_text(RESTART_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, str(script), store_url], check=True, env=env, cwd=ROOT,
                   timeout=300)
    htm = htm_factory(robot="assistant", clock=local_now)  # the real time, as the first process
    memory = HTMMemory.from_defaults(htm=htm, user_id="ada", session_id="s1")
    assert [(m.role, m.content) for m in memory.get_all()] == [
        (MessageRole.USER, "My house is the one with the blue door."),
        (MessageRole.ASSISTANT, "I will remember the blue door.")]
    model = RecordingModel("Blue door.")
    agent = FunctionAgent(tools=[], llm=model.llm)
    await agent.run(user_msg="Which door is mine?", memory=memory)
    assert [(m.role, m.content) for m in model.seen[-1] if m.role != MessageRole.SYSTEM] == [
        (MessageRole.USER, "My house is the one with the blue door."),
        (MessageRole.ASSISTANT, "I will remember the blue door."),
        (MessageRole.USER, "Which door is mine?")]
    other = HTMMemory.from_defaults(htm=htm_factory(robot="assistant", clock=local_now),
                                    user_id="ada",
                                    session_id="s1")  # a second object on the same store
    assert len(other.get_all()) == 4


def test_reset_clears_working_memory_only(htm: HTM) -> None:
    memory = HTMMemory.from_defaults(htm=htm, token_limit=500)
    memory.put(ChatMessage(role="user", content="Remember that the wifi password is on the fridge"))
    memory.put(ChatMessage(role="assistant", content="I will remember the fridge"))
    before = htm.stats()
    assert before.working_memory_count == 2 and before.long_term_total == 2
    memory.reset()
    after = htm.stats()
    assert HTMMemory.from_defaults(htm=htm, recall_limit=0).get() == []  # nothing resident
    assert after.working_memory_count == 0
    assert after.long_term_total == 2 and after.forgotten == 0
    assert len(memory.get_all()) == 2  # the stored conversation
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
    with pytest.raises(ValidationError, match=r"\['max_tokens'\].*did you mean 'token_limit'"):
        HTMMemory.from_defaults(htm=htm, max_tokens=100)  # misspelt: refused, not ignored
    with pytest.raises(ValidationError, match=r"\['recall_token_ratio'\]"):
        HTMMemory(htm=htm, recall_token_ratio=0.5)
    with pytest.raises(ValidationError, match=r"\['limit'\]"):
        HTMMemoryBlock(htm=htm, limit=3)


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
    assert htm.stats().working_memory_count == 0 and len(await memory.aget_all()) == 3


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


async def test_function_agent_with_memory_and_the_htm_block(htm: HTM) -> None:
    """LlamaIndex's own ``Memory`` with a ``StaticMemoryBlock`` and an ``HTMMemoryBlock``
    driving a ``FunctionAgent``: a turn of an earlier session (flushed into htm by that
    session's ``Memory``) reaches the model in the new session's memory section."""
    def memory(session: str) -> Memory:
        return Memory.from_defaults(
            session_id=session, token_limit=200, token_flush_size=40,
            chat_history_token_ratio=0.5, memory_blocks=[
                StaticMemoryBlock(name="core_info", static_content="The user is called Ada."),
                HTMMemoryBlock(htm=htm, user_id="ada", recall_limit=3, priority=1)])

    model = RecordingModel("Noted.")
    agent = FunctionAgent(tools=[], llm=model.llm)
    first = memory("monday")
    await agent.run(user_msg="My parking spot is number 31.", memory=first)
    for _ in range(3):
        await agent.run(user_msg=FILLER, memory=first)
    assert any(h.memory.content == "My parking spot is number 31."
               for h in htm.recall("parking spot", limit=5, strategy="fulltext"))
    await agent.run(user_msg="Which parking spot is mine?", memory=memory("tuesday"))
    system = "\n".join(m.content or "" for m in model.seen[-1] if m.role == MessageRole.SYSTEM)
    assert "The user is called Ada." in system
    assert "<long_term_memory>" in system and "My parking spot is number 31." in system
