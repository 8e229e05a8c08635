"""The pages about people and conversations: the users the scope tags name, one user's
memories, sessions and forgotten memories, one session's transcript, and the context
``create_context`` would build now for a user or a session.

Users and sessions are read from the scope tags every surface acting for a user writes
(:mod:`htm_core.scope`): ``chat:user:<user>``, ``chat:user:<user>:session:<session>`` and,
for a session without a user, ``chat:session:<session>``. The ``<user>`` and ``<session>``
in them are the ids' slugs (the id itself when it is made of letters, digits, ``_`` and
``-``, else ``h-`` and a hash), compared exactly: ``Ada`` and ``ada`` are two users.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from htm_core.errors import NotFoundError, ValidationError
from htm_core.models import Memory
from htm_core.scope import HASHED, ROOT, id_slug
from htm_core.working.context import SEPARATOR
from htm_core.working.context import STRATEGIES as CONTEXT_STRATEGIES

from .app import UI
from .memories import choice_arg, int_arg, list_page, text_arg
from .scopes import SESSION, SLUG, USER, sessions_of, users_of

__all__ = ["Person", "context", "people", "person", "role_of", "session"]

#: Memories a user's page lists in each of its tables.
SHOWN = 50


@dataclass(frozen=True)
class Person:
    """A user the tags name: the slug in the tags, the id as given when a memory's
    metadata says it (``user_id``), the counts in the user's scope and their newest
    memory (not forgotten)."""

    slug: str
    given: str | None
    memories: int
    forgotten: int
    sessions: int
    newest: Memory | None


def _slug_arg(request: Request, name: str, what: str) -> str:
    """A user or session slug from the address, taken exactly (no trimming or folding)."""
    value = request.query_params.get(name, "")
    if not value:
        raise ValidationError(f"give the {what}: /{what}?{name}=... (the links on the Users "
                              "page carry it)")
    if not SLUG.fullmatch(value):
        raise NotFoundError(f"no {what} {value!r}: users and sessions are named in the tags by "
                            "letters, digits, _ and - (or h- and a hash); pick one from the "
                            "Users page")
    return value


def _scope_tag(user: str | None, session: str | None) -> str:
    if user is None:
        return f"{SESSION}{session}"
    return f"{USER}{user}" + ("" if session is None else f":session:{session}")


def _given(ui: UI, tag: str, slug: str, field: str) -> str | None:
    """The id as given, from a memory's metadata, for a hashed slug (None otherwise)."""
    if not slug.startswith(HASHED):
        return None
    for memory in ui.htm.list(tags=[tag], include_forgotten=True, limit=20).memories:
        given = memory.metadata.get(field)
        if isinstance(given, str) and given and id_slug(given) == slug:
            return given
    return None


def _person(ui: UI, slug: str, tags: dict[str, int]) -> Person:
    tag = _scope_tag(slug, None)
    stats = ui.htm.stats(tags=[tag])
    newest = ui.htm.list(tags=[tag], order="created_at", descending=True, limit=1).memories
    return Person(slug=slug, given=_given(ui, tag, slug, "user_id"),
                  memories=stats.long_term_total, forgotten=stats.forgotten,
                  sessions=len(sessions_of(tags, slug)), newest=newest[0] if newest else None)


