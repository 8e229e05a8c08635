"""The PostgreSQL bulk path: COPY batches and ``bulk_load``, against a real server.

A COPY batch must give exactly what the statement path gives (ids, keys, contents, tags,
metadata, vectors, the operations log, created flags), keep every duplicate-key rule,
write nothing when it fails part-way, and ``bulk_load`` must always leave the HNSW and
GIN indexes in place, also after a failure or a loader that died.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from htm_core import HTM, HashingEmbedder
from htm_core.errors import DimensionMismatchError, DuplicateKeyError, StoreError, ValidationError
from htm_core.models import Memory
from htm_core.store import AddResult, NewMemory, SearchFilters
from htm_core.store.postgres import PostgresStore
from htm_core.store.values import content_hash
from tests.pg import fresh_database

pytestmark = pytest.mark.postgres

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
DIM = 32
WORDS = ["kernel", "garden", "invoice", "violin", "sailing", "pasta", "tennis", "printer",
         "espresso", "glacier", "lantern", "harbor", "quartz", "meadow", "ferry", "canyon"]
INDEXES = {"memories_embedding_hnsw", "memories_tsv_gin"}


def vectors(n: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def make_records(n: int, *, prefix: str = "k", start: int = 0, seed: int = 3) -> list[NewMemory]:
    """Varied rows: tags, metadata, imported history, forgotten ones, a few without vectors."""
    vecs = vectors(start + n, seed)
    out = []
    for i in range(start, start + n):
        out.append(NewMemory(
            key=f"{prefix}{i}", content=f"note {i} about the {WORDS[i % 16]} and {WORDS[i % 7]}",
            robot=f"robot{i % 3}", importance=float(i % 11), token_count=9 + i % 5,
            created_at=T0 + timedelta(minutes=i),
            tags=(f"topic:{WORDS[i % 16]}", "Zeta", "alpha:b") if i % 3 == 0 else (),
            metadata={"i": i, "nested": {"xs": [1, 2.5, "s"]}} if i % 4 == 0 else {},
            embedding=None if i % 97 == 5 else vecs[i], embedder="test-emb",
            last_accessed=T0 + timedelta(days=1, minutes=i) if i % 7 == 0 else None,
            access_count=i % 7,
            forgotten_at=T0 + timedelta(days=2) if i % 50 == 1 else None))
    return out


def admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(make_url(url).set(drivername="postgresql")
                           .render_as_string(hide_password=False), autocommit=True)


def indexes(url: str) -> set[str]:
    with admin(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")} & INDEXES


def marker(url: str) -> str | None:
    with admin(url) as conn:
        row = conn.execute("SELECT value FROM htm_meta WHERE key = 'bulk_load'").fetchone()
        return None if row is None else str(row[0])


def snapshot(store: PostgresStore, touched: int = 0) -> dict[str, Any]:
    """Everything a load leaves behind, for comparing two stores.

    The last access of the ``touched`` memories accessed most recently is left out: a touch
    stamps it with the server's clock.
    """
    memories = [m for batch in store.iter_memories(include_embedding=True) for m in batch]
    latest = sorted(memories, key=lambda m: m.last_accessed)[len(memories) - touched:]
    memories = [replace(m, last_accessed=T0) if m in latest else m for m in memories]
    ops = [(o.op, o.robot, o.key, o.detail) for o in reversed(store.operations(limit=100_000))
           if o.op in ("add", "touch", "restore")]
    return {"memories": memories, "ops": ops, "tags": store.tags(),
            "counts": store.counts("robot0"), "robots": [(r.name, r.memory_count)
                                                         for r in store.robots()]}


@pytest.fixture
def other_url(postgres_server_url: str) -> Iterator[str]:
    yield from fresh_database(postgres_server_url)


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url)
    yield s
    s.close()


def test_bulk_load_of_5000_equals_the_statement_path(pg_url: str, other_url: str) -> None:
    records = make_records(5_000)
    again = [records[10], records[11], records[1]]  # same key, same content: touch / restore
    by_statement = PostgresStore(other_url, copy_min_rows=10**9)
    bulk = PostgresStore(pg_url)
    try:
        expected = []
        for begin in range(0, 5_000, 1_000):
            expected += by_statement.add_many(records[begin:begin + 1_000])
        expected += by_statement.add_many(again + make_records(2, prefix="late"))
        got = []
        with bulk.bulk_load():
            assert indexes(pg_url) == set() and marker(pg_url) is not None
            for begin in range(0, 5_000, 1_000):
                got += bulk.add_many(records[begin:begin + 1_000])
        got += bulk.add_many(again + make_records(2, prefix="late"))

        # Touching sets last_accessed to the server's clock, so compare those apart.
        def plain(results: list[AddResult]) -> list[tuple[Memory, bool]]:
            return [(replace(r.memory, last_accessed=T0) if 5_000 <= i < 5_003 else r.memory,
                     r.created) for i, r in enumerate(results)]

        assert plain(got) == plain(expected)
        assert [r.created for r in got[-5:]] == [False, False, False, True, True]
        assert got[-3].memory.forgotten_at is None  # a forgotten key added again is restored
        first = got[0].memory
        assert (first.key, set(first.tags), first.metadata) == (
            "k0", {"alpha:b", "topic:kernel", "Zeta"}, {"i": 0, "nested": {"xs": [1, 2.5, "s"]}})
        assert snapshot(bulk, touched=3) == snapshot(by_statement, touched=3)
        assert indexes(pg_url) == INDEXES and marker(pg_url) is None

        # Both arms find the rows, through their indexes, as the statement-built store does.
        query = vectors(5_000)[1234]
        top = bulk.vector_search(query.tolist(), limit=5, filters=SearchFilters())
        assert top[0][0] == got[1234].memory.id and top[0][1] == pytest.approx(1.0, abs=1e-5)
        again_top = by_statement.vector_search(query.tolist(), limit=5, filters=SearchFilters())
        assert again_top[0] == top[0]
        words = bulk.fulltext_search("espresso kernel", limit=10, filters=SearchFilters())
        assert words and words == by_statement.fulltext_search("espresso kernel", limit=10,
                                                               filters=SearchFilters())
        assert "memories_embedding_hnsw" in bulk.explain_search(vector=query.tolist(),
                                                                seqscan=False)
        assert "memories_tsv_gin" in bulk.explain_search(query="espresso", seqscan=False)
    finally:
        bulk.close()
        by_statement.close()


def test_searches_during_a_bulk_load_are_exact_and_the_index_is_built_at_the_end(
        store: PostgresStore, pg_url: str) -> None:
    store.hnsw_m, store.hnsw_ef_construction = 8, 40
    records = make_records(1_200, seed=9)
    with store.bulk_load():
        store.add_many(records)
        assert indexes(pg_url) == set()  # the first vector fixed the dimension, no index yet
        query = vectors(1_200, 9)[77]
        got = store.vector_search(query.tolist(), limit=10, filters=SearchFilters())
        ids = {r.key: r.id for batch in store.iter_memories() for r in batch}
        usable = [i for i, r in enumerate(records) if r.embedding is not None
                  and r.forgotten_at is None]
        matrix = vectors(1_200, 9)[usable]
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        exact = [ids[records[usable[j]].key] for j in
                 np.argsort(-(matrix @ (query / np.linalg.norm(query))))[:10]]
        assert [mid for mid, _ in got] == exact
        assert store.fulltext_search("violin", limit=3, filters=SearchFilters())
    assert indexes(pg_url) == INDEXES
    with admin(pg_url) as conn:
        indexdef = conn.execute("SELECT indexdef FROM pg_indexes "
                                "WHERE indexname = 'memories_embedding_hnsw'").fetchone()
    assert indexdef is not None and "m='8'" in indexdef[0] and "ef_construction='40'" in indexdef[0]
    assert "WHERE (forgotten_at IS NULL)" in indexdef[0]


def test_searches_from_another_store_stay_right_through_drop_load_and_build(
        pg_url: str) -> None:
    """A second store (own pool) searches all along: before, during and after the load."""
    loader, searcher = PostgresStore(pg_url), PostgresStore(pg_url)
    known = make_records(50, seed=5)
    loader.add_many(known)
    probe = vectors(50, 5)[42]
    errors: list[BaseException] = []
    seen: list[int] = []
    done = threading.Event()

    def search() -> None:
        try:
            while not done.is_set():
                top = searcher.vector_search(probe.tolist(), limit=3, filters=SearchFilters())
                words = searcher.fulltext_search("note 42", limit=50, filters=SearchFilters())
                assert top[0][1] == pytest.approx(1.0, abs=1e-5)
                assert searcher.get_many([top[0][0]])[0].key == "k42"
                assert "k42" in {m.key for m in searcher.get_many([w for w, _ in words])}
                seen.append(len(top))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    thread = threading.Thread(target=search)
    thread.start()
    try:
        with loader.bulk_load():
            for begin in range(0, 3_000, 1_000):
                loader.add_many(make_records(1_000, start=100 + begin, seed=6))
    finally:
        done.set()
        thread.join()
        loader.close()
        searcher.close()
    assert not errors, errors[0]
    assert len(seen) >= 3 and indexes(pg_url) == INDEXES


def test_a_copy_batch_with_a_conflicting_key_writes_nothing(store: PostgresStore) -> None:
    store.add_many(make_records(10))
    before = snapshot(store)
    clash = make_records(1_000, start=10)
    clash[500] = NewMemory(**{**clash[500].__dict__, "key": "k3"})  # k3 holds other content
    with pytest.raises(DuplicateKeyError, match="'k3' already holds different content"):
        store.add_many(clash)
    twice = make_records(1_000, start=10)
    twice[900] = NewMemory(**{**twice[900].__dict__, "key": twice[100].key})
    with pytest.raises(DuplicateKeyError, match="given twice in one batch"):
        store.add_many(twice)
    assert snapshot(store) == before

    same = make_records(1_000, start=10) + make_records(1, start=500)  # k500 twice, same text
    results = store.add_many(same)
    assert [r.created for r in results].count(False) == 1 and not results[-1].created
    assert results[-1].memory.id == results[490].memory.id
    assert results[-1].memory.access_count == same[490].access_count + 1


def test_a_failure_in_the_middle_of_a_bulk_load_leaves_nothing_half_written(
        store: PostgresStore, pg_url: str) -> None:
    store.add_many(make_records(20))
    with pytest.raises(DimensionMismatchError), store.bulk_load():
        store.add_many(make_records(1_000, start=20))
        bad = make_records(1_000, start=1_020)
        bad[600] = NewMemory(**{**bad[600].__dict__, "embedding": [1.0] * (DIM + 1)})
        store.add_many(bad)
    assert indexes(pg_url) == INDEXES and marker(pg_url) is None
    assert store.counts("robot0").total + store.counts("robot0").forgotten == 1_020
    assert store.get("k1019", include_forgotten=True) is not None
    assert store.get("k1020", include_forgotten=True) is None

    # A row the server refuses while the COPY is streaming (NUL in text) aborts the batch.
    nul = make_records(1_000, start=2_000)
    nul[700] = NewMemory(**{**nul[700].__dict__, "content": "bad \x00 text"})
    with pytest.raises(StoreError):
        store.add_many(nul)
    assert store.get("k2000", include_forgotten=True) is None
    assert len([o for o in store.operations(limit=10_000) if o.op == "add"]) == 1_020


def commit_key_on_first_lookup(store: PostgresStore, url: str, key: str, content: str) -> Any:
    """Make another writer commit ``key`` right after the batch has looked for its keys."""
    fired: list[bool] = []

    def insert(_c: Any, _cur: Any, sql: str, *_: Any) -> None:
        if "FOR UPDATE" in sql and not fired:
            fired.append(True)
            with admin(url) as conn:
                conn.execute(
                    "INSERT INTO memories(key, content, content_hash, robot_id, token_count, "
                    "created_at, last_accessed) SELECT %s, %s, %s, id, 1, now(), now() "
                    "FROM robots ORDER BY id LIMIT 1", (key, content, content_hash(content)))

    event.listen(store.engine, "after_cursor_execute", insert)
    return insert


def test_a_key_committed_by_another_writer_during_the_copy_is_handled(
        store: PostgresStore, pg_url: str) -> None:
    store.add_many(make_records(1))
    batch = make_records(400, start=1)
    hook = commit_key_on_first_lookup(store, pg_url, "k200", batch[199].content)
    results = store.add_many(batch)  # same content: the batch touches it instead of failing
    event.remove(store.engine, "after_cursor_execute", hook)
    assert [r.created for r in results].count(False) == 1 and not results[199].created
    assert results[199].memory.access_count == 1
    counts = store.counts("robot0")
    assert counts.total + counts.forgotten == 401

    hook = commit_key_on_first_lookup(store, pg_url, "k1200", "someone else's words")
    with pytest.raises(DuplicateKeyError, match="'k1200' already holds different content"):
        store.add_many(make_records(400, start=1_000))
    event.remove(store.engine, "after_cursor_execute", hook)
    assert store.get("k1000") is None and store.get("k1200") is not None
    counts = store.counts("robot0")
    assert counts.total + counts.forgotten == 402


def test_a_loader_that_died_has_its_indexes_rebuilt_by_the_next_store(pg_url: str) -> None:
    first = PostgresStore(pg_url)
    first.add_many(make_records(300))
    with first.bulk_load():
        first.add_many(make_records(300, start=300))
        # While a loader is alive, a store that opens leaves its indexes alone.
        PostgresStore(pg_url).close()
        assert indexes(pg_url) == set()
    first.close()
    # Now a loader that died: its marker is left behind and the indexes are gone.
    with admin(pg_url) as conn:
        conn.execute("INSERT INTO htm_meta(key, value) VALUES ('bulk_load', '{}')")
        conn.execute("DROP INDEX memories_embedding_hnsw")
        conn.execute("DROP INDEX memories_tsv_gin")
    reopened = PostgresStore(pg_url)
    try:
        assert indexes(pg_url) == INDEXES and marker(pg_url) is None
        assert "memories_embedding_hnsw" in reopened.explain_search(
            vector=vectors(600)[5].tolist(), seqscan=False)
        assert reopened.rebuild_indexes() == []  # nothing missing any more
    finally:
        reopened.close()


def test_bulk_load_through_htm_and_defer_fulltext_off(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    with HTM(robot="importer", store=store, embedder=HashingEmbedder(dim=DIM)) as htm:
        with store.bulk_load(defer_fulltext=False, maintenance_work_mem_mb=64,
                             parallel_workers=0):
            assert indexes(pg_url) == {"memories_tsv_gin"}
            added = htm.add_many([{"content": f"imported line {i} on {WORDS[i % 16]}",
                                   "tags": ["import:old"]} for i in range(600)],
                                 working_memory=False)
        assert len({m.id for m in added}) == 600
        assert indexes(pg_url) == INDEXES
        line = f"imported line 417 on {WORDS[417 % 16]}"
        hits = htm.recall(line, limit=3)
        assert hits and hits[0].memory.content == line
        assert htm.stats().long_term_total == 600


def test_naive_times_take_the_statement_path_and_match_it(pg_url: str, other_url: str) -> None:
    naive = [NewMemory(**{**r.__dict__, "created_at": r.created_at.replace(tzinfo=None),
                          "last_accessed": None, "forgotten_at": None})
             for r in make_records(300)]
    copy_store, statement_store = PostgresStore(pg_url), PostgresStore(other_url,
                                                                        copy_min_rows=10**9)
    try:
        assert [r.memory for r in copy_store.add_many(naive)] == [
            r.memory for r in statement_store.add_many(naive)]
    finally:
        copy_store.close()
        statement_store.close()


def test_bad_settings_are_refused(pg_url: str) -> None:
    with pytest.raises(ValidationError, match="copy_min_rows"):
        PostgresStore(pg_url, copy_min_rows=0)
    store = PostgresStore(pg_url)
    try:
        with pytest.raises(ValidationError, match="maintenance_work_mem_mb"), \
                store.bulk_load(maintenance_work_mem_mb=0):
            pytest.fail("the block must not run")
        with pytest.raises(ValidationError, match="parallel_workers"):
            store.rebuild_indexes(parallel_workers=-1)
    finally:
        store.close()


def working(store: PostgresStore, robot: str) -> dict[str, Any]:
    """A robot's persisted working memory and the log of its changes, for comparing stores."""
    version, rows = store.working_rows(robot)
    return {"version": version,
            "rows": [(r.memory.key, r.memory.access_count, r.memory.forgotten_at, r.state)
                     for r in rows],
            "ops": [(o.op, o.key) for o in reversed(store.operations(limit=100_000))
                    if o.op in ("add", "evict", "touch", "restore")]}


