"""Scoped searches on PostgreSQL: a tag filter (a user's scope) is searched exactly when
the scope is small and through the index, with its tag tested on each row, when it is
large; both give the scope's own nearest memories, never another scope's.

Real PostgreSQL 16 + pgvector server (``HTM_TEST_DATABASE_URL`` or a throwaway pgserver),
a fresh database per test. The scope-size threshold is lowered so that a store of a few
hundred memories takes both paths.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
import pytest
from sqlalchemy.engine import make_url

from htm_core.scope import ChatScope
from htm_core.store import NewMemory, SearchFilters
from htm_core.store.base import ArmQuery
from htm_core.store.postgres import PostgresStore
from htm_core.store.postgres.search import iterative_scans

pytestmark = pytest.mark.postgres

T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)
DIM = 16
EMBEDDER = "clustered-16"
#: Users drawn to collide: letter case, a prefix of another id, a hashed slug.
USERS = {"ada": 240, "Ada": 6, "adam": 60, "ada:x": 3}


def tag_of(user: str) -> str:
    return ChatScope.of(user_id=user).recall_tag


@pytest.fixture
def scoped(pg_url: str) -> Iterator[tuple[PostgresStore, dict[str, dict[int, np.ndarray]]]]:
    """A store holding the memories of ``USERS`` (a few in a session below the user's
    tag), all near four shared topics; and each user's vectors by memory id."""
    rng = np.random.default_rng(3)
    centers = rng.standard_normal((4, DIM))
    records, owners = [], []
    for user, count in USERS.items():
        scope = ChatScope.of(user_id=user)
        for i in range(count):
            vector = centers[i % 4] + 0.5 * rng.standard_normal(DIM)
            session = ChatScope.of(user_id=user, session_id="s1") if i % 7 == 0 else scope
            records.append(NewMemory(
                key=scope.own_key(f"m{i}"), content=f"{user} said the garden note {i}",
                robot="service", importance=1.0, token_count=6,
                created_at=T0 + timedelta(minutes=len(records)), tags=(session.tag,),
                embedding=(vector / np.linalg.norm(vector)).tolist(), embedder=EMBEDDER,
                explicit_key=True))
            owners.append(user)
    store = PostgresStore(pg_url)
    try:
        done = store.add_many(records)
        vectors: dict[str, dict[int, np.ndarray]] = {u: {} for u in USERS}
        for owner, record, result in zip(owners, records, done, strict=True):
            vectors[owner][result.memory.id] = np.asarray(record.embedding)
        with psycopg.connect(make_url(pg_url).set(drivername="postgresql").render_as_string(
                hide_password=False), autocommit=True) as conn:
            conn.execute("ANALYZE")
        yield store, vectors
    finally:
        store.close()


def exact(vectors: dict[int, np.ndarray], query: np.ndarray, k: int) -> list[int]:
    ids = list(vectors)
    scores = np.array([vectors[i] @ query for i in ids])
    return [ids[j] for j in np.argsort(-scores, kind="stable")[:k]]


