"""A PostgreSQL ``bulk_load`` killed during its final index build (real server, real SIGKILL).

The loader is a child process; the test watches ``pg_stat_activity`` for the build's
``CREATE INDEX`` (the GIN full-text index is built first, then the HNSW graph), lets it run
0.3 s and kills the process. The server's backend does not see its client die at once; before
the fix it went on building (holding the lock that marks a build in progress), so the store
opened next saw the lock, rebuilt nothing and said nothing (2 of 3 trials), and when the
orphaned build finally failed, recall ran as exact scans until some later open. Now the build
gives up within about a second of its client dying (``client_connection_check_interval``)
and the next store to open waits for it, then builds what is missing.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from htm_core.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
INDEXES = {"memories_embedding_hnsw", "memories_tsv_gin"}

_LOADER = textwrap.dedent("""
    import sys
    from datetime import datetime, timedelta, timezone
    import numpy as np
    from htm_core.store import NewMemory
    from htm_core.store.postgres import PostgresStore

    T0 = datetime(2024, 5, 15, tzinfo=timezone.utc)
    vecs = np.random.default_rng(0).standard_normal((20_000, 96)).astype(np.float32)
    store = PostgresStore(sys.argv[1])
    with store.bulk_load(maintenance_work_mem_mb=64, parallel_workers=0):
        for part in range(0, 20_000, 5_000):
            store.add_many([NewMemory(
                key=f"k{i}", content=" ".join(f"w{i * j % 9973}" for j in range(40)),
                robot="loader", importance=1.0, token_count=9,
                created_at=T0 + timedelta(minutes=i), embedding=vecs[i], embedder="test-emb")
                for i in range(part, part + 5_000)])
    print("finished", flush=True)
""")


def _admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(make_url(url).set(drivername="postgresql")
                           .render_as_string(hide_password=False), autocommit=True)


def _indexes(url: str) -> set[str]:
    with _admin(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")} & INDEXES


def _kill_during_build(url: str, index_kind: str) -> None:
    """Start the loader and SIGKILL it 0.3 s after its ``CREATE INDEX ... {index_kind}``
    starts on the server."""
    child = subprocess.Popen([sys.executable, "-c", _LOADER, url], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        with _admin(url) as conn:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and child.poll() is None:
                if conn.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                        "AND query ILIKE %s AND state = 'active'",
                        (f"CREATE INDEX%USING {index_kind}%",)).fetchone():
                    break
                time.sleep(0.02)
            else:
                raise AssertionError(f"the build never started: {child.communicate()}")
        time.sleep(0.3)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize("index_kind", ["gin", "hnsw"])
def test_a_build_killed_part_way_is_rebuilt_by_the_next_store_to_open(
        pg_url: str, index_kind: str, caplog: pytest.LogCaptureFixture) -> None:
    PostgresStore(pg_url).close()  # the schema, with both indexes
    _kill_during_build(pg_url, index_kind)
    caplog.set_level(logging.WARNING)
    reopened = PostgresStore(pg_url)  # at once: the killed build may still be running
    try:
        assert _indexes(pg_url) == INDEXES, caplog.text
        assert "rebuilt" in caplog.text
        with _admin(pg_url) as conn:
            assert conn.execute(
                "SELECT count(*) FROM htm_meta WHERE key = 'bulk_load'").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM memories").fetchone() == (20_000,)
        assert reopened.rebuild_indexes() == []
    finally:
        reopened.close()
