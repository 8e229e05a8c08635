"""``HTMChatMessageHistory``: durable, ordered conversations for ``RunnableWithMessageHistory``.

Real htm databases (a SQLite file, and every backend in ``BACKENDS``), LangChain's
``RunnableWithMessageHistory`` and its ``GenericFakeChatModel``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from htm_core import HTM
from htm_core.errors import ConfirmationRequiredError, ValidationError
from htm_integrations.langchain import HTMChatMessageHistory


def test_messages_survive_a_restart_in_order(store_url: str,
                                             htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    history = HTMChatMessageHistory(htm=htm, session_id="s-1")
    tool_call = AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"q": "x"},
                                                   "id": "call-1"}])
    sent: list[BaseMessage] = [SystemMessage("Be brief."), HumanMessage("hi"),
                               AIMessage("hello"), HumanMessage("hi"), tool_call,
                               AIMessage("hello")]
    history.add_messages(sent[:3])
    history.add_messages(sent[3:])
    htm.close()

    again = htm_factory(database_url=store_url)
    restored = HTMChatMessageHistory(htm=again, session_id="s-1").messages
    assert restored == sent
    assert restored[4].tool_calls[0]["name"] == "lookup"
    # identical words are distinct memories, numbered in order
    keys = [again.retrieve(f"chat:s-1:{n:08d}") for n in range(6)]
    assert [m.content for m in keys if m] == ["System: Be brief.", "Human: hi", "AI: hello",
                                              "Human: hi", "AI: (no text)", "AI: hello"]
    assert keys[1] is not None and keys[3] is not None and keys[1].id != keys[3].id
    assert keys[1].metadata["role"] == "human" and keys[1].metadata["seq"] == 1
    assert set(keys[1].tags) == {"chat:session:s-1", "chat:role:human"}


def test_sessions_are_separate_and_odd_ids_are_hashed(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    a = HTMChatMessageHistory(htm=htm, session_id="alice@example.com")
    b = HTMChatMessageHistory(htm=htm, session_id="bob")
    a.add_user_message("I am Alice")
    b.add_user_message("I am Bob")
    a.add_ai_message("Hi Alice")
    assert [m.content for m in a.messages] == ["I am Alice", "Hi Alice"]
    assert [m.content for m in b.messages] == ["I am Bob"]
    assert a.slug.startswith("h-") and "@" not in a.key_for(0)
    memory = htm.retrieve(a.key_for(0))
    assert memory is not None and memory.metadata["session_id"] == "alice@example.com"
    with pytest.raises(ValidationError, match="session_id"):
        HTMChatMessageHistory(htm=htm, session_id="")


def test_clear_forgets_recoverably_and_numbering_continues(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    history = HTMChatMessageHistory(htm=htm, session_id="s")
    history.add_messages([HumanMessage("my locker code is 4711"), AIMessage("noted")])
    history.clear()
    assert history.messages == []
    assert htm.recall("locker code", tags=["chat:session:s"]) == []
    history.add_user_message("new topic")
    assert [m.content for m in history.messages] == ["new topic"]
    assert htm.retrieve("chat:s:00000002") is not None
    htm.restore("chat:s:00000000")
    assert [m.content for m in history.messages] == ["my locker code is 4711", "new topic"]
    with pytest.raises(ConfirmationRequiredError):
        htm.purge()


def test_purged_gap_is_stepped_over(htm_factory: Callable[..., HTM]) -> None:
    """After clear + purge the numbering restarts where nothing is left, and live
    messages behind a purged gap are still listed."""
    htm = htm_factory()
    history = HTMChatMessageHistory(htm=htm, session_id="gap")
    history.add_messages([HumanMessage(f"old {i}") for i in range(5)])
    history.clear()
    history.add_messages([HumanMessage("live one"), AIMessage("live two")])
    assert htm.purge(confirm=True) == 5
    assert [m.content for m in history.messages] == ["live one", "live two"]
    history.add_user_message("after the gap")
    assert [m.content for m in history.messages] == ["live one", "live two", "after the gap"]
    assert htm.retrieve("chat:gap:00000007") is not None


def test_bad_messages_are_rejected_whole(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    history = HTMChatMessageHistory(htm=htm, session_id="s")
    with pytest.raises(ValidationError, match="BaseMessage"):
        history.add_messages([HumanMessage("fine"), "not a message"])  # type: ignore[list-item]
    with pytest.raises(ValidationError):
        history.add_messages([HumanMessage("fine"), HumanMessage("nul \x00 inside")])
    assert history.messages == []


async def test_async_twins(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    history = HTMChatMessageHistory(htm=htm, session_id="async")
    await history.aadd_messages([HumanMessage("ping"), AIMessage("pong")])
    assert [m.content for m in await history.aget_messages()] == ["ping", "pong"]
    await history.aclear()
    assert await history.aget_messages() == []


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_runnable_with_message_history_end_to_end(store_url: str,
                                                  htm_factory: Callable[..., HTM]) -> None:
    """A prompt | fake chat model chain wrapped in RunnableWithMessageHistory; the second
    turn's prompt holds the first turn, also after a restart."""
    htm = htm_factory()
    seen: list[list[BaseMessage]] = []

    class RecordingChat(GenericFakeChatModel):
        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            seen.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

    prompt = ChatPromptTemplate.from_messages([
        ("system", "You are a helpful assistant."),
        MessagesPlaceholder("history"),
        ("human", "{question}"),
    ])
    model = RecordingChat(messages=iter([AIMessage("Nice to meet you, Ada."),
                                         AIMessage("Your name is Ada."),
                                         AIMessage("Still Ada.")]))

    def wrap(memory: HTM) -> RunnableWithMessageHistory:
        return RunnableWithMessageHistory(
            prompt | model,
            lambda session_id: HTMChatMessageHistory(htm=memory, session_id=session_id),
            input_messages_key="question", history_messages_key="history")

    config = {"configurable": {"session_id": "ada"}}
    chain = wrap(htm)
    assert chain.invoke({"question": "I am Ada"}, config=config).content == \
        "Nice to meet you, Ada."
    assert chain.invoke({"question": "What is my name?"}, config=config).content == \
        "Your name is Ada."
    assert [m.content for m in seen[1]] == [
        "You are a helpful assistant.", "I am Ada", "Nice to meet you, Ada.", "What is my name?"]
    htm.close()

    restarted = wrap(htm_factory(database_url=store_url))
    restarted.invoke({"question": "And now?"}, config=config)
    assert [m.content for m in seen[2]][1:5] == [
        "I am Ada", "Nice to meet you, Ada.", "What is my name?", "Your name is Ada."]
    stored = HTMChatMessageHistory(htm=htm_factory(database_url=store_url), session_id="ada")
    assert len(stored.messages) == 6


def test_reading_a_session_is_one_listing_not_a_probe_per_message(
        htm_factory: Callable[..., HTM], monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading or appending to a 60-message session asks the store for one page of the
    session (``HTM.list``), never one key per message."""
    htm = htm_factory()
    history = HTMChatMessageHistory(htm=htm, session_id="long")
    history.add_messages([HumanMessage(f"message number {i}") for i in range(60)])
    HTMChatMessageHistory(htm=htm, session_id="longer").add_user_message("another session")
    calls = {"get": 0, "list_memories": 0}
    store = htm.store
    for name in calls:
        original = getattr(store, name)

        def counted(*args: Any, _name: str = name, _original: Any = original,
                    **kwargs: Any) -> Any:
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(store, name, counted)
    again = HTMChatMessageHistory(htm=htm, session_id="long")
    assert [m.content for m in again.messages] == [f"message number {i}" for i in range(60)]
    again.add_ai_message("and one more")
    assert calls == {"get": 0, "list_memories": 2}
    assert htm.get(again.key_for(60)) is not None