def test_htm_batches_entering_working_memory_equal_the_statement_path(
        pg_url: str, other_url: str) -> None:
    """With working memory on, a COPY batch builds its results and working-memory change
    while the server still inserts the rows and copies the new memories' entries in; what
    it leaves is what the statement path leaves, also for a batch that mixes new memories
    with a forgotten one added again (restored, and entering like the rest)."""
    from htm_core import FrozenClock

    clock = FrozenClock(T0)
    emb = HashingEmbedder(dim=DIM)
    items = [{"content": f"fact {i} on the {WORDS[i % 16]} and {WORDS[i % 5]}", "key": f"f{i}",
              "importance": float(1 + i % 9), "tags": [WORDS[i % 3]] if i % 4 == 0 else [],
              "metadata": {"n": i} if i % 6 == 0 else None} for i in range(300)]
    states = []
    for url, copy_min_rows in ((pg_url, 16), (other_url, 10**9)):
        with HTM(robot="r1", store=PostgresStore(url, copy_min_rows=copy_min_rows),
                 embedder=emb, clock=clock, working_memory_tokens=400) as htm:
            first = htm.add_many(items[:120])
            htm.forget("f3", confirm=True)
            again = htm.add_many([*items[120:200], items[3]])
            last = htm.add_many(items[200:])
            states.append((working(htm.store, "r1"), [i.key for i in htm._wm.items()],
                           [(m.key, m.tags, m.metadata) for m in first + again + last]))
    assert states[0] == states[1]
    assert states[0][0]["rows"] and ("restore", "f3") in states[0][0]["ops"]


