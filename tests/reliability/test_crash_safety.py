"""SIGKILL a writer at random moments: every add that returned survives, nothing is half written."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from htm_core import HTM, HashingEmbedder
from htm_core.testing import working_memories

CHILD = r"""
import sys
from htm_core import HTM, HashingEmbedder
url, log = sys.argv[1], sys.argv[2]
with HTM(robot="crash", database_url=url, embedder=HashingEmbedder(), working_memory_tokens=200) as htm, \
        open(log, "a", buffering=1) as out:
    i = int(sys.argv[3])
    while True:
        if i % 10 == 0:
            htm.add_many([{"content": f"batch {i} item {j}", "key": f"b{i}-{j}"} for j in range(5)])
            out.write("\n".join(f"b{i}-{j}" for j in range(5)) + "\n")
        else:
            htm.add(f"crash test memory {i}", key=f"k{i}")
            out.write(f"k{i}\n")
        i += 1
"""


def _wait_for_lines(log: Path, lines: int, timeout: float = 60) -> None:
    """Wait until ``log`` holds ``lines`` returned keys (a loaded machine adds slowly)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().count("\n") >= lines:
            return
        time.sleep(0.05)


def _check_integrity(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        ids = {r[0] for r in conn.execute("SELECT id FROM memories")}
        fts = {r[0] for r in conn.execute("SELECT rowid FROM memories_fts")}
        assert ids == fts, "content without its FTS row, or the reverse"
        for blob, in conn.execute("SELECT embedding FROM memories"):
            assert blob is not None and len(blob) == 384 * 4
            assert np.isfinite(np.frombuffer(blob, dtype=np.float32)).all()
        orphans = conn.execute("SELECT count(*) FROM memory_tags WHERE memory_id NOT IN "
                               "(SELECT id FROM memories)").fetchone()[0]
        assert orphans == 0
    finally:
        conn.close()


def test_sigkill_loses_no_returned_add(tmp_path):
    db = tmp_path / "crash.db"
    log = tmp_path / "returned.log"
    HTM(robot="crash", database_url=str(db), embedder=HashingEmbedder()).close()
    rng = random.Random(7)
    start = 0
    returned: list[str] = []
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for _round in range(4):
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(log), str(start)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_for_lines(log, len(returned) + 6)  # a few adds of this round have returned
        time.sleep(rng.uniform(0.1, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        returned = [k for k in log.read_text().split("\n") if k]
        _check_integrity(db)
        with HTM(robot="crash", database_url=str(db), embedder=HashingEmbedder(),
                 working_memory_tokens=200) as htm:
            missing = [k for k in returned if htm.retrieve(k) is None]
            assert not missing, f"adds that returned were lost: {missing[:5]}"
            assert htm.recall("crash test memory", limit=3)
            assert htm.working_memory.tokens <= 200
        start += 100_000
    assert len(returned) > 20


READER = r"""
import sys
from htm_core import HTM, HashingEmbedder
url, log = sys.argv[1], sys.argv[2]
with HTM(robot="crash", database_url=url, embedder=HashingEmbedder(), working_memory_tokens=120) as htm, \
        open(log, "a", buffering=1) as out:
    i = int(sys.argv[3])
    while True:
        htm.add(f"crash reader memory {i} about topic {i % 7}", key=f"r{i}")
        out.write(f"add r{i}\n")
        for _ in range(3):  # reads written behind: pending when the kill lands
            htm.recall(f"topic {i % 7}", limit=5)
        if i % 5 == 4:
            htm.forget(f"r{i - 2}", confirm=True)
            out.write(f"forget r{i - 2}\n")
        i += 1
"""


def test_sigkill_during_reads_loses_at_most_access_statistics(tmp_path):
    """Recalls are written behind (htm_core.working.resident): SIGKILL with reads pending
    loses no returned add, undoes no returned forget, and leaves no forgotten memory in the
    persisted working memory; only access statistics and the reads' membership may lag."""
    db = tmp_path / "reads.db"
    log = tmp_path / "acknowledged.log"
    HTM(robot="crash", database_url=str(db), embedder=HashingEmbedder()).close()
    rng = random.Random(11)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    start = 0
    for _round in range(3):
        proc = subprocess.Popen([sys.executable, "-c", READER, str(db), str(log), str(start)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while (not log.exists() or log.stat().st_size == 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.3, 0.8))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        lines = [line.split() for line in log.read_text().splitlines() if line]
        added = {key for op, key in lines if op == "add"}
        forgotten = {key for op, key in lines if op == "forget"}
        _check_integrity(db)
        with HTM(robot="crash", database_url=str(db), embedder=HashingEmbedder(),
                 working_memory_tokens=120) as htm:
            assert not [k for k in added - forgotten if htm.store.get(k) is None]
            for key in forgotten:
                assert htm.store.get(key) is None  # hidden: the forget stands
                assert key not in htm.working_memory
            persisted = {m.key for m in working_memories(htm.store, "crash")}
            assert not persisted & forgotten
            assert htm.working_memory.tokens <= 120
            assert all(h.memory.key not in forgotten for h in htm.recall("topic 3", limit=20))
        start += 100_000
    assert len(added) > 10 and forgotten
