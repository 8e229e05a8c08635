"""Bulk ``add_many`` on SQLite: the batched full-text path gives what adding one by one gives.

The add path indexes a batch for full text with one statement (and its CJK rows with one
more) while the FTS and CJK insert triggers stand aside (a flag row in ``htm_meta`` that
never outlives the transaction). These tests run real SQLite files and check the result
against one-by-one adds, the duplicate rules, all-or-nothing failure and the upgrade of
files made with the older, per-row triggers.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from htm_core.errors import DuplicateKeyError, StoreError
from htm_core.store.base import SCHEMA_VERSION, NewMemory, SearchFilters, generated_key
from htm_core.store.sqlite import _FTS_BATCH_KEY, SQLiteStore
from htm_core.text import _CJK_RANGES, CJK_GLOB

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
DIM = 16
WORDS = ["kernel", "garden", "invoice", "violin", "sailing", "pasta", "budget", "tennis",
         "printer", "espresso", "telescope", "mortgage", "compiler", "jazz", "router", "yoga"]
OLD_TRIGGER = """CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END"""


def make_records(n: int, *, start: int = 0, robots: tuple[str, ...] = ("r1", "r2"),
                 seed: int = 3) -> list[NewMemory]:
    rng = np.random.default_rng(seed + start)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    out = []
    for j in range(n):
        i = start + j
        content = f"{WORDS[i % 16]} {WORDS[(i * 7) % 16]} note number {i}"
        robot = robots[i % len(robots)]
        keyed = i % 3 != 0
        out.append(NewMemory(
            key=f"k{i}" if keyed else generated_key(robot, content), content=content, robot=robot,
            importance=float(i % 10), token_count=len(content.split()),
            created_at=T0 + timedelta(minutes=i), tags=(f"topic:{WORDS[i % 16]}",) if i % 2 else (),
            metadata={"i": i} if i % 4 == 0 else {}, embedding=vectors[j], embedder="test",
            explicit_key=keyed))
    return out


def fts_state(path: Path) -> tuple[set[int], set[int]]:
    """(memory ids, FTS rowids) after FTS5's own integrity check passed."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        ids = {r[0] for r in conn.execute("SELECT id FROM memories")}
        fts = {r[0] for r in conn.execute("SELECT rowid FROM memories_fts")}
        flag = conn.execute("SELECT count(*) FROM htm_meta WHERE key = ?", (_FTS_BATCH_KEY,)).fetchone()[0]
    finally:
        conn.close()
    assert flag == 0, "the batch flag must never be committed"
    return ids, fts


def trigger_sql(path: Path, name: str = "memories_fts_ai") -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' "
                                "AND name = ?", (name,)).fetchone()[0])
    finally:
        conn.close()


def snapshot(store: SQLiteStore) -> list[tuple[object, ...]]:
    memories = [m for batch in store.iter_memories(include_embedding=True) for m in batch]
    return [(m.id, m.key, m.content, m.robot, m.importance, m.token_count, m.created_at,
             m.last_accessed, m.access_count, m.tags, m.metadata, m.embedder,
             tuple(np.round(m.embedding or [], 6)), m.forgotten_at) for m in memories]


