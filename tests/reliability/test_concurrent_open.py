"""Many processes opening one new store at once: every open succeeds, the schema ends
current, created once.

SQLite: eight processes open the same new file together (a barrier releases them),
twenty trials, each on a fresh file. The version is read again inside the write lock, so
one process creates the whole schema in one transaction and the others find it current.
PostgreSQL: the same with eight processes on one new database (its advisory lock).
"""

from __future__ import annotations

import multiprocessing
import traceback
from pathlib import Path
from typing import Any

import pytest

from htm_core.store import SCHEMA_VERSION
from tests.pg import fresh_database

PROCESSES = 8
TRIALS = 20
#: Imported once by the forkserver, so that the released processes reach the open together
#: instead of each first importing for a few hundred milliseconds: this module (pytest with
#: it), both stores and what opening one imports on first use.
PRELOAD = [__name__, "htm_core", "htm_core.store.sqlite", "htm_core.store.postgres",
           "sqlalchemy.dialects.sqlite", "sqlalchemy.dialects.postgresql.psycopg",
           "tiktoken", "tiktoken_ext.openai_public"]


def _open(url: str, barrier: Any, results: Any) -> None:
    from htm_core import HTM, HashingEmbedder

    try:
        barrier.wait()
        with HTM(robot="opener", database_url=url, embedder=HashingEmbedder()) as htm:
            results.put(("ok", htm.store.schema_version()))
    except BaseException:
        results.put(("failed", traceback.format_exc()))


def _open_together(url: str) -> list[tuple[str, Any]]:
    # forkserver with htm preloaded: htm is imported once, and the processes are forked
    # from a server with no other thread (a fork of the test process could copy a lock
    # that one of its threads, left by an earlier test, holds, and hang).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_open, args=(url, barrier, results)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    try:
        return [results.get(timeout=120) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


def _check_store(url: str) -> None:
    from htm_core import HTM, HashingEmbedder

    with HTM(robot="after", database_url=url, embedder=HashingEmbedder()) as htm:
        assert htm.store.schema_version() == SCHEMA_VERSION
        steps = [line.detail for line in htm.operations(op="migrate", limit=100)
                 if "to" in line.detail]
        assert sorted(d["to"] for d in steps) == list(range(1, SCHEMA_VERSION + 1))
        htm.add("still writable after the race", key="after")
        assert htm.retrieve("after") is not None


def test_eight_processes_open_one_new_sqlite_file(tmp_path: Path) -> None:
    for trial in range(TRIALS):
        url = str(tmp_path / f"new-{trial}.db")
        outcomes = _open_together(url)
        failed = [detail for status, detail in outcomes if status != "ok"]
        assert failed == [], (trial, failed[:1])
        assert [v for _, v in outcomes] == [SCHEMA_VERSION] * PROCESSES
        _check_store(url)


@pytest.mark.postgres
def test_eight_processes_open_one_new_postgres_database(postgres_server_url: str) -> None:
    for _ in range(3):
        for url in fresh_database(postgres_server_url):
            outcomes = _open_together(url)
            failed = [detail for status, detail in outcomes if status != "ok"]
            assert failed == [], failed[:1]
            assert [v for _, v in outcomes] == [SCHEMA_VERSION] * PROCESSES
            _check_store(url)
