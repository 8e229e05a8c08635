"""Two processes racing ``update`` on one memory lose nothing, on both backends.

Two forked processes update the same memory many times at once: one writes new texts
(``update(key, text)``), the other reads the memory and sets its importance with
``expected_version`` (a reader's compare-and-set). Each update either lands or raises
``ConflictError``. Afterwards every version in the history is explained by the updates
that landed (its text is the last text written at or before it, its importance the last
importance), the final memory holds the last of each (no update lost), and vector recall
finds the memory by its final text (a race never leaves it without a vector).
"""

from __future__ import annotations

import multiprocessing
import traceback
from typing import Any

from htm_core import HTM, HashingEmbedder

ROUNDS = 60
KEY = "Shared:Plan"


def _texts(barrier: Any, url: str, results: Any) -> None:
    from htm_core.errors import ConflictError

    landed, refused = [], 0
    try:
        with HTM(robot="writer", database_url=url, embedder=HashingEmbedder()) as htm:
            barrier.wait()
            for n in range(ROUNDS):
                text = f"plan revision {n} mentions harbour{n} and lantern{n}"
                try:
                    landed.append(("content", htm.update(KEY, text).version, text))
                except ConflictError:
                    refused += 1
        results.put(("texts", landed, refused, None))
    except BaseException:
        results.put(("texts", landed, refused, traceback.format_exc()))


def _importance(barrier: Any, url: str, results: Any) -> None:
    from htm_core.errors import ConflictError

    landed, refused = [], 0
    try:
        with HTM(robot="rater", database_url=url, embedder=HashingEmbedder()) as htm:
            barrier.wait()
            for n in range(ROUNDS):
                seen = htm.get(KEY)
                value = 0.05 + n / 10  # distinct: every landed update makes a version
                try:
                    done = htm.update(KEY, seen.content, importance=value,
                                      expected_version=seen.version)
                    landed.append(("importance", done.version, value))
                except ConflictError:
                    refused += 1
        results.put(("importance", landed, refused, None))
    except BaseException:
        results.put(("importance", landed, refused, traceback.format_exc()))


def _race(url: str) -> dict[str, tuple[list[Any], int]]:
    ctx = multiprocessing.get_context("fork")  # the parent holds no connection to the store
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=f, args=(barrier, url, results)) for f in (_texts, _importance)]
    for p in procs:
        p.start()
    try:
        reports = [results.get(timeout=300) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    for name, _, _, error in reports:
        assert error is None, (name, error)
    return {name: (landed, refused) for name, landed, refused, _ in reports}


def test_two_processes_racing_update_lose_nothing(store_url: str) -> None:
    with HTM(robot="setup", database_url=store_url, embedder=HashingEmbedder()) as htm:
        htm.add("plan revision start", key=KEY, importance=1.0)
    reports = _race(store_url)
    landed = sorted(reports["texts"][0] + reports["importance"][0], key=lambda x: x[1])
    versions = [v for _, v, _ in landed]
    assert len(set(versions)) == len(versions)  # each landed update made its own version
    assert reports["texts"][0], "no text update landed"
    with HTM(robot="check", database_url=store_url, embedder=HashingEmbedder()) as htm:
        history = htm.versions(KEY)
        assert [m.version for m in history] == list(range(1, len(landed) + 2))
        expected = {"content": "plan revision start", "importance": 1.0}
        by_version = {v: (field, value) for field, v, value in landed}
        for memory in history[1:]:
            field, value = by_version[memory.version]
            expected[field] = value
            assert (memory.content, memory.importance) == (
                expected["content"], expected["importance"]), memory.version
        final = htm.get(KEY)
        assert final.embedder is not None
        hits = htm.recall(final.content, strategy="vector", limit=3)
        assert hits and hits[0].memory.key == KEY
