"""``htm ui``: a local inspector and recall debugger in the browser (extra ``ui``).

A small Starlette app with server-rendered pages (Jinja2, autoescaped; no JavaScript, no
assets from the internet) over one :class:`~htm_core.HTM`: users and their sessions,
memories, the recall debugger (:func:`htm_core.explain.explain_recall`), working memory per
robot, the timeline, and actions (forget, restore, purge, importance, tags). Safety rules:
:mod:`htm_integrations.ui.security`. Run it with ``htm ui``, or serve
``create_app(htm)`` with any ASGI server. See docs/ui.md.
"""

from __future__ import annotations

import importlib.util

from htm_core.errors import missing_extra

for _module in ("starlette", "jinja2"):
    if importlib.util.find_spec(_module) is None:
        raise missing_extra(f"{_module} (needed by htm ui)", "ui")

from .app import create_app  # noqa: E402
from .server import serve  # noqa: E402

__all__ = ["create_app", "serve"]