def searches(store: SQLiteStore, records: list[NewMemory]) -> list[object]:
    out: list[object] = []
    for word in [*WORDS[:6], "number", "note kernel"]:
        out.append(store.fulltext_search(word, limit=20, filters=SearchFilters()))
        out.append(store.fulltext_search(word, limit=20, filters=SearchFilters(robot="r2")))
    for rec in records[:: max(1, len(records) // 8)]:
        assert rec.embedding is not None
        hits = store.vector_search(rec.embedding, limit=5, filters=SearchFilters())
        out.append([(mid, round(score, 5)) for mid, score in hits])
    return out


def test_one_batch_equals_one_by_one(tmp_path: Path) -> None:
    records = make_records(600)
    bulk, single = SQLiteStore(tmp_path / "bulk.db"), SQLiteStore(tmp_path / "single.db")
    try:
        results = bulk.add_many(records)
        one_by_one = [single.add_many([r])[0] for r in records]
        assert [r.created for r in results] == [True] * 600
        assert [r.memory.id for r in results] == [r.memory.id for r in one_by_one] == list(range(1, 601))
        assert [r.memory.tags for r in results] == [r.memory.tags for r in one_by_one]
        # What add_many returns is what the store holds.
        assert [r.memory for r in results] == bulk.get_many([r.memory.id for r in results])
        assert snapshot(bulk) == snapshot(single)
        assert bulk.tags() == single.tags() and bulk.tags()["topic:garden"] == 38
        assert searches(bulk, records) == searches(single, records)
        assert bulk.fulltext_search("number 123", limit=1, filters=SearchFilters())[0][0] == 124
        ops = [(o.op, o.robot, o.key) for o in reversed(bulk.operations(limit=1000, op="add"))]
        assert ops == [("add", r.robot, r.key) for r in records]
    finally:
        bulk.close()
        single.close()
    for name in ("bulk.db", "single.db"):
        ids, fts = fts_state(tmp_path / name)
        assert ids == fts == set(range(1, 601))


def test_duplicates_touch_and_restore_in_a_batch(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "dup.db")
    try:
        first = make_records(10)
        store.add_many(first)
        store.forget("k1", robot="r1", at=T0)
        again = [first[1], *make_records(5, start=10), first[2], first[2], make_records(1, start=10)[0]]
        results = store.add_many(again)
        assert [r.created for r in results] == [False, True, True, True, True, True, False, False, False]
        restored, touched = results[0].memory, results[6].memory
        assert restored.key == "k1" and restored.forgotten_at is None and restored.access_count == 1
        assert touched.key == "k2" and touched.access_count == 2 and results[7].memory.access_count == 2
        assert results[8].memory.id == results[1].memory.id == 11 and results[8].memory.access_count == 1
        assert store.get("k1") is not None
        assert store.fulltext_search("number 1", limit=3, filters=SearchFilters())[0][0] == 2
        assert first[1].embedding is not None
        assert store.vector_search(first[1].embedding, limit=1, filters=SearchFilters())[0][0] == 2
        assert [o.op for o in store.operations(limit=9)][::-1] == [
            "restore", "add", "add", "add", "add", "add", "touch", "touch", "touch"]
    finally:
        store.close()
    ids, fts = fts_state(tmp_path / "dup.db")
    assert ids == fts == set(range(1, 16))


def test_different_content_under_a_key_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "clash.db"
    store = SQLiteStore(path)
    try:
        store.add_many(make_records(50))
        before = (snapshot(store), len(store.operations(limit=10_000)))
        batch = make_records(400, start=50)
        clash = batch[300]
        batch[300] = NewMemory(key="k7", content="something else entirely", robot="r1",
                               importance=1.0, token_count=3, created_at=T0, explicit_key=True)
        with pytest.raises(DuplicateKeyError, match="'k7'"):
            store.add_many(batch)
        inner = [*make_records(3, start=50), NewMemory(
            key="k50", content="not what k50 holds in this batch", robot="r1", importance=1.0,
            token_count=7, created_at=T0, explicit_key=True)]
        with pytest.raises(DuplicateKeyError, match="'k50'"):
            store.add_many(inner)
        assert (snapshot(store), len(store.operations(limit=10_000))) == before
        assert store.fulltext_search("120", limit=5, filters=SearchFilters()) == []
        batch[300] = clash
        results = store.add_many(batch)
        assert [r.memory.id for r in results] == list(range(51, 451))
        assert store.fulltext_search("number 350", limit=1, filters=SearchFilters())[0][0] == 351
    finally:
        store.close()
    ids, fts = fts_state(path)
    assert ids == fts == set(range(1, 451))


def test_failure_mid_batch_leaves_nothing_half_written(tmp_path: Path) -> None:
    path = tmp_path / "fail.db"
    store = SQLiteStore(path)
    try:
        store.add_many(make_records(20))
        batch = make_records(500, start=20)
        bad = batch[250]
        # Past validation on purpose: the database's CHECK constraint rejects it mid-insert.
        batch[250] = NewMemory(key=bad.key, content=bad.content, robot=bad.robot, importance=11.0,
                               token_count=1, created_at=T0, explicit_key=True)
        with pytest.raises(StoreError, match="CHECK constraint"):
            store.add_many(batch)
        assert store.counts("r1").total == 20
        assert store.get_many(list(range(21, 521))) == []
        assert sum(store.tags().values()) == 10
        assert store.fulltext_search("300", limit=5, filters=SearchFilters()) == []
        assert bad.embedding is not None
        assert all(mid <= 20 for mid, _ in store.vector_search(bad.embedding, limit=50,
                                                                  filters=SearchFilters()))
        assert len(store.operations(op="add", limit=10_000)) == 20
        batch[250] = bad
        assert [r.memory.id for r in store.add_many(batch)][:2] == [21, 22]
        assert store.vector_search(bad.embedding, limit=1, filters=SearchFilters())[0][0] == 271
    finally:
        store.close()
    ids, fts = fts_state(path)
    assert ids == fts == set(range(1, 521))


def test_other_writers_still_get_indexed(tmp_path: Path) -> None:
    """A row inserted without the flag (older htm, the sqlite3 shell) fires the trigger."""
    path = tmp_path / "other.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("INSERT INTO robots(name, created_at) VALUES ('shell', 0)")
        conn.execute("INSERT INTO memories(key, content, content_hash, robot_id, token_count, "
                     "created_at, last_accessed) VALUES ('s1', 'written from the shell', 'x', 1, 4, 0, 0)")
    finally:
        conn.close()
    store = SQLiteStore(path)
    try:
        assert [h[0] for h in store.fulltext_search("shell", limit=5, filters=SearchFilters())] == [1]
        store.add_many(make_records(300))
        assert store.fulltext_search("shell", limit=5, filters=SearchFilters())[0][0] == 1
    finally:
        store.close()
    ids, fts = fts_state(path)
    assert ids == fts == set(range(1, 302))


def test_file_with_the_per_row_trigger_is_upgraded_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    store.add_many(make_records(30))
    store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("DROP TRIGGER memories_fts_ai")
        conn.execute(OLD_TRIGGER)
    finally:
        conn.close()

    kept = SQLiteStore(path, migrate=False)  # may not change the schema: keeps the old trigger
    try:
        kept.add_many(make_records(300, start=30))
        assert kept.fulltext_search("number 200", limit=1, filters=SearchFilters())[0][0] == 201
    finally:
        kept.close()
    assert _FTS_BATCH_KEY not in trigger_sql(path)
    assert fts_state(path)[0] == fts_state(path)[1] == set(range(1, 331))

    upgraded = SQLiteStore(path)
    try:
        assert next(o.detail for o in upgraded.operations(op="migrate")) == {"fts_insert_trigger": "batched"}
        upgraded.add_many(make_records(300, start=330))
        assert upgraded.fulltext_search("number 555", limit=1, filters=SearchFilters())[0][0] == 556
    finally:
        upgraded.close()
    assert _FTS_BATCH_KEY in trigger_sql(path)
    ids, fts = fts_state(path)
    assert ids == fts == set(range(1, 631))
    SQLiteStore(path).close()  # already upgraded: no second migration
    conn = sqlite3.connect(path)
    try:
        migrations = conn.execute("SELECT count(*) FROM operations WHERE op = 'migrate'").fetchone()[0]
        assert migrations == SCHEMA_VERSION + 1  # one line per schema step, one for the trigger
    finally:
        conn.close()


def test_large_batch_cache_is_for_its_transaction_only(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "cache.db")
    try:
        def cache_size() -> int:
            with store.engine.connect() as conn:
                return int(conn.exec_driver_sql("PRAGMA cache_size").scalar_one())

        default = cache_size()
        store.add_many(make_records(1_000))
        assert cache_size() == default
        with pytest.raises(DuplicateKeyError):
            store.add_many([*make_records(300, start=1_000), NewMemory(
                key="k1", content="clash", robot="r1", importance=1.0, token_count=1,
                created_at=T0, explicit_key=True)])
        assert cache_size() == default
    finally:
        store.close()


def test_in_memory_store_takes_the_batched_path() -> None:
    store = SQLiteStore(":memory:")
    try:
        results = store.add_many(make_records(400))
        assert [r.memory.id for r in results] == list(range(1, 401))
        assert store.fulltext_search("number 399", limit=1, filters=SearchFilters())[0][0] == 400
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM memories_fts WHERE memories_fts "
                                        "MATCH 'note'").scalar_one() == 400
            assert conn.exec_driver_sql("SELECT count(*) FROM htm_meta WHERE key = :k",
                                        {"k": _FTS_BATCH_KEY}).scalar_one() == 0
    finally:
        store.close()


CHILD = r"""
import sys
sys.path.insert(0, sys.argv[3])
from tests.integration.test_sqlite_bulk import make_records
from htm_core.store.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as log:
    start = 0
    while True:
        store.add_many(make_records(1_000, start=start))
        log.write(f"{start}\n")
        start += 1_000
"""


def test_sigkill_during_bulk_batches_leaves_whole_batches(tmp_path: Path) -> None:
    """A writer killed mid-bulk: every returned batch is there, no partial one, FTS intact."""
    path, log = tmp_path / "kill.db", tmp_path / "returned.log"
    SQLiteStore(path).close()
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(log), str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while (not log.exists() or len(log.read_text().split()) < 2) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.15)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    returned = len(log.read_text().split())
    assert returned >= 2, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    ids, fts = fts_state(path)
    assert ids == fts
    assert len(ids) % 1_000 == 0 and ids == set(range(1, len(ids) + 1)), "a partial batch"
    assert len(ids) >= returned * 1_000
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    store = SQLiteStore(path)
    try:
        assert store.counts("r1").total == len(ids)
        more = store.add_many(make_records(300, start=len(ids)))
        assert more[0].memory.id == len(ids) + 1
    finally:
        store.close()
    ids, fts = fts_state(path)
    assert ids == fts == set(range(1, len(ids) + 1))


