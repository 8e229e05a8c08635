"""A short tour of both tiers on the embedded SQLite default: ``python -m htm_core.demo``.

Runs with no server and no network, in a throwaway database.
"""

from __future__ import annotations

import logging
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from .clock import FrozenClock
from .htm import HTM

__all__ = ["main"]

CONVERSATION = [
    ("The user's name is Dana and she works on the payments team.", 8.0),
    ("Dana prefers Vim keybindings in every editor.", 9.0),
    ("We chatted about the weather: rainy again.", 1.0),
    ("Dana's production database is PostgreSQL 16 with pgvector.", 7.0),
    ("Small talk about weekend plans: hiking.", 1.0),
    ("Dana asked for answers with short code examples.", 6.0),
    ("Lunch today was noodles.", 1.0),
    ("The staging deploy failed because of a missing migration.", 5.0),
]


def main() -> None:
    """Run the demo and print what happens at each step."""
    logging.basicConfig(level=logging.WARNING)
    clock = FrozenClock(datetime(2024, 5, 15, 9, 0, tzinfo=timezone.utc))
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "demo.db"
        with HTM(robot="assistant", database_url=db, working_memory_tokens=60,
                 clock=clock) as htm:
            print(f"htm demo: {htm!r}\n  embedder: {htm.stats().embedder_choice}\n")
            keys: dict[str, str] = {}
            print("1. Adding a conversation to a 60-token working memory")
            for text, importance in CONVERSATION:
                clock.advance(minutes=5)
                keys[text] = htm.add(text, importance=importance).key
                wm = htm.working_memory
                print(f"   + [{importance:>4}] {text[:52]:<52} wm {wm.tokens:>2}/{wm.max_tokens}"
                      f" ({len(wm)} items)")
            evicted = [op.key for op in htm.operations(op="evict", limit=100)]
            print(f"\n2. {len(evicted)} memories were evicted from working memory; "
                  "none was deleted:")
            print(f"   long-term memories: {htm.stats().long_term_total}")
            clock.advance(hours=2)
            lunch = keys["Lunch today was noodles."]
            print(f"   'Lunch today was noodles.' in working memory: "
                  f"{lunch in htm.working_memory}")
            print("\n3. Recall 'what did I eat for lunch?' brings the evicted fact back:")
            for hit in htm.recall("what did I eat for lunch?", limit=2):
                print(f"   {hit.score:.4f}  {hit.memory.content}")
            print(f"   in working memory now: {lunch in htm.working_memory}")
            ctx = htm.create_context(strategy="balanced", max_tokens=50)
            print(f"\n4. Context for the next prompt ({ctx.tokens} tokens, strategy balanced):")
            for line in ctx.text.split("\n\n"):
                print(f"   | {line}")
            stats = htm.stats()
            print("\n5. Stats")
            print(f"   working memory: {stats.working_memory_count} items, "
                  f"{stats.working_memory_tokens}/{stats.working_memory_max_tokens} tokens, "
                  f"{stats.evictions} evictions")
            print(f"   long-term: {stats.long_term_total} memories, {stats.robots} robot(s)")
            print(f"   embedder: {stats.embedder}; tokens: {stats.token_counter}")
            clock.advance(days=1)
            print("\n6. Timeframe: recall 'deploy' from 'yesterday':")
            for hit in htm.recall("deploy", timeframe="yesterday", limit=1):
                print(f"   {hit.memory.created_at:%Y-%m-%d %H:%M}  {hit.memory.content}")


if __name__ == "__main__":
    main()
