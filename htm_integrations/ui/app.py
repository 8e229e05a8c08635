"""The ``htm ui`` application: routes, the request guard, rendering and error pages.

Every page is a plain function ``view(ui, request, form) -> Response`` run in a worker
thread (``HTM`` does blocking I/O); :func:`_endpoint` wraps each one with the safety rules
of :mod:`htm_integrations.ui.security` and turns htm's errors into message pages: a
:class:`~htm_core.errors.NotFoundError` is a 404, any other
:class:`~htm_core.errors.HTMError` a 400, never a traceback.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from htm_core.errors import HTMError, NotFoundError, ValidationError

from .security import (
    CSRF_COOKIE,
    SECURITY_HEADERS,
    TOKEN_COOKIE,
    Guard,
    host_name,
    is_loopback,
    local_path,
    new_token,
    store_name,
)

if TYPE_CHECKING:
    from htm_core import HTM

__all__ = ["UI", "View", "create_app", "plural"]

logger = logging.getLogger(__name__)

View = Callable[["UI", Request, dict[str, str]], Response]

#: The largest form body accepted (a memory's tags and importance fit in far less).
MAX_FORM_BYTES = 64 * 1024


class UI:
    """What the pages share: the acting ``HTM``, the guard, the templates, and one ``HTM``
    per robot shown on the working-memory page (opened on the same store, closed with the
    app)."""

    def __init__(self, htm: HTM, guard: Guard) -> None:
        self.htm = htm
        self.guard = guard
        self.env = Environment(loader=PackageLoader("htm_integrations.ui", "templates"),
                               autoescape=select_autoescape(default=True, default_for_string=True),
                               undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.env.filters["when"] = _when
        self.env.filters["plural"] = plural
        self.env.globals["qs"] = _qs
        self._robots: dict[str, HTM] = {}
        self._lock = threading.Lock()

    def robot_htm(self, name: str) -> HTM:
        """An ``HTM`` acting as robot ``name`` on the same store (``NotFoundError`` for a
        robot the store does not know: a page never creates one)."""
        if name == self.htm.robot:
            return self.htm
        with self._lock:
            if name in self._robots:
                return self._robots[name]
            if name not in {r.name for r in self.htm.robots()}:
                raise NotFoundError(f"no robot named {name!r} on this store; pick one from the "
                                    "Working memory page")
            from htm_core import HTM

            wm = self.htm.working_memory
            made = HTM(robot=name, store=self.htm.store,
                       working_memory_tokens=self.recorded_budget(name),
                       embedder=self.htm.embedder, token_counter=self.htm.token_counter,
                       eviction=wm.policy, clock=self.htm.clock)
            self._robots[name] = made
            return made

    def recorded_budget(self, name: str) -> int | None:
        """The working-memory budget robot ``name`` runs with, as its ``HTM`` recorded it on
        the store (None: none was recorded)."""
        return next((r.working_memory_tokens for r in self.htm.robots() if r.name == name), None)

    def budget_known(self, name: str) -> bool:
        """Whether the gauge of robot ``name`` can measure against its real budget: the
        acting robot's is this app's, another's only when recorded on the store."""
        return name == self.htm.robot or self.recorded_budget(name) is not None

    def close(self) -> None:
        """Close the robots' ``HTM`` objects this app opened (not the acting one)."""
        with self._lock:
            for made in self._robots.values():
                made.close()
            self._robots.clear()

    def render(self, request: Request, template: str, *, status: int = 200,
               **context: Any) -> HTMLResponse:
        """Render a page with the shared context (robot, store, CSRF form token)."""
        page = self.env.get_template(template).render(
            request=request, path=request.url.path, csrf=self.guard.csrf_for(_csrf_cookie(request)),
            me=self.htm.robot, store=store_name(self.htm.store.url),
            backend=self.htm.store.backend, **context)
        return HTMLResponse(page, status_code=status)

    def message(self, request: Request, title: str, text: str, *, status: int,
                back: str | None = None) -> HTMLResponse:
        """A page that says what went wrong and what to do; ``back``: the key of the
        memory the request came from, linked from the page."""
        return self.render(request, "message.html", status=status, title=title, text=text,
                           back=back)

    def memory_of(self, request: Request, form: dict[str, str]) -> str | None:
        """The key of the memory a request names (its form's or address's ``key``) when
        that memory exists, forgotten or not; else None."""
        key = form.get("key") or request.query_params.get("key")
        if not key:
            return None
        try:
            found = self.htm.get(key, include_forgotten=True)
        except HTMError:
            return None
        return None if found is None else found.key