def test_a_robot_first_seen_in_a_failed_batch_can_write_afterwards(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "robot.db")
    try:
        store.add_many(make_records(3))
        batch = [*make_records(300, start=3, robots=("newbot",)), NewMemory(
            key="k1", content="clash", robot="newbot", importance=1.0, token_count=1,
            created_at=T0, explicit_key=True)]
        with pytest.raises(DuplicateKeyError):
            store.add_many(batch)
        assert "newbot" not in [r.name for r in store.robots()]
        results = store.add_many(batch[:300])
        assert {r.memory.robot for r in results} == {"newbot"}
        assert [r.name for r in store.robots()] == ["newbot", "r1", "r2"]
    finally:
        store.close()


def test_first_adds_after_open_do_not_regrow_the_vector_matrix(tmp_path: Path) -> None:
    """Opening leaves spare rows, so the first add does not copy every vector to grow."""
    path = tmp_path / "grow.db"
    store = SQLiteStore(path)
    store.add_many(make_records(4_000))
    store.close()
    store = SQLiteStore(path)
    try:
        index = store.mirror.index
        assert index is not None
        matrix = index._matrix
        store.add_many(make_records(1, start=4_000))
        store.add_many(make_records(900, start=4_001))
        assert index._matrix is matrix and store.mirror.index is index
        assert store.vector_search(matrix[4_500], limit=1, filters=SearchFilters())[0][0] == 4_501
    finally:
        store.close()


