"""A LlamaIndex chat engine with htm memory that outlives the process.

Run it::

    pip install -e ".[llamaindex]"    # in a clone of the repository
    python examples/llamaindex_chat.py

With ``HTM_EXAMPLE_MODEL`` set to ``"ollama:<model>"`` (needs ``llama-index-llms-ollama``)
or ``"openai:<model>"`` (needs ``llama-index-llms-openai`` and an API key) the engine runs
on that model; without it, on a small offline stand-in (``KeywordLLM`` below) so the script
always runs.

User "ada" tells the engine something on Monday. Then everything is closed, as if the
program ended; a new ``HTM`` on the same database and a new engine (a new session) answer
her question on Friday from what htm kept.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import LLM, CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback

from htm_core import HTM
from htm_integrations.llama_index import HTMMemory


class KeywordLLM(CustomLLM):
    """An offline stand-in for an LLM (no provider configured): it answers with the
    earlier lines of its prompt (htm's memory, the history) that share a word with the
    question, or "Noted." when none does."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="keyword-stand-in", is_chat_model=True)

    @llm_chat_callback()
    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        question = messages[-1].content or ""
        words = set(re.findall(r"[a-z]{4,}", question.lower()))
        lines = [line.strip("- ") for m in messages[:-1] for line in (m.content or "").splitlines()
                 if words & set(re.findall(r"[a-z]{4,}", line.lower()))]
        answer = f"From memory: {lines[0]}" if lines else "Noted."
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=answer))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.chat([ChatMessage(content=prompt)]).message.content)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False,
                        **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)


def language_model() -> LLM:
    provider, _, model = os.environ.get("HTM_EXAMPLE_MODEL", "").partition(":")
    if provider == "ollama":
        from llama_index.llms.ollama import Ollama

        return Ollama(model=model, request_timeout=120)
    if provider == "openai":
        from llama_index.llms.openai import OpenAI

        return OpenAI(model=model)
    return KeywordLLM()


def chat_once(database: Path, session: str, text: str) -> str:
    """One run of the program: a fresh HTM and engine, one message, everything closed."""
    with HTM(robot="assistant", database_url=str(database)) as htm:
        memory = HTMMemory.from_defaults(htm=htm, session_id=session, user_id="ada")
        engine = SimpleChatEngine.from_defaults(llm=language_model(), memory=memory)
        return str(engine.chat(text))


def main() -> None:
    database = Path(tempfile.mkdtemp()) / "chat.db"
    for session, text in [("monday", "I prefer Vim keybindings in every editor."),
                          ("friday", "Which keybindings do I prefer?")]:
        print(f"[{session}] ada: {text}")
        print(f"[{session}] engine: {chat_once(database, session, text)}")


if __name__ == "__main__":
    main()
