"""Digests written by hand in the shape of docs/consolidation.md (for tests and benchmarks
that must not depend on how a digest's text is chosen): a day digest holds the first
``words`` words of each of its memories, a week the first of each day, a month of each
week; keys, tags, ``created_at`` and ``metadata["digest"]`` as ``HTM.consolidate`` writes
them."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from htm_core import HTM, Memory
from htm_core.consolidation import Period, parent, period_of

__all__ = ["write_digests"]


def _text(parts: list[str], words: int) -> str:
    return " ".join(" ".join(p.split()[:words]) for p in parts)


def _write(htm: HTM, period: Period, prefix: str, tags: list[str], scope: str,
           sources: list[Memory], words: int) -> Memory:
    meta = {"period": period.key, "kind": period.kind, "label": period.label, "tz": period.tz,
            "start": period.start.isoformat(), "end": period.end.isoformat(), "scope": scope,
            "strategy": "by-hand", "sources": [{"id": m.id, "key": m.key} for m in sources],
            "children": [m.key for m in sources] if period.kind != "day" else []}
    return htm.add(_text([m.content for m in sources], words), key=f"{prefix}digest:{period.key}",
                   tags=[*tags, "digest"], created_at=period.start, metadata={"digest": meta})


def write_digests(htm: HTM, *, tag: str | None = None, before: datetime | None = None,
                  words: int = 40, tz: str = "UTC") -> list[Memory]:
    """Day, week and month digests of the memories (carrying ``tag``, when given) created
    before ``before``; a scoped digest's key starts ``<tag>:``. Returns them, days first."""
    memories: list[Memory] = []
    cursor = None
    while True:
        page = htm.list(tags=tag, limit=1000, cursor=cursor)
        memories += [m for m in page.memories if "digest" not in m.metadata
                     and (before is None or m.created_at < before)]
        cursor = page.next_cursor
        if cursor is None:
            break
    prefix, tags, scope = (f"{tag}:", [tag], tag) if tag else ("", [], "robot")
    written: list[Memory] = []
    level: dict[Period, list[Memory]] = defaultdict(list)
    for m in memories:
        level[period_of(m.created_at, "day", tz)].append(m)
    for _ in ("day", "week", "month"):
        up: dict[Period, list[Memory]] = defaultdict(list)
        for period in sorted(level, key=lambda p: p.start):
            digest = _write(htm, period, prefix, tags, scope, level[period], words)
            written.append(digest)
            above = parent(period)
            if above is not None:
                up[above].append(digest)
        level = up
    return written


def digest_meta(memory: Memory) -> dict[str, Any]:
    """A digest's ``metadata["digest"]``."""
    info: dict[str, Any] = memory.metadata["digest"]
    return info