def _when(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def plural(count: int, one: str, many: str | None = None) -> str:
    """``count`` and the noun that goes with it.

    >>> plural(1, "access", "accesses"), plural(0, "memory", "memories"), plural(2, "turn")
    ('1 access', '0 memories', '2 turns')
    """
    return f"{count} {one if count == 1 else (many or one + 's')}"


def _qs(**params: Any) -> str:
    """A query string of the non-empty ``params``."""
    return urlencode({k: v for k, v in params.items() if v not in (None, "", False)})


def _csrf_cookie(request: Request) -> str:
    cookie: str = request.state.csrf_cookie
    return cookie


def _access_denied(ui: UI, request: Request) -> Response | None:
    """The refusal for a request the safety rules do not let through, else None."""
    guard = ui.guard
    if guard.token is None:
        client = request.client.host if request.client else None
        host = host_name(request.headers.get("host", ""))
        if not is_loopback(client) or not is_loopback(host):
            return ui.message(request, "Forbidden",
                              "This htm ui answers loopback requests only (127.0.0.1, localhost). "
                              "To reach it from elsewhere, start it with --host and use the token "
                              "it prints.", status=403)
        return None
    given = request.query_params.get("token")
    if given is not None:
        if not guard.token_ok(given) or request.method != "GET":
            return ui.message(request, "Wrong token", "The token in this address is not this "
                              "htm ui's token; open the address htm ui printed.", status=401)
        rest = {k: v for k, v in request.query_params.multi_items() if k != "token"}
        response = RedirectResponse(local_path(request.url.path)
                                    + ("?" + urlencode(rest) if rest else ""),
                                    status_code=303)
        response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict")
        return response
    auth = request.headers.get("authorization", "")
    bearer = auth[7:] if auth.lower().startswith("bearer ") else None
    if guard.token_ok(request.cookies.get(TOKEN_COOKIE)) or guard.token_ok(bearer):
        return None
    return ui.message(request, "Token needed", "This htm ui needs its access token: open the "
                      "address htm ui printed when it started (it ends in ?token=...).", status=401)


def _csrf_refused(ui: UI, request: Request, form: dict[str, str]) -> Response | None:
    origin = request.headers.get("origin")
    if origin is not None and origin.partition("://")[2] != request.headers.get("host", ""):
        return ui.message(request, "Refused", "This form was sent from another site; htm ui "
                          "accepts changes from its own pages only.", status=403)
    if not ui.guard.csrf_ok(request.cookies.get(CSRF_COOKIE), form.get("csrf")):
        return ui.message(request, "Refused", "This form's CSRF token is missing or stale; go "
                          "back, reload the page and try again.", status=403)
    return None


async def _read_form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise ValidationError("the form is too large")
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[-1] for k, v in fields.items()}


def _endpoint(ui: UI, view: View) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        cookie = request.cookies.get(CSRF_COOKIE)
        request.state.csrf_cookie = cookie or new_token()
        response = _access_denied(ui, request)
        if response is None:
            response = await _respond(ui, view, request)
        for name, value in SECURITY_HEADERS.items():
            response.headers[name] = value
        if cookie is None:
            response.set_cookie(CSRF_COOKIE, request.state.csrf_cookie, httponly=True,
                                samesite="strict")
        return response

    return endpoint


async def _respond(ui: UI, view: View, request: Request) -> Response:
    form: dict[str, str] = {}
    try:
        if request.method == "POST":
            form = await _read_form(request)
            refused = _csrf_refused(ui, request, form)
            if refused is not None:
                return refused
        result: Response = await run_in_threadpool(view, ui, request, form)
        return result
    except NotFoundError as exc:
        back = await run_in_threadpool(ui.memory_of, request, form)
        return ui.message(request, "Not found", str(exc), status=404, back=back)
    except HTMError as exc:
        back = await run_in_threadpool(ui.memory_of, request, form)
        return ui.message(request, "Cannot do that", str(exc), status=400, back=back)


def create_app(htm: HTM, *, token: str | None = None) -> Starlette:
    """The ``htm ui`` web app over ``htm`` (which it does not close).

    Without ``token`` it answers loopback requests only; with one, every request must
    carry it (see :mod:`htm_integrations.ui.security`).
    """
    from . import actions, memories, people, periods, recall, timeline, working

    ui = UI(htm, Guard(token))
    pages: list[tuple[str, View, list[str]]] = [
        ("/", memories.index, ["GET"]),
        ("/memories", memories.browse, ["GET"]),
        ("/memory", memories.show, ["GET"]),
        ("/users", people.people, ["GET"]),
        ("/user", people.person, ["GET"]),
        ("/session", people.session, ["GET"]),
        ("/context", people.context, ["GET"]),
        ("/recall", recall.debugger, ["GET"]),
        ("/working", working.overview, ["GET"]),
        ("/timeline", timeline.overview, ["GET"]),
        ("/periods", periods.overview, ["GET"]),
        ("/forget", actions.forget, ["GET", "POST"]),
        ("/restore", actions.restore, ["POST"]),
        ("/purge", actions.purge, ["GET", "POST"]),
        ("/importance", actions.importance, ["POST"]),
        ("/tags", actions.tags, ["POST"]),
    ]
    routes = [Route(path, _endpoint(ui, view), methods=methods) for path, view, methods in pages]

    def not_found(ui: UI, request: Request, form: dict[str, str]) -> Response:
        return ui.message(request, "Not found", f"There is no page at {request.url.path}; "
                          "use the links at the top.", status=404)

    not_found_page = _endpoint(ui, not_found)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException) and exc.status_code == 405:
            return Response("method not allowed", status_code=405,
                            headers={"Allow": "GET, POST"})
        result: Response = await not_found_page(request)
        return result

    app = Starlette(routes=routes, exception_handlers={404: on_http_error, 405: on_http_error})
    app.state.ui = ui
    return app
