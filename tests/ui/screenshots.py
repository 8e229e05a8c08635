"""Take the screenshots of docs/ui.md: ``python -m tests.ui.screenshots [DIR]`` (default
``docs/images``). Serves a small store on a free loopback port and captures each page in
headless Chromium (Debian's ``chromium``, driven by playwright)."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from tempfile import TemporaryDirectory

from htm_core import HTM, FrozenClock, HashingEmbedder
from htm_integrations.ui import create_app

from .conftest import CHROMIUM, Served, fill

SHOTS = [
    ("ui-memories.png", "/memories?order=created_at&desc=1"),
    ("ui-users.png", "/users"),
    ("ui-user.png", "/user?id=ada"),
    ("ui-session.png", "/session?user=ada&id=2024-05-14"),
    ("ui-context.png", "/context?user=ada"),
    ("ui-memory.png", "/memory?key=pref-vim"),
    ("ui-recall.png", "/recall?q=what+tea+did+we+talk+about+last+week&limit=5"),
    ("ui-working.png", "/working"),
    ("ui-timeline.png", "/timeline"),
]


#: (user, session, turns): conversations written by the LangChain chat history.
CHATS = [
    ("ada", "2024-05-14", ["I'm planning a trip to Kyoto in the spring",
                           "Spring is lovely there: the temples and the tea houses",
                           "Remind me that I prefer green tea, not coffee",
                           "Noted: green tea, not coffee"]),
    ("ada", "2024-05-15", ["What did I say about drinks?", "That you prefer green tea"]),
    ("Ada", "2024-05-15", ["Ada Lovelace here: notes on the analytical engine",
                           "Saved your notes on the analytical engine"]),
    ("kenji", "standup", ["Standup moved to 9:30", "Got it, 9:30 from tomorrow"]),
]


def _converse(htm: HTM) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from htm_integrations.langchain import HTMChatMessageHistory

    for user, session, turns in CHATS:
        HTMChatMessageHistory(htm=htm, session_id=session, user_id=user).add_messages(
            [HumanMessage(t) if n % 2 == 0 else AIMessage(t) for n, t in enumerate(turns)])
    htm.forget(HTMChatMessageHistory(htm=htm, session_id="2024-05-15", user_id="ada")
               .key_for(0), confirm=True)

#: Shots of the whole page, not only the window (the recall debugger's arms are below).
FULL_PAGE = {"ui-recall.png"}


def _populate(htm: HTM, other: HTM, clock: FrozenClock) -> None:
    fill(htm, clock)
    _converse(htm)
    now = clock()
    notes = ["Kenji recommended a tea shop near the station", "Standup moved to 9:30",
             "The staging database was migrated to PostgreSQL 16", "Aiko likes hojicha",
             "Deploy freeze until the release on Friday", "Reminder: renew the TLS certificate"]
    for n, text in enumerate(notes):
        other.add(text, importance=float(n % 4 + 1), tags=["work:notes"],
                  created_at=now - timedelta(hours=5 * n))
    htm.recall("tea", limit=3)
    htm.forget("trip-kyoto", confirm=True)


def _shrink(path: Path) -> None:
    """Fewer colours, a much smaller file (when Pillow is installed)."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=64)
    small.save(path, optimize=True)


def main(out: Path) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    clock = FrozenClock(datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc))
    with TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "htm.db")
        with HTM(robot="assistant", database_url=url, embedder=HashingEmbedder(), clock=clock,
                 working_memory_tokens=400) as htm, \
                HTM(robot="notes", database_url=url, embedder=HashingEmbedder(), clock=clock,
                    working_memory_tokens=30) as other:
            _populate(htm, other, clock)
            app = create_app(htm)
            served = Served(app)
            args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
            try:
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
                    page = browser.new_page(viewport={"width": 1180, "height": 760})
                    page.set_default_timeout(30_000)
                    for name, path in SHOTS:
                        page.goto(served.url + path)
                        page.screenshot(path=str(out / name), full_page=name in FULL_PAGE)
                        _shrink(out / name)
                    browser.close()
            finally:
                served.stop()
                app.state.ui.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/images"))
