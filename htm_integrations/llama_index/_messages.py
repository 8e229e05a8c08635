"""How htm memories and LlamaIndex chat messages meet: one message's text, one memory's
line, and the kinds recalled.

Shared by :class:`~htm_integrations.llama_index.HTMMemory`,
:class:`~htm_integrations.llama_index.HTMMemoryBlock` and (``recall_kinds``)
:class:`~htm_integrations.llama_index.HTMVectorStore`.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage

from htm_core import Memory
from htm_core.consolidation import KINDS, check_kinds
from htm_core.errors import ValidationError

__all__ = ["DEFAULT_MEMORY_HEADER", "memory_line", "message_text", "recall_kinds"]

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


def recall_kinds(kinds: Any, owner: str) -> tuple[str, ...] | None:
    """A kind filter as :func:`~htm_core._provenance.check_kinds` reads it (None: every
    kind but ``digest``), its error told as ``owner``'s ``kinds``."""
    try:
        return check_kinds(kinds) or None
    except ValidationError:
        raise ValidationError(
            f"{owner} kinds must be a kind or a non-empty list of kinds among "
            f"{', '.join(KINDS)}; got {kinds!r:.80}. Leave it out (None) for every kind but "
            "digest.") from None
