"""One ``HTM`` serving a LangChain chain and a LlamaIndex chat engine at the same time.

LangChain side: ``langchain_classic``'s ``ConversationChain`` with
``htm_integrations.langchain.HTMMemory`` and LangChain's ``FakeListLLM`` (its prompts are
captured by a callback). LlamaIndex side: ``SimpleChatEngine`` with
``htm_integrations.llama_index.HTMMemory`` and LlamaIndex's
``MockLLMWithChatMemoryOfLastCall``. htm runs on a real SQLite file.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("langchain_classic")

from langchain_classic.chains import ConversationChain
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake import FakeListLLM
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockLLMWithChatMemoryOfLastCall

from htm_core import HTM
from htm_integrations.langchain import HTMMemory as LangChainMemory
from htm_integrations.llama_index import HTMMemory as LlamaIndexMemory


class PromptRecorder(BaseCallbackHandler):
    """Keeps every prompt LangChain sends to the LLM."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any) -> None:
        self.prompts.extend(prompts)


def test_both_frameworks_see_both_conversations(htm_factory: Callable[..., HTM]) -> None:
    """One user (``user_id="ada"``), a session in each framework: both see both; another
    user's LlamaIndex memory sees neither."""
    htm = htm_factory(robot="assistant")
    recorder = PromptRecorder()
    chain = ConversationChain(
        llm=FakeListLLM(responses=["Sure."], callbacks=[recorder]),
        memory=LangChainMemory(htm=htm, user_id="ada", session_id="langchain", max_tokens=500))
    llm = MockLLMWithChatMemoryOfLastCall(max_tokens=3)
    engine = SimpleChatEngine.from_defaults(
        llm=llm, memory=LlamaIndexMemory.from_defaults(htm=htm, user_id="ada", session_id="llama",
                                                       token_limit=500))

    chain.invoke({"input": "My dog is named Biscuit."})
    engine.chat("I work as a lighthouse keeper.")

    engine.chat("What is my dog named?")
    sent = "\n".join(m.content or "" for m in llm.last_chat_messages or [])
    assert "My dog is named Biscuit." in sent  # said to LangChain, recalled in LlamaIndex

    chain.invoke({"input": "What do I work as?"})
    assert "lighthouse keeper" in recorder.prompts[-1]  # said to LlamaIndex, seen by LangChain

    sessions = {h.memory.metadata.get("session_id") for h in
                htm.recall("dog named Biscuit lighthouse keeper", limit=20, strategy="fulltext")}
    assert {"langchain", "llama"} <= sessions

    other = MockLLMWithChatMemoryOfLastCall(max_tokens=3)
    SimpleChatEngine.from_defaults(
        llm=other, memory=LlamaIndexMemory.from_defaults(htm=htm, user_id="bob", session_id="llama",
                                                         token_limit=500)
    ).chat("What is my dog named and what do I work as?")
    sent = "\n".join(m.content or "" for m in other.last_chat_messages or [])
    assert "Biscuit" not in sent and "lighthouse" not in sent


def test_concurrent_use_keeps_every_turn(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    chain = ConversationChain(llm=FakeListLLM(responses=["ok"]),
                              memory=LangChainMemory(htm=htm, session_id="lc", max_tokens=300))
    engine = SimpleChatEngine.from_defaults(
        llm=MockLLMWithChatMemoryOfLastCall(max_tokens=2),
        memory=LlamaIndexMemory.from_defaults(htm=htm, session_id="li", token_limit=300))

    def langchain_turns() -> None:
        for i in range(4):
            chain.invoke({"input": f"LangChain fact number {i} is zebra-{i}"})

    def llama_turns() -> None:
        for i in range(4):
            engine.chat(f"LlamaIndex fact number {i} is yak-{i}")

    with ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(langchain_turns), pool.submit(llama_turns)]:
            future.result()
    for i in range(4):
        assert htm.recall(f"zebra-{i}", limit=1, strategy="fulltext")[0].memory.content == \
            f"Human: LangChain fact number {i} is zebra-{i}"
        assert htm.recall(f"yak-{i}", limit=1, strategy="fulltext")[0].memory.content == \
            f"LlamaIndex fact number {i} is yak-{i}"
    assert htm.stats().long_term_total == 16  # 8 turns, each a human and an AI message