def test_a_working_change_that_fails_during_the_copy_leaves_nothing(store: PostgresStore) -> None:
    """The working-memory change of a COPY batch is made while the rows stream; when making
    it fails, the COPY is abandoned and the batch rolled back, and the store goes on."""
    from htm_core.store.base import WorkingChange, WorkingState

    store.add_many(make_records(5))

    def fail(_results: list[AddResult]) -> WorkingChange:
        raise RuntimeError("the working memory could not take the batch")

    with pytest.raises(RuntimeError, match="could not take"):
        store.add_and_enter(make_records(300, start=5), working=fail)
    assert store.get("k5", include_forgotten=True) is None
    assert len(store.operations(op="add", limit=10_000)) == 5

    # A batch entering working memory: its new memories (one of them added as forgotten,
    # which is refused) and one that existed, forgotten, and is restored by the batch.
    store.forget("k0", robot="robot0", at=T0)
    batch = [*make_records(300, start=5), make_records(1)[0]]

    def enter(results: list[AddResult]) -> WorkingChange:
        return WorkingChange(robot="r1", at=T0, put=[
            WorkingState(key=r.memory.key, last_accessed=T0, access_count=0, seq=n, access_seq=n)
            for n, r in enumerate(results)])

    results, applied = store.add_and_enter(batch, working=enter)
    assert applied is not None
    assert applied.refused == {r.memory.key for r in results if r.memory.forgotten_at}
    assert "k51" in applied.refused and "k0" not in applied.refused  # k51 came forgotten
    _version, rows = store.working_rows("r1")
    assert [r.memory.key for r in rows] == [r.memory.key for r in results
                                            if r.memory.forgotten_at is None]
    assert [r.state.seq for r in rows] == [n for n, r in enumerate(results)
                                           if r.memory.forgotten_at is None]


