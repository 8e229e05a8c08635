"""What only the PostgreSQL + pgvector store has to show: indexes, migrations, errors, pooling.

Every test runs on a real PostgreSQL 16 + pgvector server (``HTM_TEST_DATABASE_URL`` or a
throwaway pgserver), each in a fresh database.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from htm_core import HTM, HashingEmbedder
from htm_core.errors import (
    DatabaseUnavailableError,
    DimensionMismatchError,
    DuplicateKeyError,
    HTMError,
    SchemaError,
    StoreError,
    ValidationError,
)
from htm_core.recall import search
from htm_core.store import SCHEMA_VERSION, NewMemory, SearchFilters, open_store
from htm_core.store.base import ArmQuery
from htm_core.store.postgres import DEFAULT_EF_SEARCH, PostgresStore, postgres_url

pytestmark = pytest.mark.postgres

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
EMB = HashingEmbedder(dim=64)


def rec(content: str, *, key: str, robot: str = "r1", when: datetime = T0,
        tags: tuple[str, ...] = (), embed: bool = True, emb: HashingEmbedder = EMB) -> NewMemory:
    return NewMemory(key=key, content=content, robot=robot, importance=1.0,
                     token_count=len(content.split()), created_at=when, tags=tags,
                     embedding=emb.embed_query(content) if embed else None,
                     embedder=emb.name if embed else None, explicit_key=True)


def notes(n: int, *, robot: str = "r1", prefix: str = "n") -> list[NewMemory]:
    return [rec(f"note {i} about topic {i % 17} in colour {i % 5}", key=f"{prefix}{i}",
                robot=robot, when=T0 + timedelta(minutes=i)) for i in range(n)]


def admin(url: str) -> psycopg.Connection:
    """A plain psycopg connection to the same database, for checks from outside the store."""
    return psycopg.connect(make_url(url).set(drivername="postgresql")
                           .render_as_string(hide_password=False), autocommit=True)


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url)
    yield s
    s.close()


def statements(store: PostgresStore) -> list[tuple[str, object]]:
    """Record every SQL statement the store sends from now on."""
    seen: list[tuple[str, object]] = []
    event.listen(store.engine, "before_cursor_execute",
                 lambda _c, _cur, sql, params, _ctx, _many: seen.append((sql, params)))
    return seen


# -- indexes --------------------------------------------------------------------------

def test_explain_of_recall_queries_uses_hnsw_and_gin_indexes(store, pg_url):
    store.add_many(notes(400))
    with admin(pg_url) as conn:
        conn.execute("ANALYZE memories")
    query = EMB.embed_query("topic 3 in colour 2")
    vector_plan = store.explain_search(vector=query, limit=10, seqscan=False)
    assert "Index Scan using memories_embedding_hnsw" in vector_plan
    text_plan = store.explain_search(query="topic colour", limit=10, seqscan=False)
    assert "memories_tsv_gin" in text_plan and "Seq Scan" not in text_plan
    # The explained statements are the ones recall runs: same results as the real search.
    assert len(store.vector_search(query, limit=10, filters=SearchFilters())) == 10
    assert len(store.fulltext_search("topic colour", limit=10, filters=SearchFilters())) == 10
    # A timeframe filter is served by the created_at B-tree.
    window = SearchFilters(start=T0, end=T0 + timedelta(minutes=20))
    assert "memories_created_at" in store.explain_search(query="topic", filters=window,
                                                         seqscan=False)


def test_dimension_is_fixed_in_the_column_and_hnsw_index_on_first_vector(pg_url):
    store = PostgresStore(pg_url, hnsw_m=8, hnsw_ef_construction=40)
    try:
        store.add_many([rec("no vector yet", key="plain", embed=False)])
        with admin(pg_url) as conn:
            col = "SELECT format_type(atttypid, atttypmod) FROM pg_attribute " \
                  "WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
            idx = "SELECT indexdef FROM pg_indexes WHERE indexname = 'memories_embedding_hnsw'"
            assert conn.execute(col).fetchone()[0] == "vector"
            assert conn.execute(idx).fetchone() is None
            store.add_many([rec("first vector", key="v1")])
            assert conn.execute(col).fetchone()[0] == "vector(64)"
            indexdef = conn.execute(idx).fetchone()[0]
            assert "hnsw" in indexdef and "vector_cosine_ops" in indexdef
            assert "m='8'" in indexdef and "ef_construction='40'" in indexdef
            store.reset_embeddings()
            assert conn.execute(col).fetchone()[0] == "vector"
            assert store.embedding_info() is None
            wide = HashingEmbedder(dim=32)
            store.add_many([rec("second life", key="v2", emb=wide)])
            assert conn.execute(col).fetchone()[0] == "vector(32)"
            assert store.embedding_info() == (wide.name, 32)
            assert store.get("plain") is not None and store.get("v1") is not None  # nothing dropped
    finally:
        store.close()


def test_filtered_vector_search_is_not_starved_by_the_approximate_index(store):
    store.add_many(notes(400, robot="r1"))
    store.add_many(notes(5, robot="r2", prefix="rare"))
    store.add_many([rec("tagged note about topic 3", key="t1", tags=("proj:x",))])
    query = EMB.embed_query("note about topic 3 in colour 3")
    hits = store.vector_search(query, limit=5, filters=SearchFilters(robot="r2"), ef_search=10)
    assert {m.key for m in store.get_many([h[0] for h in hits])} == {f"rare{i}" for i in range(5)}
    hits = store.vector_search(query, limit=5, filters=SearchFilters(tags=("proj",)), ef_search=10)
    assert [m.key for m in store.get_many([h[0] for h in hits])] == ["t1"]


def raw_statements(store: PostgresStore) -> list[tuple[str, object]]:
    """Record every statement the store's own read connection (the recall path's reads:
    searches, briefs, memories, the recall check) sends from now on."""
    store.briefs([1], SearchFilters())  # the read connection exists after a first read
    pg = store.database.raw_connection
    assert pg is not None
    seen: list[tuple[str, object]] = []

    class Recording(psycopg.Cursor):  # Connection.execute makes its cursor here too
        def execute(self, query, params=None, **kwargs):  # type: ignore[override]
            seen.append((str(query), params))
            return super().execute(query, params, **kwargs)

    pg.cursor_factory = Recording
    return seen


def test_ef_search_is_set_per_query(store):
    store.add_many(notes(20))
    seen = raw_statements(store)
    query = EMB.embed_query("topic 4")
    store.vector_search(query, limit=3, filters=SearchFilters(), ef_search=123)
    store.vector_search(query, limit=3, filters=SearchFilters())
    values = [p[0] for sql, p in seen if "hnsw.ef_search" in sql]  # type: ignore[index]
    assert values == ["123", str(DEFAULT_EF_SEARCH)]
    # The read connection keeps the value in its session: asking again sends nothing,
    # and the dimension was read once.
    assert sum("embedding_dim" in sql for sql, _ in seen) == 1
    seen.clear()
    store.vector_search(query, limit=3, filters=SearchFilters())
    assert [sql for sql, _ in seen if "hnsw.ef_search" in sql or "embedding_dim" in sql] == []
    own = store.database.raw_connection
    assert own.execute("SHOW hnsw.ef_search").fetchone()[0] == str(DEFAULT_EF_SEARCH)
    with pytest.raises(ValidationError, match="ef_search"):
        store.vector_search(query, limit=3, filters=SearchFilters(), ef_search=0)


def test_cached_dimension_follows_a_reset_by_another_process(pg_url):
    """The dimension is cached after the first vector search; when another store resets the
    vectors and re-embeds at another dimension, a query of the new dimension works and one
    of the old dimension is refused."""
    mine, other = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        mine.add_many(notes(30))
        query = EMB.embed_query("topic 4")
        assert len(mine.vector_search(query, limit=3, filters=SearchFilters())) == 3
        narrow = HashingEmbedder(dim=16)
        other.reset_embeddings()
        other.add_many([rec("note about topic 4 again", key="narrow", emb=narrow)])
        hits = mine.vector_search(narrow.embed_query("topic 4"), limit=3, filters=SearchFilters())
        assert [h[0] for h in hits] == [other.get("narrow").id]  # type: ignore[union-attr]
        with pytest.raises(DimensionMismatchError):
            mine.vector_search(query, limit=3, filters=SearchFilters())
    finally:
        mine.close()
        other.close()


def test_common_words_are_judged_by_the_statistics_once_analyzed(store, pg_url):
    """A name in nearly every memory does not widen the full-text candidates: counted
    while the table has no statistics, read from them (no count) once it is analyzed."""
    store.add_many([rec(f"Ana: filler line number {i}", key=f"f{i}") for i in range(240)]
                   + [rec("Bo: I bought a used vehicle", key="v0")])
    seen = raw_statements(store)

    def keys(query: str) -> list[str]:
        hits = store.fulltext_search(query, limit=5, filters=SearchFilters())
        return [m.key for m in store.get_many([h[0] for h in hits])]

    def searched() -> str:
        return [sql for sql, _ in seen if "ts_rank" in sql][-1]

    # As before any ANALYZE (whatever autovacuum may have done meanwhile): counted.
    store.searcher.common_lexemes.cached = (time.monotonic(), None)
    assert keys("Ana vehicle") == ["v0"]
    assert "count(*)" in searched() and "<@" not in searched()
    with admin(pg_url) as conn:
        conn.execute("ANALYZE memories")
    store.searcher.common_lexemes.cached = None  # the cached read would otherwise last a minute
    assert "ana" in (store.searcher.common_lexemes() or [])
    assert keys("Ana vehicle") == ["v0"]
    assert "count(*)" not in searched() and "<@" in searched()
    assert len(keys("Ana")) == 5  # a common word alone still matches


def test_recall_reads_see_another_store_forget_at_once(store, pg_url):
    """The recall path's reads (searches, briefs, memories, the recall check) run on the
    store's own connection in autocommit, each statement its own snapshot: a memory
    another store object forgets is gone from every one of them at the next call, also
    once psycopg has prepared those statements; and a restore brings it back."""
    store.add_many(notes(40))
    target = store.get("n3")
    assert target is not None
    query = EMB.embed_query(target.content)
    everyone = [m.id for m in store.get_many(list(range(1, 41)))]

    def seen() -> tuple[bool, ...]:
        by_vector = [h[0] for h in store.vector_search(query, limit=40, filters=SearchFilters())]
        by_text = [h[0] for h in store.fulltext_search("note topic 3", limit=40,
                                                       filters=SearchFilters())]
        arms = store.search_arms([ArmQuery(vector=query, limit=40, filters=SearchFilters()),
                                  ArmQuery(text="note topic 3", limit=40, filters=SearchFilters())])
        return (target.id in by_vector, target.id in by_text,
                target.id in {h[0] for arm in arms for h in arm},
                target.id in store.briefs(everyone, SearchFilters()),
                target.id in {m.id for m in store.get_many(everyone)},
                target.id not in store.recall_check("r1", everyone)[1])

    for _ in range(7):  # prepared after five runs
        assert seen() == (True,) * 6
    other = PostgresStore(pg_url)
    try:
        other.forget("n3", robot="r1", at=T0 + timedelta(days=1))
        assert seen() == (False,) * 6
        other.restore("n3", robot="r1")
        assert seen() == (True,) * 6
    finally:
        other.close()


def test_recall_reads_while_the_own_connection_is_busy(store):
    """A thread that finds the store's own read connection taken runs its read on a pooled
    connection, with the same answer (ef_search set on that connection's session)."""
    store.add_many(notes(40))
    query = EMB.embed_query("note 3 about topic 3")
    alone = store.vector_search(query, limit=5, filters=SearchFilters(), ef_search=77)
    ids = [h[0] for h in alone]
    with store.database.raw_lock:  # as if another thread were reading
        assert store.vector_search(query, limit=5, filters=SearchFilters(), ef_search=77) == alone
        assert sorted(store.briefs(ids, SearchFilters())) == sorted(ids)
        assert [m.id for m in store.get_many(ids)] == ids
        assert store.recall_check("r1", ids)[1] == frozenset()
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW hnsw.ef_search").scalar() == "77"


# -- writing --------------------------------------------------------------------------

def test_a_batch_of_adds_is_a_fixed_number_of_statements_or_copies(store):
    """Whatever its size, a batch is a fixed number of statements (small batches) or
    COPYs (large ones): never one statement per row."""
    store.add_many(notes(1, prefix="warm"))  # fixes the dimension, registers the robot
    seen = statements(store)
    store.add_many(notes(1, prefix="one"))
    one = len(seen)
    seen.clear()
    store.add_many([rec(f"tagged {i}", key=f"many{i}", tags=("a:b", f"t{i % 3}"))
                    for i in range(300)])
    # + the two tag statements, whatever the batch size; the COPYs go by the driver (unseen
    # here) and need no statement to look up the vector type (pgvector's codec knows it)
    assert len(seen) == one + 1
    assert store.counts("r1").total == 302
    assert store.tags() == {"a:b": 300, "t0": 100, "t1": 100, "t2": 100}


def test_concurrent_writers_never_lose_or_duplicate(pg_url):
    """Four threads, each with its own store (own pool), add the same 60 keys at once."""
    stores = [PostgresStore(pg_url, pool_size=1) for _ in range(4)]
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def work(s: PostgresStore) -> None:
        try:
            barrier.wait()
            for start in range(0, 60, 10):
                s.add_many([rec(f"shared fact {i}", key=f"shared{i}") for i in range(start, start + 10)])
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        s = stores[0]
        assert s.counts("r1").total == 60
        every = [m for batch in s.iter_memories() for m in batch]
        assert sorted(m.key for m in every) == sorted(f"shared{i}" for i in range(60))
        assert all(m.access_count == 3 for m in every)  # created once, touched by the 3 others
        assert len(s.operations(op="add", limit=1000)) == 60
        assert len(s.operations(op="touch", limit=1000)) == 180
        with pytest.raises(DuplicateKeyError):
            s.add_many([rec("another text", key="shared0")])
    finally:
        for s in stores:
            s.close()


def test_driver_errors_are_mapped_at_the_boundary(store):
    bad = NewMemory(key="nul", content="a\x00b", robot="r1", importance=1.0, token_count=1,
                    created_at=T0)
    with pytest.raises(StoreError) as info:
        store.add_many([bad])
    assert not isinstance(info.value, DatabaseUnavailableError)
    assert info.value.__cause__ is not None
    assert store.get("nul") is None


# -- schema ---------------------------------------------------------------------------

def test_fresh_database_is_migrated_with_extension_and_log(store, pg_url):
    assert store.schema_version() == SCHEMA_VERSION
    assert [o.detail for o in store.operations(op="migrate")] == [
        {"from": v - 1, "to": v} for v in range(SCHEMA_VERSION, 0, -1)]
    with admin(pg_url) as conn:
        assert conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        types = dict(conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = 'memories'").fetchall())
        assert types["created_at"] == "timestamp with time zone" and types["tsv"] == "tsvector"
        assert types["metadata"] == "jsonb"
    assert store.migrate() == SCHEMA_VERSION
    assert len(store.operations(op="migrate")) == SCHEMA_VERSION  # nothing re-run


def test_processes_opening_a_fresh_database_together_migrate_once(pg_url):
    opened: list[PostgresStore] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def open_one() -> None:
        try:
            barrier.wait()
            opened.append(PostgresStore(pg_url, pool_size=1))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == [] and len(opened) == 4
        assert len(opened[0].operations(op="migrate")) == SCHEMA_VERSION  # one line per step
    finally:
        for s in opened:
            s.close()


def test_newer_schema_is_refused_and_nothing_is_dropped(store, pg_url):
    store.add_many([rec("keep me", key="keep")])
    with admin(pg_url) as conn:
        conn.execute("UPDATE htm_meta SET value = %s WHERE key = 'schema_version'",
                     (str(SCHEMA_VERSION + 1),))
    with pytest.raises(SchemaError, match="newer than this htm"):
        PostgresStore(pg_url)
    with pytest.raises(SchemaError, match="upgrade htm"):
        store.migrate()
    with admin(pg_url) as conn:
        assert conn.execute("SELECT content FROM memories WHERE key = 'keep'").fetchone() == (
            "keep me",)


def test_unmigrated_database_without_migrate_names_the_command(pg_url):
    with pytest.raises(SchemaError, match="htm migrate"):
        PostgresStore(pg_url, migrate=False)
    store = PostgresStore(pg_url)  # and migrate=True creates it
    store.close()
    PostgresStore(pg_url, migrate=False).close()


def test_missing_vector_extension_is_a_clear_error(postgres_server_url):
    """A role that may not create extensions, on a database without ``vector``."""
    role = f"htm_limited_{uuid.uuid4().hex[:8]}"
    name = f"htm_noext_{uuid.uuid4().hex[:8]}"
    server = make_url(postgres_server_url)
    root = server.set(drivername="postgresql", database="postgres").render_as_string(
        hide_password=False)
    with psycopg.connect(root, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    limited = server.set(database=name, username=role, password=None).render_as_string(
        hide_password=False)
    try:
        with pytest.raises(SchemaError, match="CREATE EXTENSION vector") as info:
            PostgresStore(limited)
        assert name in str(info.value) and "superuser" in str(info.value)
        superuser = server.set(drivername="postgresql", database=name).render_as_string(
            hide_password=False)
        with psycopg.connect(superuser, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        store = PostgresStore(limited)  # what the message said to do works
        store.add_many([rec("works now", key="ok")])
        assert store.get("ok") is not None
        store.close()
    finally:
        with psycopg.connect(root, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


# -- connecting -----------------------------------------------------------------------

def test_unreachable_server_names_the_url_without_the_password():
    url = "postgresql://htm:s3cret-pw@127.0.0.1:9/htm"
    with pytest.raises(DatabaseUnavailableError) as info:
        PostgresStore(url, connect_timeout=2)
    message = str(info.value)
    assert "s3cret-pw" not in message and "127.0.0.1:9" in message and "***" in message
    assert "check the server is running" in message
    assert isinstance(info.value.__cause__, OperationalError)
    with pytest.raises(DatabaseUnavailableError):
        HTM(robot="a", database_url=url, embedder=HashingEmbedder())


def test_url_forms(pg_url):
    plain = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    for form in (plain, plain.replace("postgresql://", "postgres://", 1),
                 plain.replace("postgresql://", "postgresql+psycopg://", 1)):
        store = open_store(form)
        assert store.backend == "postgres" and store.schema_version() == SCHEMA_VERSION
        store.close()
    assert postgres_url("postgres://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    with pytest.raises(ValidationError, match="psycopg"):
        PostgresStore("postgresql+asyncpg://u@h/db")
    with pytest.raises(ValidationError, match="hnsw_ef_construction"):
        PostgresStore(pg_url, hnsw_m=32, hnsw_ef_construction=40)


def test_htm_on_postgres_end_to_end(pg_url):
    with HTM(robot="a", database_url=pg_url, embedder=HashingEmbedder()) as htm:
        htm.add("User prefers Vim keybindings", importance=9.0, key="pref-vim",
                tags=["user:preferences"])
        hits = htm.recall("vim keybindings", tags=["user"])
        assert [h.memory.key for h in hits] == ["pref-vim"]
        stats = htm.stats()
        assert stats.backend == "postgres" and "postgresql" in stats.database
        assert isinstance(stats.long_term_total, int) and stats.long_term_total == 1
    with pytest.raises(HTMError):
        HTM(robot="b", database_url=pg_url, embedder=HashingEmbedder(dim=32))


def test_an_exhausted_pool_is_a_clear_error(pg_url):
    store = PostgresStore(pg_url, pool_size=1, max_overflow=0, pool_timeout=0.2)
    held = store.engine.connect()  # the only connection, checked out and not returned
    try:
        with pytest.raises(DatabaseUnavailableError, match="pool_size"):
            store.counts("r1")
        held.close()
        assert store.counts("r1").total == 0  # usable again once a connection is free
    finally:
        held.close()
        store.close()


def test_a_pool_of_one_connection_serves_a_hybrid_recall(pg_url):
    """Every read of a recall (the word statistics, the arms, the briefs) takes the one
    connection in turn: none waits for a connection its own caller holds."""
    store = PostgresStore(pg_url, pool_size=1, max_overflow=0, pool_timeout=0.5)
    try:
        store.add_many(notes(250))
        with admin(pg_url) as conn:
            conn.execute("ANALYZE memories")
        store.searcher.common_lexemes.cached = None  # the statistics are read inside this recall
        hits = search(store, query="topic 4 colour 2", strategy="hybrid", limit=5,
                      query_vector=lambda: EMB.embed_query("topic 4 colour 2"),
                      filters=SearchFilters())
        assert len(hits) == 5
    finally:
        store.close()


def test_a_reset_waits_for_a_write_checked_against_the_old_embedder(pg_url):
    """A write has passed the embedder check (it read the store's meta) when another
    process's reembed() resets the vectors. The reset waits for that write to commit and
    then drops its vector too, so no old-model vector survives into the re-embedded store."""
    writer, resetter = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        writer.add_many([rec("note one", key="one")])
        target = writer.get("one").id  # type: ignore[union-attr]
        done = threading.Event()
        with writer.engine.connect() as conn:
            trans = conn.begin()
            writer.columns.check_embedding(conn, EMB.name, 64)  # the check every vector write makes
            thread = threading.Thread(target=lambda: (resetter.reset_embeddings(), done.set()))
            thread.start()
            with admin(pg_url) as watcher:  # until the reset has finished, or waits on a lock
                for _ in range(3000):
                    if done.is_set() or watcher.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                            "current_database() AND wait_event_type = 'Lock'").fetchone()[0]:
                        break
                    time.sleep(0.01)
            conn.execute(text("UPDATE memories SET embedding = CAST(:v AS vector), embedder = :n "
                              "WHERE id = :id"),
                         {"v": str(EMB.embed_query("note one")), "n": EMB.name, "id": target})
            trans.commit()
        thread.join(60)
        assert done.is_set()
        assert resetter.embedding_info() is None
        assert resetter.get("one", include_embedding=True).embedding is None  # type: ignore[union-attr]
    finally:
        writer.close()
        resetter.close()
