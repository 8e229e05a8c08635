"""Recalls written behind, across real processes, on both backends.

A recall's working-memory write waits (see ``htm_core.working.resident``); these tests check
what that wait may and may not do when other processes act meanwhile and when the process
ends without ``close()``:

- the pending write names memory ids and versions: a memory another process forgot or
  purged meanwhile (a new memory then taking its key) is refused at the flush and leaves
  the waiting process's working memory; one updated meanwhile is fetched again (an update
  keeps every membership); its next context never shows the old text;
- a process that returns without ``close()`` still writes its recalls' membership, access
  statistics and eviction log lines (at exit), also when its ``HTM`` was collected first;
- an idle process writes them within ``FLUSH_AFTER_SECONDS`` without another call (a timer).

Keys are drawn to collide: ``note:K`` beside ``note:k`` and ``note/K``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.store import open_store
from htm_core.testing import working_memories

ROOT = Path(__file__).resolve().parents[2]

SECRET = "the kettle key is hidden under the blue flowerpot"
TWIN = "the kettle manual lies in the drawer by the window"
SLASH = "the garden hose hangs on the shed door"
NEWCOMER = "the newcomer note says the shed is painted green"
REPLACED = "the spare key now sits with the neighbor"


def _reader(url: str, conn: Any) -> None:
    """Process A: recall (the write waits), let the parent act, then show a context."""
    from htm_core.working import resident

    resident.FLUSH_AFTER_SECONDS = 3600.0  # neither the timer nor age writes it meanwhile
    try:
        with HTM(robot="ada", database_url=url, embedder=HashingEmbedder()) as htm:
            hits = htm.recall("kettle", strategy="fulltext")
            conn.send(("recalled", sorted(h.memory.key for h in hits)))
            conn.recv()  # the parent (process B) has acted
            ctx = htm.create_context()
            conn.send(("context", ctx.text, sorted((m.key, m.id) for m in ctx.memories)))
    except BaseException:
        conn.send(("error", traceback.format_exc()))


def _seed(url: str) -> dict[str, int]:
    """Three memories under colliding keys; ada's working memory empty. Key -> id."""
    with HTM(robot="setup", database_url=url, embedder=HashingEmbedder()) as htm:
        ids = {key: htm.add(text, key=key).id
               for key, text in [("note:K", SECRET), ("note:k", TWIN), ("note/K", SLASH)]}
    return ids


def _act(url: str, change: str) -> int | None:
    """Process B's part: what it does to ``note:K``; the id of a new memory, if any."""
    with HTM(robot="bob", database_url=url, embedder=HashingEmbedder()) as bob:
        if change == "update":
            bob.update("note:K", REPLACED)
            return None
        bob.forget("note:K", confirm=True)
        if change == "forget":
            return None
        assert bob.purge(confirm=True) == 1
        return bob.add(NEWCOMER, key="note:K").id


@pytest.mark.parametrize("change", ["purge and reuse the key", "forget", "update"])
def test_a_pending_recall_never_brings_back_what_another_process_changed(store_url, change):
    ids = _seed(store_url)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_reader, args=(store_url, child))
    proc.start()
    try:
        assert parent.poll(120), "process A did not answer"
        kind, *got = parent.recv()
        assert kind == "recalled", got
        assert got == [["note:K", "note:k"]]  # both kettle notes...
        store = open_store(store_url)
        try:  # ... their write pending
            assert working_memories(store, "ada") == []
        finally:
            store.close()
        new_id = _act(store_url, change.split()[0])
        parent.send("go")
        assert parent.poll(120), "process A did not answer"
        kind, *got = parent.recv()
        assert kind == "context", got
        text, shown = got
    finally:
        proc.join(60)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0
    # A holds what it recalled and may still hold: the twin, and the updated memory (an
    # update keeps the memory, its id and every membership) with its new text; never the
    # old text, never what took the key after a purge.
    held = [("note:k", ids["note:k"])]
    if change == "update":
        held = sorted([*held, ("note:K", ids["note:K"])])
    assert SECRET not in text and NEWCOMER not in text
    assert (REPLACED in text) == (change == "update")
    assert shown == held
    # A's stored working memory (read back by a new HTM of the robot): the same.
    with HTM(robot="ada", database_url=store_url, embedder=HashingEmbedder()) as again:
        assert sorted((m.key, m.id) for m in working_memories(again.store, "ada")) == held
        assert new_id is None or new_id not in {m.id for m in working_memories(again.store, "ada")}
        assert SECRET not in again.create_context().text


