"""How htm memories and LlamaIndex chat messages meet: one message's text, one memory's line.

Shared by :class:`~htm_integrations.llama_index.HTMMemory` and
:class:`~htm_integrations.llama_index.HTMMemoryBlock`.
"""

from __future__ import annotations

from llama_index.core.base.llms.types import ChatMessage

from htm_core import Memory

__all__ = ["DEFAULT_MEMORY_HEADER", "memory_line", "message_text"]

#: The first line of the system message that carries the other memories of a context.
DEFAULT_MEMORY_HEADER = "Relevant memories (recalled from long-term memory):"


def message_text(message: ChatMessage) -> str:
    """The text of a message (its text blocks joined), ``""`` when it has none."""
    content = message.content
    return content if isinstance(content, str) else ""


def memory_line(memory: Memory) -> str:
    """One memory as one line of the memory message: ``- [role] content``.

    Line breaks inside the content become spaces, so one line is always one memory.
    """
    role = memory.metadata.get("role") if isinstance(memory.metadata, dict) else None
    prefix = f"[{role}] " if isinstance(role, str) and role else ""
    return f"- {prefix}{' '.join(memory.content.split())}"
