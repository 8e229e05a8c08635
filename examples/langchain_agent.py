"""A LangChain 1.x agent with htm memory: ``create_agent`` + ``HTMMiddleware`` + ``htm_tools``.

Run it::

    pip install -e ".[langchain]"    # in a clone of the repository
    python examples/langchain_agent.py

With ``HTM_EXAMPLE_MODEL`` set to a LangChain model name (``"ollama:llama3.2"`` with
``langchain-ollama``, ``"openai:gpt-4.1-mini"`` with ``langchain-openai`` and an API key...),
the agent runs on that model through ``langchain.chat_models.init_chat_model``; without it,
on a small offline stand-in (``KeywordModel`` below) so the script always runs.

User "ada" tells the agent something in one thread; in a second thread (a new conversation,
nothing shared through the checkpointer) she asks about it, and the answer comes from htm.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from htm_core import HTM
from htm_integrations.langchain import HTMMiddleware, htm_tools


class KeywordModel(BaseChatModel):
    """An offline stand-in for a chat model (no provider configured).

    "Remember ..." makes it call the ``remember`` tool; a tool result is acknowledged; any
    other message is answered with the lines of htm's memory block that share a word with it.
    """

    @property
    def _llm_type(self) -> str:
        return "keyword-stand-in"

    def bind_tools(self, tools: Any, **kwargs: Any) -> KeywordModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(f"Done. ({last.content})")
        elif last.text.lower().startswith("remember "):
            reply = AIMessage("", tool_calls=[{"name": "remember", "id": f"call-{len(messages)}",
                                               "args": {"content": last.text[9:]}}])
        else:
            system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
            block = system.partition("<htm_memory>")[2].partition("</htm_memory>")[0]
            words = {w for w in re.findall(r"[a-z]{4,}", last.text.lower())}
            lines = [line.strip("- ") for line in block.splitlines()[1:]
                     if words & set(re.findall(r"[a-z]{4,}", line.lower()))]
            reply = AIMessage(f"From memory: {lines[0]}" if lines else "I don't know yet.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def chat_model() -> BaseChatModel:
    name = os.environ.get("HTM_EXAMPLE_MODEL")
    if not name:
        return KeywordModel()
    from langchain.chat_models import init_chat_model

    return init_chat_model(name)


def main() -> None:
    database = Path(tempfile.mkdtemp()) / "agent.db"
    with HTM(robot="assistant", database_url=str(database)) as htm:
        agent = create_agent(
            chat_model(),
            tools=htm_tools(htm),
            middleware=[HTMMiddleware(htm, max_tokens=1_000)],
            system_prompt="You are a helpful assistant. Use the remember tool for lasting facts.",
            checkpointer=InMemorySaver(),
        )
        for thread, text in [("monday", "Remember that I prefer Vim keybindings in every editor."),
                             ("friday", "Which keybindings do I prefer in my editor?")]:
            result = agent.invoke({"messages": [{"role": "user", "content": text}]},
                                  {"configurable": {"thread_id": thread, "user_id": "ada"}})
            print(f"[{thread}] ada: {text}")
            print(f"[{thread}] agent: {result['messages'][-1].text}")
        print(f"htm holds {htm.stats().long_term_total} memories in {database}")


if __name__ == "__main__":
    main()