def _run(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


#: Process A of the exit tests: recall with a tiny budget (the recall evicts) and return.
_RECALL_AND_RETURN = """
    import gc, json, sys, weakref
    from htm_core import HTM, HashingEmbedder
    from htm_core.working import resident

    resident.FLUSH_AFTER_SECONDS = 3600.0  # only the exit writes it

    def recall():
        htm = HTM(robot="ada", database_url=sys.argv[1], embedder=HashingEmbedder(),
                  working_memory_tokens=int(sys.argv[2]))
        keys = sorted(h.memory.key for h in htm.recall("kettle", strategy="fulltext"))
        return keys, htm

    keys, htm = recall()
    if sys.argv[3] == "drop":  # no reference left: the HTM is collected before exit
        ref = weakref.ref(htm)
        del htm
        gc.collect()
        assert ref() is None, "the HTM was not collected"
    print(json.dumps(keys))
"""


def _seed_resident(url: str) -> tuple[int, int]:
    """ada holds ``note/K`` in a budget that holds one note only; return the budget and
    the access count of the kettle notes now."""
    ids = _seed(url)
    with HTM(robot="ada", database_url=url, embedder=HashingEmbedder()) as htm:
        budget = max(htm.store.get(k).token_count for k in ids) + 2
    with HTM(robot="ada", database_url=url, embedder=HashingEmbedder(),
             working_memory_tokens=budget) as htm:
        htm.clear_working_memory()
        htm.recall("garden hose", strategy="fulltext")
        assert set(htm.working_memory.keys()) == {"note/K"}
        counts = {htm.store.get(k).access_count for k in ("note:K", "note:k")}
        assert len(counts) == 1
        return budget, counts.pop()


@pytest.mark.parametrize("how", ["keep", "drop"])
def test_a_process_returning_without_close_keeps_its_recalls(store_url, how):
    budget, before = _seed_resident(store_url)
    store = open_store(store_url)
    try:
        evictions = len(store.operations(op="evict", robot="ada", limit=1_000))
        done = _run(_RECALL_AND_RETURN, store_url, str(budget), how)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == ["note:K", "note:k"]
        # What the recall changed is in the store: membership (one kettle note fits),
        # the access statistics of both hits, and the eviction of note/K (and of the
        # note the budget pushed out again) in the log.
        held = {m.key for m in working_memories(store, "ada")}
        assert len(held) == 1 and held <= {"note:K", "note:k"}
        assert [store.get(k).access_count for k in ("note:K", "note:k")] == [before + 1] * 2
        evicted = [o.key for o in store.operations(op="evict", robot="ada", limit=1_000)]
        assert len(evicted) > evictions and "note/K" in evicted[: len(evicted) - evictions]
        assert "Traceback" not in done.stderr
    finally:
        store.close()


#: Process A of the timer test: recall, then idle until stdin closes.
_RECALL_AND_IDLE = """
    import sys
    from htm_core import HTM, HashingEmbedder
    from htm_core.working import resident

    resident.FLUSH_AFTER_SECONDS = float(sys.argv[2])
    htm = HTM(robot="ada", database_url=sys.argv[1], embedder=HashingEmbedder())
    print(len(htm.recall("kettle", strategy="fulltext")), flush=True)
    sys.stdin.read()  # idle: no other call until the parent closes stdin
    htm.close()
"""


def _poll(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def test_an_idle_process_writes_its_recalls_without_another_call(store_url):
    _seed(store_url)
    store = open_store(store_url)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    before = store.get("note:K").access_count
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_RECALL_AND_IDLE), store_url, "0.5"],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "2"
        # Another process sees the recall's part while the first one stays idle.
        assert _poll(lambda: store.get("note:K").access_count == before + 1, 60)
        assert {m.key for m in working_memories(store, "ada")} == {"note:K", "note:k"}
        assert proc.poll() is None  # still idle: the timer wrote it, not an exit
    finally:
        _out, err = proc.communicate(timeout=60)
        store.close()
    assert proc.returncode == 0, err


#: A process whose store was closed under its HTM before it exits with recalls pending.
_STORE_CLOSED_FIRST = """
    import sys
    from htm_core import HTM, HashingEmbedder
    from htm_core.store import open_store
    from htm_core.working import resident

    resident.FLUSH_AFTER_SECONDS = 3600.0
    store = open_store(sys.argv[1])
    htm = HTM(robot="ada", store=store, embedder=HashingEmbedder())
    print(len(htm.recall("kettle", strategy="fulltext")), flush=True)
    store.close()
"""


def test_exit_with_the_store_already_closed_raises_nothing(store_url):
    _seed(store_url)
    done = _run(_STORE_CLOSED_FIRST, store_url)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
