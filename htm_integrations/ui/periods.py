"""The Periods page: a scope's digests as a tree, month -> week -> day, each with its text
and its sources (links to the memories), through
:func:`htm_core.recall.tiered.scope_digests`. See docs/ui.md ("Periods")."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response

from htm_core.models import Memory
from htm_core.recall.tiered import digest_info, is_digest, scope_digests

from .app import UI
from .people import _scope_tag, _slug_arg

__all__ = ["Node", "overview", "tree"]


@dataclass
class Node:
    """One digest of the tree, its children (lower digests) and, for a day, its memories."""

    digest: Memory
    children: list[Node] = field(default_factory=list)
    sources: list[Memory | str] = field(default_factory=list)

    @property
    def label(self) -> str:
        info = digest_info(self.digest) or {}
        return f"{info.get('kind', '')} {info.get('label', '')}"


def _sources(ui: UI, digest: Memory) -> list[Memory]:
    ids = [s["id"] for s in (digest_info(digest) or {}).get("sources", ())
           if isinstance(s, dict) and isinstance(s.get("id"), int)]
    return ui.htm.store.get_many(ids)


def tree(ui: UI, tags: tuple[str, ...]) -> list[Node]:
    """The scope's months, newest first, each with its weeks and their days; a day's
    memories as stored (a source forgotten since is left out)."""
    months = scope_digests(ui.htm.store, tags, "month")

    def grow(digest: Memory) -> Node:
        node = Node(digest)
        for source in _sources(ui, digest):
            if is_digest(source):
                node.children.append(grow(source))
            else:
                node.sources.append(source)
        return node

    return [grow(m) for m in months]


def overview(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/periods[?user=SLUG]``: the robot's digests, or one user's."""
    user = _slug_arg(request, "user", "user") if "user" in request.query_params else None
    tags = (_scope_tag(user, None),) if user is not None else ()
    return ui.render(request, "periods.html", months=tree(ui, tags), user=user or "",
                     scope=tags[0] if tags else "the whole store")
