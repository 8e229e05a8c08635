"""A guided tour of both tiers: ``python -m htm_core.demo`` or ``htm demo``.

Runs on the embedded SQLite default in a throwaway database (never your real memory), with
no server and no network. It replays a small built-in conversation
(``htm_core/data/demo_conversation.json``) into a deliberately small working memory and
shows eviction (a flag, nothing deleted), a recall bringing an evicted fact back, the
context assembled within a budget, never-forget and the stats. See docs/cli.md ("htm demo").
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from .clock import FrozenClock
from .errors import HTMError
from .htm import HTM
from .models import Context, Stats

__all__ = ["DemoReport", "load_corpus", "main", "run"]

#: Working-memory budget of the demo: small on purpose, so that it must evict.
DEMO_BUDGET = 110
BAR_WIDTH = 24


@dataclass(frozen=True, kw_only=True)
class DemoReport:
    """What the demo observed; tests assert on it."""

    turns: int
    evicted: tuple[str, ...]
    recalled_key: str
    was_evicted_before_recall: bool
    back_in_working_memory: bool
    context_keys: tuple[str, ...]
    context_tokens: int
    long_term_total: int
    max_working_tokens_seen: int
    budget: int


def load_corpus() -> dict[str, Any]:
    """The built-in demo conversation (package data)."""
    text = resources.files("htm_core").joinpath("data/demo_conversation.json").read_text(
        encoding="utf-8")
    corpus: dict[str, Any] = json.loads(text)
    return corpus


def _bar(used: int, total: int) -> str:
    filled = round(BAR_WIDTH * used / total) if total else 0
    return "█" * filled + "·" * (BAR_WIDTH - filled)


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class _Printer:
    def __init__(self, out: TextIO, pause: float) -> None:
        self.out = out
        self.pause = pause

    def __call__(self, line: str = "") -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def step(self, title: str) -> None:
        if self.pause:
            time.sleep(self.pause)
        self()
        self(f"── {title} " + "─" * max(0, 72 - len(title)))


def run(*, out: TextIO | None = None, embedder: Any = None, pause: float | None = None,
        database: str | Path | None = None) -> DemoReport:
    """Run the demo, printing to ``out`` (default stdout); return what it observed.

    Args:
        out: where to print.
        embedder: as for :class:`~htm_core.HTM` (default: the best local embedder).
        pause: seconds between steps (default 0.6 on a terminal, else 0).
        database: a database to use instead of a throwaway one (it should be empty).
    """
    out = out or sys.stdout
    if pause is None:
        pause = 0.6 if out.isatty() else 0.0
    if database is not None:
        return _tour(_Printer(out, pause), database, embedder)
    with tempfile.TemporaryDirectory(prefix="htm-demo-") as tmp:
        return _tour(_Printer(out, pause), Path(tmp) / "demo.db", embedder)


def _tour(say: _Printer, database: str | Path, embedder: Any) -> DemoReport:
    corpus = load_corpus()
    turns = corpus["turns"]
    target = corpus["recall"]["key"]
    clock = FrozenClock(datetime(2024, 5, 15, 9, 0, tzinfo=timezone.utc))
    say(f"htm demo — {corpus['title']}")
    say("opening a throwaway SQLite database and loading the embedder…")
    with HTM(robot="assistant", database_url=database, working_memory_tokens=DEMO_BUDGET,
             embedder=embedder, clock=clock) as htm:
        say(f"database: {htm.store.url} (no server, no network)")
        say(f"embedder: {htm.stats().embedder_choice}")
        evicted_all, peak = _flow(say, htm, clock, turns)
        stats = htm.stats()
        say.step("2. Eviction only clears a flag: nothing was deleted")
        say(f"   {len(evicted_all)} evictions; working memory holds {stats.working_memory_count} "
            f"memories, long-term memory holds all {stats.long_term_total}.")
        was_evicted = target not in htm.working_memory and target in evicted_all
        say(f"   the allergy fact ({target!r}) in working memory: "
            f"{target in htm.working_memory} (evicted: {target in evicted_all})")
        clock.advance(hours=2)
        back = _recall_back(say, htm, corpus["recall"], target)
        ctx = _context(say, htm)
        _never_forget(say, htm)
        stats = _stats(say, htm)
        say("\nDone. Try it on your own memory: htm add \"...\"; htm recall \"...\"; htm --help")
        return DemoReport(
            turns=len(turns), evicted=tuple(evicted_all), recalled_key=target,
            was_evicted_before_recall=was_evicted, back_in_working_memory=back,
            context_keys=ctx.keys, context_tokens=ctx.tokens,
            long_term_total=stats.long_term_total, max_working_tokens_seen=peak,
            budget=DEMO_BUDGET)


def _flow(say: _Printer, htm: HTM, clock: FrozenClock, turns: Sequence[dict[str, Any]]
          ) -> tuple[list[str], int]:
    """Step 1: the conversation enters working memory; return the evicted keys, in order,
    and the most tokens it held."""
    say.step(f"1. A conversation flows into a {DEMO_BUDGET}-token working memory")
    say("   imp  turn" + " " * 46 + "working memory")
    evicted_all: list[str] = []
    peak = 0
    keys: dict[str, str] = {}
    for turn in turns:
        clock.advance(minutes=3)
        before = set(htm.working_memory.keys())
        memory = htm.add(f"{turn['speaker'].title()}: {turn['text']}",
                         importance=float(turn["importance"]), key=turn.get("key"),
                         tags=turn.get("tags", ()))
        keys[memory.key] = memory.content
        wm = htm.working_memory
        peak = max(peak, wm.tokens)
        gone = sorted(before - set(wm.keys()))
        evicted_all.extend(gone)
        say(f"   {turn['importance']:>3}  {_short(memory.content, 48):<48}  "
            f"{_bar(wm.tokens, wm.max_tokens)} {wm.tokens:>3}/{wm.max_tokens}")
        for key in gone:
            say(f"          ↳ evicted: {_short(keys[key], 60)}")
    return evicted_all, peak


def _recall_back(say: _Printer, htm: HTM, recall: dict[str, Any], target: str) -> bool:
    """Step 3: a recall brings the evicted fact back; return whether it is back."""
    query, tags = recall["query"], recall.get("tags")
    say.step("3. Recall brings the evicted fact back")
    say(f"   recall({query!r},")
    say(f"          tags={tags!r}, limit=3)   # only what we know about the user")
    for hit in htm.recall(query, tags=tags, limit=3):
        mark = "  ← evicted earlier" if hit.memory.key == target else ""
        say(f"   {hit.score:.4f}  {_short(hit.memory.content, 58)}{mark}")
    back = target in htm.working_memory
    say(f"   the allergy fact in working memory now: {back}")
    return back


def _context(say: _Printer, htm: HTM) -> Context:
    """Step 4: the context for the next prompt."""
    say.step("4. The context for the next prompt (strategy 'balanced', 80 tokens)")
    ctx = htm.create_context(strategy="balanced", max_tokens=80)
    for item in ctx.memories:
        say(f"   │ {item.content}")
    say(f"   {ctx.tokens} tokens of a {ctx.budget}-token budget (80 less a 10% margin), "
        f"{len(ctx.memories)} memories ranked by importance × recency")
    return ctx


def _never_forget(say: _Printer, htm: HTM) -> None:
    """Step 5: forget, then restore."""
    say.step("5. Never forget: forget is reversible until purge")
    htm.forget("approver", confirm=True)
    say(f"   forget('approver', confirm=True) → retrieve('approver') finds it: "
        f"{htm.retrieve('approver') is not None}")
    htm.restore("approver")
    say(f"   restore('approver')              → retrieve('approver') finds it: "
        f"{htm.retrieve('approver') is not None}")
    say("   every add, eviction, forget and restore is in the operations log: "
        f"{len(htm.operations(limit=1000))} entries (htm log)")


def _stats(say: _Printer, htm: HTM) -> Stats:
    """Step 6: the figures."""
    say.step("6. Stats")
    stats = htm.stats()
    say(f"   working memory: {stats.working_memory_count} memories, "
        f"{stats.working_memory_tokens}/{stats.working_memory_max_tokens} tokens "
        f"({stats.working_memory_utilisation:.0%}), {stats.evictions} evictions, "
        f"policy {stats.eviction_policy}")
    say(f"   long-term: {stats.long_term_total} memories, {stats.forgotten} forgotten, "
        f"{stats.robots} robot(s), schema v{stats.schema_version}, {stats.backend}")
    say(f"   embedder: {stats.embedder} (dim {stats.embedding_dim}); tokens: "
        f"{stats.token_counter}")
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m htm_core.demo [--embedder SPEC] [--fast]``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m htm_core.demo",
                                     description="A guided tour of htm on a throwaway database.")
    parser.add_argument("--embedder", help="auto (default), hashing, local or ollama[:model]")
    parser.add_argument("--fast", action="store_true", help="no pauses between steps")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        run(embedder=args.embedder, pause=0.0 if args.fast else None)
    except HTMError as exc:
        sys.stderr.write(f"htm demo: error: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
