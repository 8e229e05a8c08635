"""``HTMMiddleware`` and ``htm_tools`` in real ``langchain.agents.create_agent`` agents.

The agent, its tool node and LangGraph's ``InMemorySaver`` checkpointer are LangChain's own;
the chat model is :class:`tests.fake_chat.RecordingChatModel` (scripted, tool calling,
recording every request: no provider runs offline). htm runs on every backend with the
hashing embedder and the tiktoken counter.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from htm_core import HTM
from htm_core.errors import ValidationError
from htm_integrations.langchain import HTMMiddleware, htm_tools
from htm_integrations.langchain.middleware import BLOCK_END, BLOCK_START
from tests.fake_chat import RecordingChatModel, tool_call


class UserContext(TypedDict):
    """The run context of these agents (the middleware reads its ``user_id``)."""

    user_id: str


BLOCK = re.compile(re.escape(BLOCK_START) + r".*?" + re.escape(BLOCK_END), re.S)


def block_of(system_text: str) -> str:
    found = BLOCK.search(system_text)
    return found.group(0) if found else ""


def ask(agent: Any, text: str, *, thread: str | None = None, user: str | None = None) -> dict:
    config = {"configurable": {"thread_id": thread}} if thread else None
    context = {"user_id": user} if user else None
    return agent.invoke({"messages": [{"role": "user", "content": text}]}, config,
                        context=context)


def stored(htm: HTM, tag: str) -> list[str]:
    return [m.content for m in htm.list(tags=[tag], limit=1000).memories]


def test_recalled_memory_reaches_the_model_within_the_budget(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    old = [{"content": f"Human: note {i} about gardening, tomatoes and the weather in spring",
            "tags": ["chat:user:ada:session:old"], "key": f"old-{i}"} for i in range(60)]
    htm.add_many([*old, {"content": "Human: my favourite colour is teal",
                         "tags": ["chat:user:ada:session:old"], "key": "teal"}])
    model = RecordingChatModel(replies=[AIMessage("Teal, you said.")])
    agent = create_agent(model, system_prompt="You are helpful.",
                         middleware=[HTMMiddleware(htm, max_tokens=200)],
                         checkpointer=InMemorySaver())
    ask(agent, "What is my favourite colour?", thread="new", user="ada")
    system = model.system_texts()[0]
    assert system.startswith("You are helpful.")
    block = block_of(system)
    assert "my favourite colour is teal" in block
    assert htm.token_counter.count(block) <= 200
    in_scope = "\n\n".join(m["content"] for m in old)
    assert htm.token_counter.count(in_scope) > 200  # the budget did cut something
    assert system.count(BLOCK_START) == 1


def test_tools_run_and_each_turn_is_stored_once_with_a_checkpointer(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    model = RecordingChatModel(replies=[
        tool_call("remember", {"content": "Ada's dog is called Rex"}, "c1"),
        AIMessage("Noted: your dog is Rex."),
        AIMessage("You're welcome."),
    ])
    agent = create_agent(model, tools=htm_tools(htm), middleware=[HTMMiddleware(htm)],
                         checkpointer=InMemorySaver(), context_schema=UserContext)
    ask(agent, "Remember that my dog is called Rex", thread="t1", user="ada")
    out = ask(agent, "Thanks!", thread="t1", user="ada")
    assert model.bound_tools == ["remember", "recall", "forget"]
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai", "human", "ai"]
    assert sorted(stored(htm, "chat:user:ada")) == sorted([
        "Human: Remember that my dog is called Rex", "Ada's dog is called Rex",
        "AI: Noted: your dog is Rex.", "Human: Thanks!", "AI: You're welcome."])
    # the tool's note is in the second run's block; the thread's own turns are not repeated
    block = block_of(model.system_texts()[-1])
    assert "Ada's dog is called Rex" in block
    assert "Human: Remember that my dog" not in block


def test_a_resent_history_without_a_checkpointer_is_not_stored_again(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    model = RecordingChatModel(replies=[AIMessage("Hi Ada."), AIMessage("Yes, Ada.")])
    agent = create_agent(model, middleware=[HTMMiddleware(htm, user_id="ada")])
    first = agent.invoke({"messages": [HumanMessage("I am Ada")]})
    agent.invoke({"messages": [*first["messages"], HumanMessage("Do you know me?")]})
    assert sorted(stored(htm, "chat:user:ada")) == sorted(
        ["Human: I am Ada", "AI: Hi Ada.", "Human: Do you know me?", "AI: Yes, Ada."])


def test_two_users_and_two_threads_do_not_see_each_other(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    model = RecordingChatModel(default="ok")
    agent = create_agent(model, middleware=[HTMMiddleware(htm)], checkpointer=InMemorySaver())
    ask(agent, "My locker code is 4711", thread="a1", user="ada")
    ask(agent, "What is my locker code?", thread="b1", user="bob")
    ask(agent, "What is my locker code?", thread="a2", user="ada")
    assert "4711" not in model.system_texts()[1]
    assert "4711" in block_of(model.system_texts()[2])
    # without users, each thread is its own scope
    ask(agent, "The door code is 1234", thread="x")
    ask(agent, "What is the door code?", thread="y")
    ask(agent, "Was there a door code?", thread="x")
    assert "1234" not in model.system_texts()[4]
    assert "1234" not in model.system_texts()[5]  # its own thread's turn is already there
    assert "The door code is 1234" in [m.text for m in model.calls[5]]
    assert stored(htm, "chat:session:x") == ["Human: The door code is 1234", "AI: ok",
                                             "Human: Was there a door code?", "AI: ok"]
    assert stored(htm, "chat:session:y") == ["Human: What is the door code?", "AI: ok"]


async def test_async_agent_recalls_and_stores(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    model = RecordingChatModel(default="ok")
    agent = create_agent(model, middleware=[HTMMiddleware(htm)], checkpointer=InMemorySaver())
    for thread, text in (("t1", "My bike is green"), ("t2", "What colour is my bike?")):
        await agent.ainvoke({"messages": [{"role": "user", "content": text}]},
                            {"configurable": {"thread_id": thread}},
                            context={"user_id": "ada"})
    assert "My bike is green" in block_of(model.system_texts()[1])
    assert stored(htm, "chat:user:ada:session:t2") == ["Human: What colour is my bike?", "AI: ok"]


def test_agents_of_two_robots_share_one_store(htm_factory: Callable[..., HTM]) -> None:
    planner, writer = htm_factory(robot="planner"), htm_factory(robot="writer")
    plan_model, write_model = RecordingChatModel(default="planned"), RecordingChatModel()
    create_agent(plan_model, middleware=[HTMMiddleware(planner)]).invoke(
        {"messages": [HumanMessage("The launch is on Friday")]}, context={"user_id": "ada"})
    shared = create_agent(write_model, middleware=[HTMMiddleware(writer)])
    own = create_agent(write_model, middleware=[HTMMiddleware(writer, recall_robot="writer")])
    shared.invoke({"messages": [HumanMessage("When is the launch?")]}, context={"user_id": "ada"})
    own.invoke({"messages": [HumanMessage("When is the launch?")]}, context={"user_id": "ada"})
    assert "The launch is on Friday" in block_of(write_model.system_texts()[0])
    assert "The launch is on Friday" not in write_model.system_texts()[1]
    assert {m.robot for m in planner.list(tags=["chat:user:ada"]).memories} == {
        "planner", "writer"}


def test_tool_chatter_is_stored_only_when_asked(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")

    def run(store_tools: bool, user: str) -> list[str]:
        model = RecordingChatModel(replies=[tool_call("recall", {"query": "tea"}, "c9"),
                                            AIMessage("Nothing yet.")])
        agent = create_agent(model, tools=htm_tools(htm), context_schema=UserContext,
                             middleware=[HTMMiddleware(htm, store_tool_messages=store_tools)])
        ask(agent, "What tea do I like?", user=user)
        return stored(htm, f"chat:user:{user}")

    assert run(False, "ada") == ["Human: What tea do I like?", "AI: Nothing yet."]
    chatty = run(True, "bob")
    assert [c.split(":")[0] for c in chatty] == ["Human", "AI", "Tool", "AI"]
    assert chatty[1] == "AI: (no text)"  # the tool call itself is kept in the metadata
    # the tool's answer is stored; it never holds the question being answered
    assert chatty[2] == "Tool: Nothing in memory matches 'tea'."


def test_only_user_turns_are_stored_when_asked(htm_factory: Callable[..., HTM]) -> None:
    """``store_assistant_turns=False``: answers quoting tool output never enter memory, so
    the next thread's recall finds what the user said, not the assistant's echo of it."""
    htm = htm_factory(robot="assistant")
    htm.add("Ada's tea is oolong", tags=["chat:user:Ada"], key="chat:user:Ada:key:tea")
    model = RecordingChatModel(replies=[
        tool_call("recall", {"query": "tea"}, "c1"),
        AIMessage("Your memory says: Ada's tea is oolong (score 0.9)."),
        AIMessage("Noted, green tea from now on."),
        AIMessage("Oolong, then green."),
    ])
    agent = create_agent(model, tools=htm_tools(htm), context_schema=UserContext,
                         middleware=[HTMMiddleware(htm, store_assistant_turns=False)],
                         checkpointer=InMemorySaver())
    ask(agent, "What tea do I like?", thread="t1", user="Ada")
    ask(agent, "I switched to green tea", thread="t1", user="Ada")
    assert stored(htm, "chat:user:Ada:session:t1") == [
        "Human: What tea do I like?", "Human: I switched to green tea"]
    assert stored(htm, "chat:user:ada") == []  # another user, by case only
    ask(agent, "Which tea?", thread="t2", user="Ada")
    block = block_of(model.system_texts()[-1])
    assert "Human: I switched to green tea" in block
    assert "Your memory says" not in block and "AI:" not in block


def test_user_turns_only_with_tool_messages(htm_factory: Callable[..., HTM]) -> None:
    """The two switches are independent: tool chatter kept, the final answer not."""
    htm = htm_factory(robot="assistant")
    model = RecordingChatModel(replies=[tool_call("recall", {"query": "tea"}, "c9"),
                                        AIMessage("Nothing yet.")])
    agent = create_agent(model, tools=htm_tools(htm), context_schema=UserContext,
                         middleware=[HTMMiddleware(htm, store_tool_messages=True,
                                                   store_assistant_turns=False)])
    ask(agent, "What tea do I like?", user="bob")
    kept = stored(htm, "chat:user:bob")
    assert [c.split(":")[0] for c in kept] == ["Human", "AI", "Tool"]
    assert kept[1] == "AI: (no text)" and "Nothing yet." not in " ".join(kept)


def test_forget_needs_confirmation_and_stays_in_scope(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    remember, recall, forget = htm_tools(htm, user_id="ada")
    note = remember.invoke({"content": "Ada's PIN hint is 'garden'"})
    key = re.search(r"\[(.+?)\]", note).group(1)
    assert remember.invoke({"content": "Ada's PIN hint is 'garden'"}) == note  # one memory
    bob_forget = htm_tools(htm, user_id="bob")[2]
    assert "No memory with key" in bob_forget.invoke({"key": key, "confirm": True})
    assert "About to forget" in forget.invoke({"key": key})
    assert htm.get(key) is not None
    assert "Forgotten" in forget.invoke({"key": key, "confirm": True})
    assert htm.get(key) is None and "Nothing in memory" in recall.invoke({"query": "PIN hint"})
    assert "empty" in remember.invoke({"content": "   "}).lower()  # htm's error, for the model


@pytest.mark.parametrize("kwargs", [{"max_tokens": 10}, {"recall_limit": 0},
                                    {"store_tool_messages": "yes"},
                                    {"store_assistant_turns": "no"}, {"user_key": ""}])
def test_bad_settings_are_refused(htm_factory: Callable[..., HTM],
                                  kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        HTMMiddleware(htm_factory(), **kwargs)


def test_a_misspelt_setting_is_refused(htm_factory: Callable[..., HTM]) -> None:
    with pytest.raises(TypeError):
        HTMMiddleware(htm_factory(), max_token=100)  # type: ignore[call-arg]


def test_the_user_can_come_from_the_config_and_the_agent_can_stream(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    model = RecordingChatModel(default="ok")
    agent = create_agent(model, middleware=[HTMMiddleware(htm)], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1", "user_id": "ada"}}
    list(agent.stream({"messages": [HumanMessage("My cat is called Mio")]}, config))
    assert stored(htm, "chat:user:ada:session:t1") == ["Human: My cat is called Mio", "AI: ok"]
    agent.invoke({"messages": [HumanMessage("What is my cat called?")]},
                 {"configurable": {"thread_id": "t2", "user_id": "ada"}})
    assert "My cat is called Mio" in block_of(model.system_texts()[1])


def test_a_stored_user_turn_records_what_its_block_recalled(
        htm_factory: Callable[..., HTM]) -> None:
    """The keys of the memories the block held when the model answered a user turn are in
    that turn's metadata (``recalled``), exactly the block's; another user's (by case) are
    never among them."""
    htm = htm_factory(robot="assistant")
    htm.add("Ada's tea is oolong", tags=["chat:user:Ada"], key="chat:user:Ada:key:tea")
    htm.add("ada's tea is mint", tags=["chat:user:ada"], key="chat:user:ada:key:tea")
    model = RecordingChatModel(replies=[AIMessage("Oolong."), AIMessage("Still oolong.")])
    agent = create_agent(model, context_schema=UserContext, middleware=[HTMMiddleware(htm)],
                         checkpointer=InMemorySaver())
    ask(agent, "What tea do I like?", thread="t1", user="Ada")
    [turn] = [m for m in htm.list(tags=["chat:user:Ada:session:t1"], limit=10).memories
              if m.metadata.get("role") == "human"]
    assert "chat:user:Ada:key:tea" in turn.metadata["recalled"]
    assert "chat:user:ada:key:tea" not in turn.metadata["recalled"]
    held = [line for line in block_of(model.system_texts()[0]).splitlines()[1:-1] if line]
    assert len(turn.metadata["recalled"]) == len(
        [k for k in turn.metadata["recalled"] if htm.get(k).content in held])
    answers = [m for m in htm.list(tags=["chat:user:Ada:session:t1"], limit=10).memories
               if m.metadata.get("role") == "ai"]
    assert answers and all("recalled" not in m.metadata for m in answers)
