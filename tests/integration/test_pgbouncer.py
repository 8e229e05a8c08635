"""PostgreSQL behind Debian's PgBouncer in transaction mode (``tests.pgbouncer``, started
for the session in front of the test server): ``?pooler=transaction`` keeps no session
state on a server connection, so nothing leaks between clients or is lost."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.errors import StoreError, ValidationError
from htm_core.store import LongTermStore, open_store
from htm_core.store.postgres import PostgresStore
from htm_core.testing import CAPABILITIES, StoreConformance
from htm_core.testing.conformance import EMB, rec
from tests.pgbouncer import through_pooler


def pooled(pooler_url: str, database_url: str) -> str:
    """``database_url``'s database through the pooler, marked for transaction pooling."""
    return through_pooler(pooler_url, database_url) + "?pooler=transaction"


@pytest.fixture
def pooled_url(pooler_url: str, pg_url: str) -> str:
    return pooled(pooler_url, pg_url)


@pytest.fixture
def htms(pooled_url: str) -> Iterator[Callable[..., HTM]]:
    made: list[HTM] = []

    def make(**kwargs: Any) -> HTM:
        kwargs.setdefault("database_url", pooled_url)
        kwargs.setdefault("embedder", HashingEmbedder())
        made.append(HTM(**kwargs))
        return made[-1]

    yield make
    for htm in made:
        htm.close()


class TestThroughPgBouncer(StoreConformance):
    capabilities = CAPABILITIES

    @pytest.fixture
    def store_factory(self, pooled_url: str) -> Callable[[], LongTermStore]:
        return lambda: open_store(pooled_url)


def test_many_adds_and_recalls_through_the_pooler(htms: Callable[..., HTM]) -> None:
    """psycopg prepares a statement run five times; a prepared statement lives on one
    server connection, which the pooler hands to another client after the transaction."""
    others = [htms(robot=f"r{k}") for k in range(3)]
    for round_ in range(12):
        for k, htm in enumerate(others):
            htm.add(f"robot {k} note {round_} about green tea", key=f"r{k}:n{round_}")
            assert htm.recall("green tea", limit=3)
    assert len(others[0].recall("note 11", limit=20)) >= 1


def test_colliding_robots_and_users_keep_their_own_memories(htms: Callable[..., HTM]) -> None:
    upper, lower = htms(robot="Ada"), htms(robot="ada")
    for k in range(8):
        upper.add(f"Ada keeps blue notebook {k}", key=f"Ada:k{k}")
        lower.add(f"ada keeps red notebook {k}", key=f"ada:k{k}")
    for k in range(8):
        mine, theirs = upper.get(f"Ada:k{k}"), lower.get(f"ada:k{k}")
        assert mine is not None and theirs is not None
        assert (mine.robot, theirs.robot) == ("Ada", "ada")
        assert "blue" in mine.content and "red" in theirs.content
    assert {h.memory.robot for h in upper.recall("notebook", limit=16)} <= {"Ada", "ada"}


