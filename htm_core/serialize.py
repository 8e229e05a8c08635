"""One way to turn htm's data types into JSON-ready dicts.

The CLI, the export format, the MCP server and every framework adapter use these functions
(:func:`memory_to_dict`, :func:`hit_to_dict`, :func:`memory_metadata`...), so a memory looks
the same wherever it leaves htm. They are pure: no I/O, no store. Times become ISO 8601
strings in UTC, tags become lists, and nothing in the result needs a custom JSON encoder
except what a caller put into ``metadata`` or ``Stats.extra`` itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from .models import Context, Hit, Memory, Robot, Stats

__all__ = [
    "context_to_dict",
    "hit_to_dict",
    "iso",
    "memory_metadata",
    "memory_to_dict",
    "memory_to_record",
    "robot_to_dict",
    "stats_to_dict",
]


def iso(when: datetime | None) -> str | None:
    """``when`` as an ISO 8601 string in UTC; ``None`` stays ``None``.

    >>> from datetime import datetime, timedelta, timezone
    >>> iso(datetime(2024, 5, 15, 14, 0, tzinfo=timezone(timedelta(hours=2))))
    '2024-05-15T12:00:00+00:00'
    >>> iso(None) is None
    True
    """
    return when.astimezone(timezone.utc).isoformat() if when is not None else None


def memory_to_record(memory: Memory, *, include_embedding: bool = False) -> dict[str, Any]:
    """The portable part of a memory: one line of an export file.

    Keys, in this order: ``key``, ``content``, ``robot``, ``importance``, ``token_count``,
    ``created_at``, ``last_accessed``, ``access_count``, ``tags``, ``metadata``,
    ``forgotten_at``; then ``kind``, ``source`` and ``confidence`` unless they are
    ``episodic``, None and None (so the line of such a memory reads in every htm); with
    ``include_embedding`` (and an embedding computed) also
    ``embedding`` and ``embedder``. No store id and no per-process state: a record means
    the same in any store.

    >>> from datetime import datetime, timezone
    >>> from htm_core.models import Memory
    >>> when = datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc)
    >>> m = Memory(id=1, key="k", content="text", robot="r", created_at=when,
    ...            last_accessed=when, embedding=[0.5, 1.0], embedder="hashing:4")
    >>> list(memory_to_record(m))  # doctest: +NORMALIZE_WHITESPACE
    ['key', 'content', 'robot', 'importance', 'token_count', 'created_at',
     'last_accessed', 'access_count', 'tags', 'metadata', 'forgotten_at']
    >>> memory_to_record(m, include_embedding=True)["embedding"]
    [0.5, 1.0]
    """
    record: dict[str, Any] = {
        "key": memory.key,
        "content": memory.content,
        "robot": memory.robot,
        "importance": memory.importance,
        "token_count": memory.token_count,
        "created_at": iso(memory.created_at),
        "last_accessed": iso(memory.last_accessed),
        "access_count": memory.access_count,
        "tags": list(memory.tags),
        "metadata": memory.metadata,
        "forgotten_at": iso(memory.forgotten_at),
    }
    if (memory.kind, memory.source, memory.confidence) != ("episodic", None, None):
        record.update(kind=memory.kind, source=memory.source, confidence=memory.confidence)
    if include_embedding and memory.embedding is not None:
        record["embedding"] = [float(x) for x in memory.embedding]
        record["embedder"] = memory.embedder
    return record


def memory_to_dict(memory: Memory, *, include_embedding: bool = False) -> dict[str, Any]:
    """A memory as a JSON-ready dict: ``id``, the :func:`memory_to_record` fields (with
    ``kind``, ``source`` and ``confidence`` always), then ``forgotten`` (bool),
    ``in_working_memory`` (bool), ``version`` (1 until
    :meth:`~htm_core.HTM.update` makes another) and ``superseded_at`` (ISO 8601 for a
    superseded version, else None).

    >>> from datetime import datetime, timezone
    >>> from htm_core.models import Memory
    >>> when = datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc)
    >>> d = memory_to_dict(Memory(id=3, key="k", content="text", robot="r",
    ...                           created_at=when, last_accessed=when))
    >>> d["id"], d["created_at"], d["forgotten"], d["in_working_memory"], d["version"]
    (3, '2024-05-15T12:00:00+00:00', False, False, 1)
    """
    return {"id": memory.id, **memory_to_record(memory, include_embedding=include_embedding),
            "kind": memory.kind, "source": memory.source, "confidence": memory.confidence,
            "forgotten": memory.forgotten_at is not None,
            "in_working_memory": memory.in_working_memory, "version": memory.version,
            "superseded_at": iso(memory.superseded_at)}


def hit_to_dict(hit: Hit, *, compact: bool = False) -> dict[str, Any]:
    """A recall hit: ``score`` followed by :func:`memory_to_dict` of its memory.

    ``compact=True`` gives the short line ``htm recall --json`` prints: ``key``,
    ``score``, ``content``, ``importance``, ``robot``, ``created_at``, ``tags``,
    ``kind``, ``version`` and ``superseded`` (True for an old version, from
    ``recall(..., include_history=True)``).
    """
    if compact:
        m = hit.memory
        return {"key": m.key, "score": hit.score, "content": m.content,
                "importance": m.importance, "robot": m.robot,
                "created_at": iso(m.created_at), "tags": list(m.tags), "kind": m.kind,
                "version": m.version,
                "superseded": m.superseded}
    return {"score": hit.score, **memory_to_dict(hit.memory)}


def memory_metadata(memory: Memory, score: float | None = None, *,
                    tags: Iterable[str] | None = None) -> dict[str, Any]:
    """The metadata every htm adapter attaches to a memory it hands to a framework.

    Keys: ``id``, ``key``, ``score`` (None when the memory was not found by recall),
    ``importance``, ``created_at`` (ISO 8601, UTC), ``robot``, ``tags`` (a list:
    the memory's tags, or ``tags`` when given, for an adapter that hides its own
    bookkeeping tags) and ``kind``.

    >>> from datetime import datetime, timezone
    >>> from htm_core.models import Hit, Memory
    >>> when = datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc)
    >>> m = Memory(id=7, key="pref-vim", content="User prefers Vim", robot="assistant",
    ...            importance=9.0, created_at=when, last_accessed=when, tags=("user",))
    >>> meta = memory_metadata(m, score=0.5)
    >>> list(meta)
    ['id', 'key', 'score', 'importance', 'created_at', 'robot', 'tags', 'kind']
    >>> meta["created_at"], meta["tags"]
    ('2024-05-15T12:00:00+00:00', ['user'])
    >>> hit_to_dict(Hit(memory=m, score=0.5), compact=True)["created_at"]
    '2024-05-15T12:00:00+00:00'
    """
    return {
        "id": memory.id,
        "key": memory.key,
        "score": score,
        "importance": memory.importance,
        "created_at": iso(memory.created_at),
        "robot": memory.robot,
        "tags": list(memory.tags if tags is None else tags),
        "kind": memory.kind,
    }


def context_to_dict(context: Context) -> dict[str, Any]:
    """An assembled context: ``text``, ``tokens``, ``strategy``, ``max_tokens``,
    ``budget`` and ``keys`` (the memories' keys, in order).

    >>> from htm_core.models import Context
    >>> context_to_dict(Context(text="", memories=(), tokens=0, strategy="balanced",
    ...                         max_tokens=100, budget=90))
    {'text': '', 'tokens': 0, 'strategy': 'balanced', 'max_tokens': 100, 'budget': 90, 'keys': []}
    """
    return {
        "text": context.text,
        "tokens": context.tokens,
        "strategy": context.strategy,
        "max_tokens": context.max_tokens,
        "budget": context.budget,
        "keys": list(context.keys),
    }


def stats_to_dict(stats: Stats, *, utilisation: bool = True) -> dict[str, Any]:
    """Every field of :meth:`HTM.stats <htm_core.HTM.stats>`, by name, plus
    ``working_memory_utilisation`` (0 to 1, six decimals) unless ``utilisation=False``
    (``htm stats --json`` prints the fields alone): :meth:`Stats.to_dict
    <htm_core.models.Stats.to_dict>`, plain JSON values.
    """
    out = stats.to_dict()
    if not utilisation:
        del out["working_memory_utilisation"]
    return out


def robot_to_dict(robot: Robot) -> dict[str, Any]:
    """A robot: ``name``, ``created_at``, ``last_active`` (ISO 8601 or None) and
    ``memory_count``."""
    return {"name": robot.name, "created_at": iso(robot.created_at),
            "last_active": iso(robot.last_active), "memory_count": robot.memory_count}