def people(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/users``: every user the scope tags name, with their counts, and the sessions
    that have no user."""
    tags = ui.htm.tags()
    users = [_person(ui, slug, tags) for slug in users_of(tags)]
    return ui.render(request, "users.html", users=users, loose=sessions_of(tags, None))


def person(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/user?id=SLUG``: the user's sessions, newest memories and forgotten memories."""
    slug = _slug_arg(request, "id", "user")
    tag = _scope_tag(slug, None)
    tags = ui.htm.tags()
    who = _person(ui, slug, tags)
    if who.memories == 0 and who.forgotten == 0:
        raise NotFoundError(f"no memory carries the tag {tag!r}: no user {slug!r} on this "
                            "store (ids are exact: Ada and ada are two users)")
    recent = ui.htm.list(tags=[tag], order="created_at", descending=True, limit=SHOWN)
    forgotten, _ = list_page(ui.htm, forgotten="only", limit=SHOWN, cursor=None, tags=tag,
                             order="created_at", descending=True)
    return ui.render(request, "user.html", who=who, tag=tag,
                     sessions=sessions_of(tags, slug), recent=list(recent.memories),
                     more=recent.next_cursor is not None, forgotten=forgotten, shown=SHOWN)


def role_of(memory: Memory) -> str | None:
    """Who said a turn: the metadata's ``role``, else a ``chat:role:<role>`` tag."""
    role = memory.metadata.get("role")
    if isinstance(role, str) and role:
        return role
    return next((t.split(":", 2)[2] for t in memory.tags if t.startswith(f"{ROOT}:role:")),
                None)


def recalled_into(ui: UI, turn: Memory) -> list[Memory | str] | None:
    """What the agent middleware recorded as recalled into ``turn``'s context (the
    metadata's ``recalled`` keys), each memory as it is now, or its key when it is gone;
    None when nothing was recorded."""
    keys = turn.metadata.get("recalled")
    if not isinstance(keys, list):
        return None
    return [ui.htm.get(k, include_forgotten=True) or k for k in keys if isinstance(k, str)]


def session(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/session?id=SLUG[&user=SLUG]``: the session's turns as stored, oldest first
    (forgotten ones marked), each with its role when the memory says it."""
    sid = _slug_arg(request, "id", "session")
    user = _slug_arg(request, "user", "user") if "user" in request.query_params else None
    tag = _scope_tag(user, sid)
    limit = int_arg(request, "limit", 500, 1, 5_000)
    cursor = text_arg(request, "cursor")
    page = ui.htm.list(tags=[tag], include_forgotten=True, order="created_at", limit=limit,
                       cursor=cursor)
    if not page.memories and cursor is None:
        raise NotFoundError(f"no memory carries the tag {tag!r}: no such session on this "
                            "store (ids are exact)")
    turns = [{"memory": m, "role": role_of(m), "recalled": recalled_into(ui, m)}
             for m in page.memories]
    return ui.render(request, "session.html", user=user, sid=sid, tag=tag, turns=turns,
                     next_cursor=page.next_cursor, limit=limit,
                     given=_given(ui, tag, sid, "session_id"))


def _blocks(ui: UI, memories: tuple[Any, ...]) -> list[dict[str, Any]]:
    count = ui.htm.token_counter.count
    return [{"memory": m, "tokens": count(m.content)} for m in memories]


def context(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``/context?user=SLUG[&session=SLUG][&strategy=][&robot=]``: the context
    ``create_context(strategy, tags=[scope tag], scope_working=True)`` builds now from the
    robot's working memory, block by block with token counts against its budget."""
    user = _slug_arg(request, "user", "user") if "user" in request.query_params else None
    sid = _slug_arg(request, "session", "session") if "session" in request.query_params else None
    if user is None and sid is None:
        raise ValidationError("give a user or a session: /context?user=... or "
                              "/context?session=... (the Users page links to both)")
    strategy = choice_arg(request, "strategy", CONTEXT_STRATEGIES)
    name = text_arg(request, "robot") or ui.htm.robot
    htm = ui.robot_htm(name)
    tag = _scope_tag(user, sid)
    built = htm.create_context(strategy=strategy, tags=[tag], scope_working=True)
    return ui.render(request, "context.html", user=user, sid=sid, tag=tag, built=built,
                     blocks=_blocks(ui, built.memories), strategies=CONTEXT_STRATEGIES,
                     robots=ui.htm.robots(), robot=name, budget_known=ui.budget_known(name),
                     separator_tokens=ui.htm.token_counter.count(SEPARATOR),
                     resident=htm.stats(tags=[tag]).working_memory_count)