def has_hash_index(path: Path) -> bool:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                            "AND name = 'memories_hash'").fetchone()[0] == 1
    finally:
        conn.close()


def test_bulk_load_gives_what_the_plain_path_gives(tmp_path: Path) -> None:
    records = make_records(1_200)
    bulk, plain = SQLiteStore(tmp_path / "bulk.db"), SQLiteStore(tmp_path / "plain.db")
    try:
        with bulk.bulk_load() as same:
            assert same is bulk and not has_hash_index(tmp_path / "bulk.db")
            for begin in range(0, 1_200, 400):
                bulk.add_many(records[begin:begin + 400])
            # The embedding cache still answers, by scanning.
            assert bulk.find_embeddings([records[5].content_hash], "test") == \
                {records[5].content_hash: pytest.approx(list(np.asarray(records[5].embedding)
                                                             / np.linalg.norm(records[5].embedding)))}
        for begin in range(0, 1_200, 400):
            plain.add_many(records[begin:begin + 400])
        assert has_hash_index(tmp_path / "bulk.db")
        assert snapshot(bulk) == snapshot(plain)
        assert searches(bulk, records) == searches(plain, records)
        hashes = [r.content_hash for r in records[::50]]
        assert bulk.find_embeddings(hashes, "test") == plain.find_embeddings(hashes, "test")
        assert [o.detail["index"] for o in reversed(bulk.operations(op="bulk_load"))] == [
            "dropped", "built"]
    finally:
        bulk.close()
        plain.close()
    ids, fts = fts_state(tmp_path / "bulk.db")
    assert ids == fts == set(range(1, 1_201))


def test_bulk_load_that_fails_keeps_committed_batches_and_rebuilds(tmp_path: Path) -> None:
    path = tmp_path / "fail.db"
    store = SQLiteStore(path)
    try:
        clash = NewMemory(key="k1", content="clash", robot="r1", importance=1.0, token_count=1,
                          created_at=T0, explicit_key=True)
        with pytest.raises(DuplicateKeyError), store.bulk_load():
            store.add_many(make_records(500))
            with store.bulk_load():  # nested: the outer block builds the index
                store.add_many(make_records(300, start=500))
            assert not has_hash_index(path)
            store.add_many([*make_records(300, start=800), clash])
        assert has_hash_index(path)
        assert store.counts("r1").total == 800
        assert store.fulltext_search("number 799", limit=1, filters=SearchFilters())[0][0] == 800
    finally:
        store.close()
    ids, fts = fts_state(path)
    assert ids == fts == set(range(1, 801))


