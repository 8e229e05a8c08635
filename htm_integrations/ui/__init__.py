"""``htm ui``: a local inspector and recall debugger in the browser (extra ``ui``).

A small Starlette app with server-rendered pages (Jinja2, autoescaped; no JavaScript, no
assets from the internet) over one :class:`~htm_core.HTM`:

- **Users**: the users the scope tags name, each user's sessions, memories and forgotten
  memories, a session's transcript, and the context ``create_context`` builds now for a
  user or a session, block by block against the acting robot's budget;
- **Memories**: browse and filter (robot, tag and the tags below it, timeframe, forgotten),
  search (hybrid, full text or vector; read-only), and each memory's page with its tags,
  importance, accesses, the working memories holding it and its log lines;
- **Recall debugger**: each arm's ranked list beside the fused list
  (:func:`htm_core.explain.explain_recall`), the timeframe read and what entering working
  memory would evict;
- **Working memory** per robot: resident items in eviction order, the token gauge, and the
  context each ``create_context`` strategy would build now;
- **Timeline**: the operations log over time and each robot's evictions;
- **Actions**: forget (confirmed), restore, purge (typed confirmation), importance, tags.

Safety rules: :mod:`htm_integrations.ui.security`. Run it with ``htm ui`` (see docs/ui.md), or::

    from htm_integrations.ui import create_app
    app = create_app(htm)          # any ASGI server; loopback requests only without a token
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