def _ef_inside_search(store: PostgresStore) -> str:
    """The ``hnsw.ef_search`` a vector search's statement runs with, read in the search's
    own transaction (the vector statement is swapped for one reporting the setting)."""
    seen: list[str] = []
    original = store.searcher.vector_sql

    def reporting(*args: Any, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        sql, params = original(*args, **kwargs)
        return (f"SELECT 0 AS id, CAST(current_setting('hnsw.ef_search') AS float) AS score "
                f"UNION ALL SELECT * FROM ({sql}) s", params)

    store.searcher.vector_sql = reporting
    try:
        hits = store.vector_search(EMB.embed_query("tea"), limit=1, filters=_no_filters())
    finally:
        store.searcher.vector_sql = original
    seen.extend(str(int(score)) for mid, score in hits if mid == 0)
    return seen[0] if seen else "exact"


def _no_filters() -> Any:
    from htm_core.store.base import SearchFilters

    return SearchFilters()


def test_ef_search_of_one_store_is_not_seen_by_another(pooled_url: str) -> None:
    """Two stores through the pooler with different ``ef_search``: each search runs with
    its own, whichever server connection the pooler gives; no session keeps either."""
    wide = PostgresStore(pooled_url, ef_search=321, pool_size=1, max_overflow=0)
    narrow = PostgresStore(pooled_url, ef_search=17, pool_size=1, max_overflow=0)
    try:
        wide.ensure_robot("r1")
        wide.add_many([rec(f"green tea {k}", key=f"t{k}") for k in range(3)])
        for _ in range(6):
            assert _ef_inside_search(wide) == "321"
            assert _ef_inside_search(narrow) == "17"
    finally:
        wide.close()
        narrow.close()


def test_no_session_state_is_left_on_the_servers_connections(pooled_url: str) -> None:
    """After searches and a migration through the pooler, every server connection the
    pooler holds for the database shows the default ``hnsw.ef_search``, no prepared
    statement and no advisory lock."""
    store = PostgresStore(pooled_url, ef_search=123)
    try:
        store.ensure_robot("r1")
        store.add_many([rec(f"m{k} tea", key=f"k{k}") for k in range(5)])
        for _ in range(8):
            store.vector_search(EMB.embed_query("tea"), limit=3, filters=_no_filters())
            store.fulltext_search("m1", limit=3, filters=_no_filters())
        store.migrate()
    finally:
        store.close()
    plain = pooled_url.replace("?pooler=transaction", "")
    clients = [psycopg.connect(plain, prepare_threshold=None) for _ in range(10)]
    try:  # each client in a transaction of its own: ten different server connections
        seen = [tuple(c.execute(
            "SELECT pg_backend_pid(), current_setting('hnsw.ef_search', true), "
            "(SELECT count(*) FROM pg_prepared_statements), "
            "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
            " AND pid = pg_backend_pid())").fetchone() or ()) for c in clients]
    finally:
        for c in clients:
            c.close()
    assert len({row[0] for row in seen}) == len(clients)
    assert all(row[2:] == (0, 0) for row in seen), seen
    assert all(row[1] in (None, "40") for row in seen), seen


def test_threads_through_the_pooler(htms: Callable[..., HTM]) -> None:
    names = ["Ada", "ada", "a:da", "a/da"]
    htm_of = {name: htms(robot=name) for name in names}
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            htm = htm_of[name]
            for k in range(10):
                htm.add(f"{name} writes line {k}", key=f"{name}|line{k}")
                htm.recall(f"line {k}", limit=5)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for name in names:
        got = htm_of[name].get(f"{name}|line9")
        assert got is not None and (got.robot, got.content) == (name, f"{name} writes line 9")


def test_bulk_load_is_refused_through_the_pooler(pooled_url: str) -> None:
    store = PostgresStore(pooled_url)
    try:
        with pytest.raises(StoreError, match="direct") as err, store.bulk_load():
            pytest.fail("the bulk load ran")
        assert "pooler=transaction" in str(err.value)
        assert store.rebuild_indexes() == []
    finally:
        store.close()


def test_the_option_and_the_url_parameter(pooler_url: str, pg_url: str) -> None:
    via = through_pooler(pooler_url, pg_url)
    by_option = PostgresStore(via, pooler="transaction")
    try:
        assert by_option.pooler == "transaction"
        assert "pooler" not in by_option.url
    finally:
        by_option.close()
    with pytest.raises(ValidationError, match="pooler"):
        PostgresStore(via + "?pooler=session")
    with pytest.raises(ValidationError, match="pooler"):
        PostgresStore(via, pooler="statement")
    with pytest.raises(ValidationError, match="pooler"):
        PostgresStore(via + "?pooler=transaction&pooler=session", pooler="transaction")


def test_htm_database_url_with_the_parameter(pooled_url: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTM_DATABASE_URL", pooled_url)
    with HTM(robot="env", embedder=HashingEmbedder()) as htm:
        for k in range(8):
            htm.add(f"setting from the environment {k}", key=f"env{k}")
            assert htm.recall("environment", limit=3)
        assert getattr(htm.store, "pooler", None) == "transaction"


def test_stores_opening_together_migrate_once_through_the_pooler(pooled_url: str) -> None:
    """Migrations serialised by a transaction advisory lock: eight stores opening an
    empty database at once through the pooler all come up on the same schema."""
    opened: list[PostgresStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(PostgresStore(pooled_url, pool_size=1, max_overflow=1))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        versions = {s.schema_version() for s in opened}
        assert len(opened) == 8 and len(versions) == 1
        log = opened[0].database.read("reading the log", lambda conn: conn.exec_driver_sql(
            "SELECT count(*) FROM operations WHERE op = 'migrate'").scalar())
        assert log == versions.pop()  # each version step logged once
    finally:
        for s in opened:
            s.close()


def test_the_pooler_benchmark_runs(postgres_server_url: str, pooler_url: str) -> None:
    """``python -m benchmarks.pooler --quick`` prints its table (a smoke run, no timing)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.pooler", "--quick", "--database-url",
         postgres_server_url, "--pooler-url", pooler_url],
        cwd=root, env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows[2:]] == [
        "direct", "direct, pooler=transaction", "PgBouncer, pooler=transaction"]
