"""What htm's agent tools do, written once for every framework: remember, recall, forget.

The LangChain and LlamaIndex ``htm_tools`` only wrap these functions. Each takes the
conversation scope (:class:`~htm_core.scope.ChatScope`) it works in and returns the text the
model reads; htm's errors propagate and the wrappers show their message to the model.
``remember`` keys a note by scope and text (:meth:`~htm_core.scope.ChatScope.note_key`),
of the ``kind`` the model gives (else the kind htm's rules recognise); ``recall`` is hybrid
recall inside the scope, of the ``kinds`` the model names (default every kind but
``digest``), one line per memory with its key; ``forget`` shows what it would forget and
forgets (recoverably) only with ``confirm=True``, inside the scope. See docs/langchain.md.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from htm_core.consolidation import check_kinds
from htm_core.consolidation.kinds import KINDS, check_kind
from htm_core.errors import ValidationError
from htm_core.scoring import DEFAULT_MIN_SCORE, check_min_score
from htm_core.validation import check_importance, check_limit

from ._scope import ChatScope

__all__ = ["DESCRIPTIONS", "KINDS_HELP", "KIND_HELP", "NOTE_IMPORTANCE", "MemoryTools"]

#: The importance of a note the agent chose to remember (chat turns default to 1.0).
NOTE_IMPORTANCE = 5.0

DESCRIPTIONS = {
    "remember": ("Store a fact in long-term memory so it can be recalled in later "
                 "conversations (preferences, decisions, names, things to follow up). "
                 "Write it as one self-contained sentence."),
    "recall": ("Search long-term memory for what is relevant to a query; returns one line "
               "per memory, each with its [key]."),
    "forget": ("Forget one memory by its [key] (from recall). Call it first without confirm "
               "to see what would be forgotten; then, only if the user asked for it, call it "
               "again with confirm=true."),
}

#: The ``kind`` argument of ``remember`` and the ``kinds`` of ``recall``, as the model reads them.
KIND_HELP = (f"what it is, one of {', '.join(KINDS)}; default: recognised from the sentence")
KINDS_HELP = (f"only memories of these kinds ({', '.join(KINDS)}); default every kind "
              "but digest")


#: How many hits more than asked ``recall`` reads, at most, to make up for the ones it
#: leaves out as already in front of the model.
_SPARE = 20


def _checked(check: Callable[[Any], Any], value: Any, name: str, left_out: str) -> Any:
    """``check(value)``, its ``ValidationError`` told as the tool's argument ``name``
    (the core's message would name the core's default; ``left_out`` says the tool's)."""
    try:
        return check(value)
    except ValidationError:
        raise ValidationError(f"{name} must be {'one' if name == 'kind' else 'a non-empty list'}"
                              f" of {', '.join(KINDS)}; got {value!r:.80}. Leave it out "
                              f"{left_out}.") from None


class MemoryTools:
    """The three tool functions over one :class:`htm_core.HTM`.

    Args:
        htm: the memory the tools read and write (notes are written by its robot).
        recall_limit: how many memories ``recall`` returns at most (default 5).
        importance: the importance of a remembered note when the model gives none.
        recall_robot: recall only memories written by this robot (default every robot).
        min_score: ``recall`` leaves out hits scoring below this (0 to 1, default
            :data:`~htm_core.scoring.DEFAULT_MIN_SCORE`; None or 0 keeps every hit).
    """

    def __init__(self, htm: Any, *, recall_limit: int = 5, importance: float = NOTE_IMPORTANCE,
                 recall_robot: str | None = None,
                 min_score: float | None = DEFAULT_MIN_SCORE) -> None:
        self.htm = htm
        self.recall_limit = check_limit(recall_limit)
        self.importance = check_importance(importance)
        self.recall_robot = recall_robot
        self.min_score = check_min_score(min_score)

    def remember(self, scope: ChatScope, content: str, importance: float | None = None,
                 kind: Any = None) -> str:
        """Store ``content`` as a note of ``scope`` of ``kind`` (one of
        :data:`~htm_core.consolidation.KINDS`; None lets htm's rules decide); the reply
        names its key."""
        kind = None if kind is None else _checked(check_kind, kind, "kind",
                                                  "to let htm recognise it")
        if isinstance(content, str):
            content = content.strip()
        memory = self.htm.add(
            content, key=scope.note_key(content) if isinstance(content, str) else None,
            importance=self.importance if importance is None else importance,
            tags=[scope.tag, "chat:role:note"], metadata={"source": "agent-tool"}, kind=kind)
        return f"Remembered [{memory.key}]: {memory.content}"

    def recall(self, scope: ChatScope, query: str, limit: int | None = None,
               present: Collection[str] = (), keys: Collection[str] = (),
               kinds: Any = None) -> str:
        """What hybrid recall finds for ``query`` in ``scope`` among the memories of
        ``kinds`` (None: every kind but ``digest``), one line per memory, leaving
        out the stored turns of the messages whose ids are in ``present`` (the messages
        in front of the model, among them the question being answered) and the memories
        under ``keys``."""
        checked_kinds = _checked(check_kinds, kinds, "kinds", "for every kind but digest") or None
        limit = self.recall_limit if limit is None else min(check_limit(limit), self.recall_limit)
        spare = min(len(present) + len(keys), _SPARE)
        hits = self.htm.recall(query, limit=min(limit + spare, 10_000),
                               tags=scope.filter_tags(), robot=self.recall_robot,
                               min_score=self.min_score, kinds=checked_kinds)
        hits = [h for h in hits if h.memory.metadata.get("message_id") not in present
                and h.memory.key not in keys][:limit]
        if not hits:
            among = f" among the {', '.join(checked_kinds)} memories" if checked_kinds else ""
            return f"Nothing in memory matches {query!r}{among}."
        return "\n".join(f"- [{h.memory.key}] {h.memory.content} "
                         f"({h.memory.created_at:%Y-%m-%d})" for h in hits)

    def forget(self, scope: ChatScope, key: str, confirm: bool = False) -> str:
        """Show (``confirm=False``) or forget (``confirm=True``) the memory under ``key``."""
        memory = scope.find(self.htm.get, key)
        if memory is None:
            return f"No memory with key [{key}] here; recall first to find the key."
        if confirm is not True:
            return (f"About to forget [{memory.key}]: {memory.content!r}. If the user wants this "
                    "forgotten, call forget again with this key and confirm=true.")
        self.htm.forget(memory.key, confirm=True)
        return f"Forgotten [{memory.key}] (an operator can restore it)."