def test_a_dead_loader_index_is_built_by_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "dead.db"
    store = SQLiteStore(path)
    store.add_many(make_records(400))
    loading = store.bulk_load()
    loading.__enter__()  # the loader "dies": its block never ends
    store.add_many(make_records(100, start=400))
    assert not has_hash_index(path)
    SQLiteStore(path, migrate=False).close()  # may not change the schema
    assert not has_hash_index(path)
    reopened = SQLiteStore(path)
    try:
        assert has_hash_index(path)
        assert reopened.operations(op="bulk_load", limit=1)[0].detail == {
            "index": "built", "reason": "left by a bulk load that did not finish"}
        assert reopened.counts("r1").total == 500
    finally:
        reopened.close()
        loading.__exit__(None, None, None)  # end the suspended block: the index is there already
        store.close()
    assert has_hash_index(path)


#: The CJK insert trigger as schema version 2 made it: a GLOB on every row inserted.
OLD_CJK_TRIGGER = f"""CREATE TRIGGER memories_cjk_ai AFTER INSERT ON memories
        WHEN new.content GLOB '{CJK_GLOB}' BEGIN
        INSERT INTO memories_cjk(rowid, content) VALUES (new.id, new.content); END"""


def cjk_contents() -> list[str]:
    """Texts with one character at, inside and just outside each end of every CJK range
    (plus plain ASCII and other non-ASCII text), so the batch path's choice of rows can be
    compared with the trigger's GLOB on every boundary."""
    out = ["plain ascii note", "café crème brûlée", "emoji only 🎉", "Ελληνικά κείμενα"]
    for lo, hi in _CJK_RANGES:
        for point in (lo - 1, lo, (lo + hi) // 2, hi, hi + 1):
            if 0xD800 <= point <= 0xDFFF:
                continue
            out.append(f"range {lo:x} edge {point:x}: x{chr(point)}y")
    return out


def cjk_state(path: Path) -> tuple[set[int], set[int]]:
    """(ids SQLite's own GLOB says hold CJK, rowids in the CJK trigram index)."""
    conn = sqlite3.connect(path)
    try:
        glob = {r[0] for r in conn.execute("SELECT id FROM memories WHERE content GLOB ?",
                                           (CJK_GLOB,))}
        indexed = {r[0] for r in conn.execute("SELECT rowid FROM memories_cjk")}
    finally:
        conn.close()
    return glob, indexed


def cjk_records(contents: list[str], *, start: int = 0) -> list[NewMemory]:
    return [NewMemory(key=f"cjk{start + i}", content=c, robot="r1", importance=1.0,
                      token_count=3, created_at=T0 + timedelta(minutes=i))
            for i, c in enumerate(contents)]


def test_batch_indexes_exactly_the_cjk_rows_the_trigger_would(tmp_path: Path) -> None:
    """A batch's CJK rows are picked in Python (the trigger's GLOB stands aside): on every
    range boundary the trigram index holds exactly the rows SQLite's GLOB matches, as
    for rows added one at a time (the trigger), and CJK search finds them."""
    path = tmp_path / "cjk.db"
    contents = cjk_contents()
    store = SQLiteStore(path)
    try:
        store.add_many(cjk_records(contents))  # one batch: the batched path
        for record in cjk_records(contents[:6], start=len(contents)):
            store.add_many([record])  # one row at a time: the trigger
        hits = store.fulltext_search("中文字", limit=5, filters=SearchFilters())
        assert hits == []
        store.add_many(cjk_records(["会議の議事録を共有します", "plain again"], start=1_000))
        hits = store.fulltext_search("議事録", limit=5, filters=SearchFilters())
        assert len(hits) == 1
    finally:
        store.close()
    glob, indexed = cjk_state(path)
    assert len(glob) > len(_CJK_RANGES)  # the boundaries inside the ranges matched
    assert indexed == glob


def test_file_with_the_per_row_cjk_trigger_is_upgraded_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old-cjk.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("DROP TRIGGER memories_cjk_ai")
        conn.execute(OLD_CJK_TRIGGER)
    finally:
        conn.close()
    contents = cjk_contents()
    kept = SQLiteStore(path, migrate=False)  # may not change the schema: keeps the old trigger
    try:
        kept.add_many(cjk_records(contents))
    finally:
        kept.close()
    assert _FTS_BATCH_KEY not in trigger_sql(path, "memories_cjk_ai")
    upgraded = SQLiteStore(path)
    try:
        assert next(o.detail for o in upgraded.operations(op="migrate")) == {
            "cjk_insert_trigger": "batched"}
        upgraded.add_many(cjk_records(contents, start=len(contents)))
    finally:
        upgraded.close()
    assert _FTS_BATCH_KEY in trigger_sql(path, "memories_cjk_ai")
    glob, indexed = cjk_state(path)
    assert indexed == glob and len(glob) > 2 * len(_CJK_RANGES)
