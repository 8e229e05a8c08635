"""The changes ``htm ui`` can make, each a ``POST`` (CSRF-checked in :mod:`.app`) that goes
through the acting ``HTM`` and lands in the operations log under its robot:

- forget, after a confirmation page (``HTM.forget(key, confirm=True)``);
- restore (``HTM.restore``);
- purge one forgotten memory or all of them, after typing the key (or ``purge``) to
  confirm (``HTM.purge(confirm=True)``);
- set the importance and add tags (the store's logged ``set_importance`` / ``add_tags``,
  the same writes the enrichment uses; working memory takes the new importance at once).
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..errors import ConfirmationRequiredError, NotFoundError, ValidationError
from ..validation import check_importance, check_key, check_tags
from .app import UI

__all__ = ["forget", "importance", "purge", "restore", "tags"]

#: What the memory page says after each action (the ``done`` parameter).
DONE = {"forgotten": "Forgotten: hidden from recall until you restore or purge it.",
        "restored": "Restored: recall finds it again.",
        "importance": "Importance changed.",
        "tags": "Tags added."}


def _back(key: str, done: str) -> RedirectResponse:
    return RedirectResponse("/memory?" + urlencode({"key": key, "done": done}), status_code=303)


def _key(request: Request, form: dict[str, str]) -> str:
    key = form.get("key") if request.method == "POST" else request.query_params.get("key")
    if not key:
        raise ValidationError("no memory key given")
    checked: str = check_key(key)
    return checked


def forget(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``GET /forget?key=``: the confirmation page; ``POST`` with ``confirm=yes``: forget."""
    key = _key(request, form)
    if request.method == "GET":
        memory = ui.htm.get(key)
        if memory is None:
            raise NotFoundError(f"no memory to forget under {key!r} (unknown, purged, or "
                                "already forgotten)")
        return ui.render(request, "confirm_forget.html", memory=memory)
    if form.get("confirm") != "yes":
        raise ConfirmationRequiredError("forgetting needs the confirmation step: use the "
                                        "Forget button on the memory's page")
    ui.htm.forget(key, confirm=True)
    return _back(key, "forgotten")


def restore(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``POST /restore``: bring a forgotten memory back."""
    key = _key(request, form)
    ui.htm.restore(key)
    return _back(key, "restored")


def purge(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``GET /purge[?key=]``: the typed confirmation; ``POST``: purge (only memories
    already forgotten are ever purged)."""
    key = (form.get("key") if request.method == "POST" else request.query_params.get("key")) or None
    if key is not None:
        key = check_key(key)
    expected = key if key is not None else "purge"
    if request.method == "GET":
        forgotten = ui.htm.stats().forgotten
        return ui.render(request, "confirm_purge.html", key=key, expected=expected,
                         forgotten=forgotten)
    if form.get("typed", "").strip() != expected:
        raise ConfirmationRequiredError(f"purging is permanent: type {expected!r} exactly to "
                                        "confirm")
    count = ui.htm.purge(confirm=True, key=key)
    what = "memory" if count == 1 else "memories"
    return ui.message(request, "Purged", f"Purged {count} forgotten {what} for good.",
                      status=200)


def importance(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``POST /importance``: set a memory's importance (0 to 10)."""
    key = _key(request, form)
    raw = form.get("importance", "").strip()
    try:
        value = float(raw)
    except ValueError:
        raise ValidationError(f"importance must be a number from 0 to 10, got {raw!r}") from None
    value = check_importance(value)
    htm = ui.htm
    htm.store.set_importance(key, value, robot=htm.robot)
    htm._refresh_importance(key, value)
    return _back(key, "importance")


def tags(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``POST /tags``: add tags (comma- or space-separated, ``a:b:c``) to a memory."""
    key = _key(request, form)
    wanted = check_tags([t for t in form.get("tags", "").replace(",", " ").split() if t])
    if not wanted:
        raise ValidationError("give one or more tags, such as user:preferences")
    ui.htm.store.add_tags(key, list(wanted), robot=ui.htm.robot)
    return _back(key, "tags")