def test_a_vector_that_is_not_finite_fails_its_batch_also_late_in_the_copy(
        store: PostgresStore) -> None:
    """A COPY converts vectors a chunk at a time as the rows go out: a NaN in a late chunk
    still fails the whole batch (nothing written), and so does one in a record that only
    touches an existing memory. The error is htm's alone (no numpy warning about the
    division on the way)."""
    store.add_many(make_records(5))
    batch = make_records(300, start=5)
    batch[250] = replace(batch[250], embedding=[float("nan")] * DIM)
    with pytest.raises(DimensionMismatchError, match="k255"):
        store.add_many(batch)
    assert store.get("k5", include_forgotten=True) is None
    assert len(store.operations(op="add", limit=10_000)) == 5

    touching = [replace(make_records(1)[0], embedding=[float("inf")] * DIM),
                *make_records(100, start=5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # inf / inf is numpy's invalid value
        with pytest.raises(DimensionMismatchError, match="k0"):
            store.add_many(touching)
    assert store.get("k5", include_forgotten=True) is None
    assert [r.created for r in store.add_many(make_records(300, start=5))] == [True] * 300


def test_a_copy_batch_gives_a_unix_socket_room_for_the_whole_batch(pg_url: str) -> None:
    """So that the client's work after sending the rows overlaps the server's inserting
    them, a COPY batch on a Unix-socket connection raises its send buffer (up to what the
    kernel allows); the rows arrive whole."""
    import socket
    from pathlib import Path

    limit = Path("/proc/sys/net/core/wmem_max")
    if not limit.exists():
        pytest.skip("needs Linux's net.core.wmem_max")
    store = PostgresStore(pg_url, pool_size=1, max_overflow=0)
    try:
        def send_buffer() -> tuple[int, int]:
            with store.engine.connect() as conn:
                driver = conn.connection.driver_connection
                with socket.socket(fileno=os.dup(driver.pgconn.socket)) as sock:
                    return sock.family, sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)

        family, before = send_buffer()
        if family != socket.AF_UNIX:
            pytest.skip("the test server is reached over TCP")
        store.add_many(make_records(300))
        _family, after = send_buffer()
        assert after >= min(2 * 4 * 2**20, 2 * int(limit.read_text())) > before or (
            after == before >= 2 * 4 * 2**20)
        assert store.counts("robot0").total + store.counts("robot0").forgotten == 300
    finally:
        store.close()
