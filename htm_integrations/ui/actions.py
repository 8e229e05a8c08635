"""The changes ``htm ui`` can make, each a ``POST`` (CSRF-checked in :mod:`.app`) that goes
through the acting ``HTM`` and lands in the operations log under its robot.

Forget (after a confirmation page), restore, purge one forgotten memory or all of them
(after typing the key, or ``purge``), and set the importance or edit the tags through
``HTM.update`` with the content unchanged, compare-and-set against the version the form
showed (a memory changed since is refused with
:class:`~htm_core.errors.ConflictError`, never overwritten). See docs/ui.md ("Actions").
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from htm_core.errors import ConfirmationRequiredError, ConflictError, NotFoundError, ValidationError
from htm_core.models import Memory
from htm_core.validation import check_importance, check_key, check_tags

from .app import UI

__all__ = ["forget", "importance", "purge", "restore", "tags"]

#: What the memory page says after each action (the ``done`` parameter).
DONE = {"forgotten": "Forgotten: hidden from recall until you restore or purge it.",
        "restored": "Restored: recall finds it again.",
        "importance": "Importance changed: a new version, the old one kept below.",
        "tags": "Tags saved: a new version, the old one kept below.",
        "unchanged": "Nothing changed: no new version was made."}


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


def _shown_version(form: dict[str, str], memory: Memory) -> int:
    """The version the form showed (the memory's current one for a form without it)."""
    shown = form.get("version", "").strip()
    if not shown:
        return memory.version
    try:
        return int(shown)
    except ValueError:
        raise ValidationError(f"the form's version must be a whole number, got {shown!r}: "
                              "reload the memory's page and make the change again") from None


def _editable(ui: UI, key: str, form: dict[str, str]) -> tuple[Memory, int]:
    """The memory to change (current, not forgotten) and the version the form showed."""
    memory = ui.htm.get(key, include_forgotten=True)
    if memory is None:
        raise NotFoundError(f"no memory has the key {key!r} (it may have been purged)")
    if memory.forgotten_at is not None:
        raise ValidationError(f"memory {key!r} is forgotten: restore it first (the Restore "
                              "button on its page), then change its importance or tags")
    return memory, _shown_version(form, memory)


def _update(ui: UI, edit: tuple[Memory, int], done: str, *, importance: float | None = None,
            tags: list[str] | None = None) -> RedirectResponse:
    """``HTM.update`` with the content kept, compare-and-set against the version the
    form showed; back to the page saying what happened."""
    memory, shown = edit
    try:
        updated = ui.htm.update(memory.key, memory.content, importance=importance, tags=tags,
                                expected_version=shown)
    except ConflictError as exc:
        raise ValidationError(
            f"memory {memory.key!r} changed since the page was opened (it showed version "
            f"{shown}, it is now at version {exc.current_version}): reload the page and make "
            "the change again") from exc
    return _back(memory.key, done if updated.version != shown else "unchanged")


def importance(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``POST /importance``: set a memory's importance (0 to 10), as a new version."""
    key = _key(request, form)
    raw = form.get("importance", "").strip()
    try:
        value = float(raw)
    except ValueError:
        raise ValidationError(f"importance must be a number from 0 to 10, got {raw!r}") from None
    value = check_importance(value)
    return _update(ui, _editable(ui, key, form), "importance", importance=value)


def tags(ui: UI, request: Request, form: dict[str, str]) -> Response:
    """``POST /tags``: replace a memory's tags with the list given (comma- or
    space-separated, ``a:b:c``; empty removes them all), as a new version."""
    key = _key(request, form)
    wanted = check_tags([t for t in form.get("tags", "").replace(",", " ").split() if t])
    return _update(ui, _editable(ui, key, form), "tags", tags=list(wanted))
