"""The Memories pages: browse and filter (``HTM.list``), search (read-only, through
:func:`htm_core.explain.explain_recall`), and one memory's page."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from htm_core.consolidation.kinds import KINDS
from htm_core.errors import NotFoundError, ValidationError
from htm_core.explain import explain_recall
from htm_core.models import Memory, Operation
from htm_core.serialize import memory_to_dict

from .actions import DONE
from .app import UI
from .scopes import conversations_of

__all__ = ["browse", "choice_arg", "index", "int_arg", "list_page", "show", "tag_tree", "text_arg"]

MODES = ("list", "hybrid", "fulltext", "vector")
#: The kind filter's choices: "" for every kind.
KIND_CHOICES = ("", *KINDS)
ORDERS = ("created_at", "key", "importance")
FORGOTTEN = ("hide", "include", "only")
#: Log lines searched for one memory's history (newest first).
LOG_SCAN = 5_000


def int_arg(request: Request, name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter in [low, high], or a ``ValidationError`` saying so."""
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError(f"{name} must be a whole number from {low} to {high}, "
                              f"got {raw!r}") from None
    if not low <= value <= high:
        raise ValidationError(f"{name} must be from {low} to {high}, got {value}")
    return value


def choice_arg(request: Request, name: str, choices: tuple[str, ...]) -> str:
    """A query parameter that must be one of ``choices`` (default the first)."""
    value = request.query_params.get(name) or choices[0]
    if value not in choices:
        raise ValidationError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def text_arg(request: Request, name: str) -> str | None:
    """A free-text query parameter, None when empty."""
    value = request.query_params.get(name, "").strip()
    return value or None


def tag_tree(counts: dict[str, int]) -> list[tuple[str, str, int, int | None]]:
    """Tags as a tree: (tag, last segment, depth, count or None for a parent that is not
    itself a tag), parents first.

    >>> tag_tree({"user:preferences": 2, "project": 1})
    [('project', 'project', 0, 1), ('user', 'user', 0, None), ('user:preferences', 'preferences', 1, 2)]
    """
    every: set[str] = set()
    for tag in counts:
        parts = tag.split(":")
        every.update(":".join(parts[: n + 1]) for n in range(len(parts)))
    return [(t, t.rpartition(":")[2], t.count(":"), counts.get(t))
            for t in sorted(every, key=lambda t: t.split(":"))]


def index(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/``: the Memories page."""
    return RedirectResponse("/memories", status_code=303)


def browse(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/memories``: every memory by filters, or the hits of a search."""
    htm = ui.htm
    query = text_arg(request, "q")
    mode = choice_arg(request, "mode", MODES)
    robot = text_arg(request, "robot")
    tag = text_arg(request, "tag")
    timeframe = text_arg(request, "timeframe")
    forgotten = choice_arg(request, "forgotten", FORGOTTEN)
    kind = choice_arg(request, "kind", KIND_CHOICES) or None
    source = request.query_params.get("source") or None  # exact: not stripped
    order = choice_arg(request, "order", ORDERS)
    descending = request.query_params.get("desc") == "1"
    limit = int_arg(request, "limit", 50, 1, 500)
    cursor = text_arg(request, "cursor")
    rows: list[dict[str, Any]] = []
    next_cursor = None
    if query is not None:
        why = explain_recall(htm, query, timeframe=timeframe, limit=limit,
                             strategy="hybrid" if mode == "list" else mode,
                             tags=tag, robot=robot, arm_depth=0, kinds=kind, sources=source)
        rows = [{"memory": h.memory, "score": h.relevance, "ranks": h.ranks} for h in why.fused]
    else:
        memories, next_cursor = list_page(htm, robot=robot, tags=tag, timeframe=timeframe,
                                      forgotten=forgotten, order=order, descending=descending,
                                      limit=limit, cursor=cursor, kinds=kind, sources=source)
        rows = [{"memory": m, "score": None, "ranks": {}} for m in memories]
    return ui.render(request, "memories.html", rows=rows, next_cursor=next_cursor,
                     tags=tag_tree(htm.tags()), robots=htm.robots(),
                     params={"q": query or "", "mode": mode, "robot": robot or "",
                             "tag": tag or "", "timeframe": timeframe or "",
                             "forgotten": forgotten, "order": order, "desc": descending,
                             "limit": limit, "kind": kind or "", "source": source or ""},
                     modes=MODES, orders=ORDERS, forgotten_choices=FORGOTTEN,
                     kinds=KIND_CHOICES)


def list_page(htm: Any, *, forgotten: str, limit: int, cursor: str | None,
          **filters: Any) -> tuple[list[Memory], str | None]:
    """One page of the list; ``forgotten="only"`` reads on until the page is full."""
    if forgotten != "only":
        page = htm.list(include_forgotten=forgotten == "include", limit=limit, cursor=cursor,
                        **filters)
        return list(page.memories), page.next_cursor
    found: list[Memory] = []
    while True:
        page = htm.list(include_forgotten=True, limit=limit, cursor=cursor, **filters)
        found.extend(m for m in page.memories if m.forgotten_at is not None)
        cursor = page.next_cursor
        if len(found) >= limit or cursor is None:
            return found, cursor


def show(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/memory?key=...``: one memory, its tags, importance, accesses, log lines, the
    working memories holding it and its versions (``HTM.versions``, newest first)."""
    htm = ui.htm
    key = request.query_params.get("key", "")
    if not key:
        raise ValidationError("give a memory's key: /memory?key=...")
    memory = htm.get(key, include_forgotten=True)
    if memory is None:
        raise NotFoundError(f"no memory has the key {key!r} (it may have been purged)")
    holders = []  # each robot holding it in working memory, with that robot's own accesses
    for r in htm.robots():
        state = htm.store.working_states(r.name)[1].get(memory.id)
        if state is not None:
            holders.append({"robot": r.name, "access_count": state.access_count,
                            "last_accessed": state.last_accessed})
    log: list[Operation] = [o for o in htm.operations(limit=LOG_SCAN) if o.key == key]
    record = memory_to_dict(memory)
    return ui.render(request, "memory.html", memory=memory, record=record,
                     conversations=conversations_of(memory.tags),
                     metadata=json.dumps(memory.metadata, indent=2, ensure_ascii=False,
                                         default=str),
                     holders=holders, log=log, log_scan=LOG_SCAN, versions=_versions(htm, key),
                     done_messages=DONE)


def _versions(htm: Any, key: str) -> list[tuple[Memory, datetime]]:
    """Every version of the memory (``HTM.versions``) with when it was written (the
    creation for the first, else when it superseded the one before), newest first."""
    out: list[tuple[Memory, datetime]] = []
    written = None
    for version in htm.versions(key):
        out.append((version, written or version.created_at))
        written = version.superseded_at
    return out[::-1]