def queries(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(9)
    return [q / np.linalg.norm(q) for q in rng.standard_normal((n, DIM))]


@pytest.mark.parametrize("threshold", [1, 50, 10**6])
def test_scoped_vector_search_is_the_scopes_exact_top(scoped, threshold: int) -> None:
    """Whichever path a scope's size picks (1: every scope through the index; 10**6:
    every scope read whole; 50: ``ada`` and ``adam`` through the index, the others read
    whole), each user gets their own exact nearest memories: ``Ada`` none of ``ada``'s,
    ``ada`` none of ``adam``'s, and the session memories below a user's tag count."""
    store, vectors = scoped
    store.searcher.exact_scope_rows = threshold
    for user, own in vectors.items():
        for q in queries(5):
            hits = store.vector_search(q, limit=10, filters=SearchFilters(tags=(tag_of(user),)))
            assert [h[0] for h in hits] == exact(own, q, 10), user


def test_hybrid_arms_give_the_same_results_on_both_paths(scoped) -> None:
    """A hybrid search's vector and full-text arms, with a scope filter, answer the same
    through the index (tag tested per row) as from the scope's rows read whole."""
    store, _ = scoped
    arms = [ArmQuery(vector=q, limit=20, filters=SearchFilters(tags=(tag_of(u),)))
            for u in USERS for q in queries(2)]
    arms += [ArmQuery(text="garden note 3", limit=20, filters=SearchFilters(tags=(tag_of(u),)))
             for u in USERS]
    store.searcher.exact_scope_rows = 10**6
    whole = store.search_arms(arms)
    store.searcher.exact_scope_rows = 1
    indexed = store.search_arms(arms)
    assert [[h[0] for h in arm] for arm in indexed] == [[h[0] for h in arm] for arm in whole]
    assert all(indexed[:2 * len(USERS)]) and any(indexed[2 * len(USERS):])


def test_a_large_scope_is_searched_through_the_hnsw_index(scoped) -> None:
    """A scope of at least ``exact_scope_rows`` memories runs the HNSW index scan in
    distance order, its tag tested on each row (a filter of the scan); a smaller one
    keeps the tag test as a join. (As a join, PostgreSQL reads a scope's rows first
    whatever its size, since it cannot estimate a tag's share of the store: in a big
    store a heavy user's search read all of that user's memories.)"""
    store, _ = scoped
    store.searcher.exact_scope_rows = 50
    q = queries(1)[0]
    heavy = store.explain_search(vector=q, filters=SearchFilters(tags=(tag_of("ada"),)),
                                 seqscan=False)
    light = store.explain_search(vector=q, filters=SearchFilters(tags=(tag_of("Ada"),)),
                                 seqscan=False)
    scan = heavy.split("Index Scan using memories_embedding_hnsw", 1)
    assert len(scan) == 2 and "SubPlan" in scan[1].split("->", 1)[0]
    assert "SubPlan" not in light  # the tag test as a join: PostgreSQL's plan for it


def test_the_scope_count_stops_at_the_threshold_and_counts_exactly(scoped) -> None:
    """The scope's size is counted by its exact tag and the tags below it (``ada`` is
    not ``Ada``, nor ``adam``), up to the threshold."""
    store, vectors = scoped
    pg = store.database.engine.raw_connection()
    try:
        driver = pg.dbapi_connection
        store.searcher.exact_scope_rows = len(vectors["ada"])
        assert store.searcher._fenced(driver, SearchFilters(tags=(tag_of("ada"),)))
        store.searcher.exact_scope_rows = len(vectors["ada"]) + 1
        assert not store.searcher._fenced(driver, SearchFilters(tags=(tag_of("ada"),)))
        store.searcher.exact_scope_rows = len(vectors["Ada"]) + 1
        assert not store.searcher._fenced(driver, SearchFilters(tags=(tag_of("Ada"),)))
        assert not store.searcher._fenced(driver, SearchFilters())
    finally:
        pg.close()


@pytest.mark.parametrize(("version", "iterative"), [
    ("0.8.0", True), ("0.8.1", True), ("0.10.2", True), ("1.0.0", True),
    ("0.7.4", False), ("0.6.2", False), ("0.5", False), ("", False), (None, False)])
def test_iterative_scans_from_the_version(version: str | None, iterative: bool) -> None:
    assert iterative_scans(version) is iterative


def test_the_store_reads_pgvectors_version_when_it_opens(scoped) -> None:
    """The flag follows the server's pgvector (a server without iterative scans refuses
    the setting once pgvector is loaded in the session, so it is sent only where it
    exists)."""
    store, _ = scoped
    with store.engine.connect() as conn:
        version = conn.exec_driver_sql(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'").scalar()
    assert store.searcher.iterative is iterative_scans(version)
    q = queries(1)[0]
    assert store.vector_search(q, limit=5, filters=SearchFilters(tags=(tag_of("ada"),)))


def test_a_short_search_through_the_index_is_run_again_with_the_tag_as_a_join(scoped) -> None:
    """A search through the index that comes back short is run again exactly with the
    tag test as a join (the scope's rows read, then sorted): the per-row test with
    index scans off would read the whole table (6 s at a million memories)."""
    store, vectors = scoped
    store.searcher.exact_scope_rows = 1
    again: list[str] = []
    original = store.searcher._exact_vector_search

    def spy(sql: str, params: dict) -> list:
        again.append(sql)
        return original(sql, params)

    store.searcher._exact_vector_search = spy
    q = queries(1)[0]
    hits = store.vector_search(q, limit=10, filters=SearchFilters(tags=(tag_of("ada:x"),)))
    assert [h[0] for h in hits] == exact(vectors["ada:x"], q, 10)
    assert len(again) == 1 and "OFFSET 0" not in again[0] and "JOIN tags" in again[0]


def memories_of(user: str, vectors: list[np.ndarray], *, start: int,
                session: bool = False) -> list[NewMemory]:
    """New memories of ``user`` (in its session below the user's tag with ``session``)."""
    scope = ChatScope.of(user_id=user)
    tag = ChatScope.of(user_id=user, session_id="s1").tag if session else scope.tag
    return [NewMemory(
        key=scope.own_key(f"n{start + i}"), content=f"{user} wrote the garden note n{i}",
        robot="service", importance=1.0, token_count=6,
        created_at=T0 + timedelta(days=1, minutes=i), tags=(tag,),
        embedding=(v / np.linalg.norm(v)).tolist(), embedder=EMBEDDER, explicit_key=True)
        for i, v in enumerate(vectors)]


def fenced(store: PostgresStore, user: str) -> bool:
    """Whether ``store`` sends a search of ``user``'s scope through the index."""
    pg = store.database.engine.raw_connection()
    try:
        return store.searcher._fenced(pg.dbapi_connection, SearchFilters(tags=(tag_of(user),)))
    finally:
        pg.close()


def test_a_scope_that_grows_past_the_threshold_after_being_counted_gets_every_hit(
        scoped, pg_url: str) -> None:
    """``Ada``'s scope is counted small (read whole); another store (another process)
    then adds 100 memories to it, nearer the query than any before. Within the time the
    count is kept the first store still reads the scope whole: every arm still finds
    the new memories, as a store counting afresh (through the index) does."""
    store, vectors = scoped
    store.searcher.exact_scope_rows = 50
    q = queries(1)[0]
    scope = SearchFilters(tags=(tag_of("Ada"),))
    assert len(store.vector_search(q, limit=10, filters=scope)) == USERS["Ada"]
    rng = np.random.default_rng(17)
    new = [q + 0.05 * rng.standard_normal(DIM) for _ in range(100)]
    with closing(PostgresStore(pg_url)) as other:
        added = other.add_many(memories_of("Ada", new, start=0))
    own = {**vectors["Ada"], **{r.memory.id: v / np.linalg.norm(v)
                                for r, v in zip(added, new, strict=True)}}
    arms = [ArmQuery(vector=q, limit=10, filters=scope),
            ArmQuery(text="wrote garden", limit=10, filters=scope)]
    assert not fenced(store, "Ada")  # the kept count: the plan for a small scope
    got = store.search_arms(arms)
    assert [h[0] for h in got[0]] == exact(own, q, 10)
    with closing(PostgresStore(pg_url)) as fresh:
        fresh.searcher.exact_scope_rows = 50
        assert fenced(fresh, "Ada")
        assert [[h[0] for h in arm] for arm in fresh.search_arms(arms)] == [
            [h[0] for h in arm] for arm in got]
    assert len(got[1]) == 10 and set(h[0] for h in got[1]) <= set(own)


def test_a_scope_that_shrinks_after_being_counted_still_gets_its_exact_top(
        scoped, pg_url: str) -> None:
    """``ada``'s scope is counted large (through the index); another store then deletes
    all but five of its memories. The first store still goes through the index, comes
    back short, and runs the search again exactly: the five that are left."""
    store, vectors = scoped
    store.searcher.exact_scope_rows = 50
    q = queries(1)[0]
    scope = SearchFilters(tags=(tag_of("ada"),))
    assert len(store.vector_search(q, limit=10, filters=scope)) == 10
    keys = sorted(m.key for m in store.list_memories(scope, limit=1000))
    with closing(PostgresStore(pg_url)) as other:
        for key in keys[5:]:
            other.forget(key, robot="service", at=T0 + timedelta(days=2))
        other.purge(robot="service")
    assert fenced(store, "ada")  # the kept count: the plan for a large scope
    left = {m.id: vectors["ada"][m.id] for m in store.list_memories(scope, limit=1000)}
    assert len(left) == 5
    hits = store.vector_search(q, limit=10, filters=scope)
    assert [h[0] for h in hits] == exact(left, q, 10)


def test_a_scopes_count_is_kept_and_dropped_by_this_stores_writes_to_it(
        scoped, pg_url: str) -> None:
    """The count of a scope is kept (another store's writes do not change the plan at
    once), dropped when this store writes to the scope or below it, and never shared
    between scopes whose tags collide: writing to ``ada`` (or ``adam``) leaves
    ``Ada``'s count, writing in ``Ada``'s session drops it."""
    store, _ = scoped
    store.searcher.exact_scope_rows = 10
    assert not fenced(store, "Ada") and fenced(store, "ada")
    rng = np.random.default_rng(5)
    with closing(PostgresStore(pg_url)) as other:
        other.add_many(memories_of("Ada", list(rng.standard_normal((10, DIM))), start=0))
    assert not fenced(store, "Ada")  # kept
    store.add_many(memories_of("ada", list(rng.standard_normal((2, DIM))), start=0))
    store.add_many(memories_of("adam", list(rng.standard_normal((2, DIM))), start=0))
    assert not fenced(store, "Ada")  # other scopes' writes leave it
    store.add_many(memories_of("Ada", list(rng.standard_normal((1, DIM))), start=10,
                               session=True))
    assert fenced(store, "Ada")  # counted again: 6 + 10 + 1
    with closing(PostgresStore(pg_url)) as other:
        other.searcher.exact_scope_rows = 10
        assert fenced(other, "Ada") and fenced(other, "ada")


def test_a_kept_count_expires(scoped, pg_url: str) -> None:
    """A count older than ``seconds`` is read again (another process's writes show)."""
    store, _ = scoped
    store.searcher.exact_scope_rows = 10
    store.searcher.scope_sizes.seconds = 0.0
    assert not fenced(store, "Ada")
    rng = np.random.default_rng(6)
    with closing(PostgresStore(pg_url)) as other:
        other.add_many(memories_of("Ada", list(rng.standard_normal((10, DIM))), start=0))
    assert fenced(store, "Ada")


def test_a_large_scope_is_searched_with_more_candidates(scoped) -> None:
    """A scope through the index is searched at ``hnsw.ef_search`` >= ``scoped_ef_search``,
    one of ``large_scope_rows`` or more at >= ``large_scope_ef_search`` (its neighbourhoods
    are dense with its own memories); a search holding both kinds of arm takes the larger;
    a scope read whole keeps the store's ``ef_search``. Each still gets its exact top."""
    store, vectors = scoped
    searcher = store.searcher
    searcher.exact_scope_rows, searcher.large_scope_rows = 50, 200
    searcher.scoped_ef_search, searcher.large_scope_ef_search = 100, 300

    def ef_after(*users: str) -> int:
        q = queries(1)[0]
        found = store.search_arms([ArmQuery(vector=q, limit=10, filters=SearchFilters(
            tags=(tag_of(u),))) for u in users])
        for user, hits in zip(users, found, strict=True):
            assert [h[0] for h in hits] == exact(vectors[user], q, 10), user
        return int(store.database.quick("reading ef_search", lambda pg, _info: pg.execute(
            "SELECT current_setting('hnsw.ef_search')").fetchone()[0]))

    assert ef_after("adam") == 100  # 60 memories: through the index
    assert ef_after("ada") == 300  # 240 memories: a large scope
    assert ef_after("adam", "ada") == 300
    assert ef_after("Ada") == store.ef_search  # 6 memories: read whole
    plan = store.explain_search(vector=queries(1)[0], filters=SearchFilters(
        tags=(tag_of("ada"),)), seqscan=False)
    assert "memories_embedding_hnsw" in plan
