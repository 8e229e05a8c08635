"""Reads on a streaming replica (``read_database_url=``): a primary and a replica of it
started for this module from the bundled server's binaries (``tests.replica``). Replay is
paused on the replica (``pg_wal_replay_pause()``) to hold it behind the primary on purpose."""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.errors import ValidationError
from htm_core.store import open_store
from htm_core.store.base import SearchFilters
from htm_core.store.postgres import PostgresStore
from htm_core.store.postgres.replica import ReplicaReads
from tests.replica import Pair, primary_and_replica, wait_for_replay


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    yield from primary_and_replica()


@pytest.fixture
def urls(pair: Pair) -> tuple[str, str]:
    return pair.fresh_database()


@pytest.fixture
def htms(urls: tuple[str, str]) -> Iterator[Callable[..., HTM]]:
    made: list[HTM] = []

    def make(robot: str, **kwargs: Any) -> HTM:
        kwargs.setdefault("database_url", urls[0])
        kwargs.setdefault("read_database_url", urls[1])
        made.append(HTM(robot=robot, embedder=HashingEmbedder(), **kwargs))
        return made[-1]

    yield make
    for htm in made:
        htm.close()


def _reads(htm: HTM) -> ReplicaReads:
    store = htm._store
    assert isinstance(store, PostgresStore) and store.replica is not None
    return store.replica


def _replay(urls: tuple[str, str], paused: bool) -> None:
    with psycopg.connect(urls[1], autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()")


def _caught_up(urls: tuple[str, str]) -> None:
    """Wait until the replica replayed everything the primary has now."""
    with psycopg.connect(urls[0], autocommit=True) as primary:
        lsn = primary.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
    wait_for_replay(urls[1], lsn)


def listed(htm: HTM) -> set[str]:
    return {m.key for m in htm._store.list_memories(SearchFilters(), limit=1000)}


def recalled(htm: HTM, query: str) -> set[str]:
    return {h.memory.key for h in htm.recall(query, limit=20)}


def test_a_process_reads_its_own_writes(htms: Callable[..., HTM], urls: tuple[str, str]) -> None:
    ada = htms("Ada")
    for k in range(6):
        ada.add(f"Ada planted tree number {k} by the lake", key=f"Ada:tree{k}")
        assert f"Ada:tree{k}" in recalled(ada, f"tree number {k}")
        assert f"Ada:tree{k}" in listed(ada)
    _caught_up(urls)
    before = _reads(ada).on_replica
    assert len(listed(ada)) == 6
    assert _reads(ada).on_replica == before + 1


def test_a_replica_behind_the_process_writes_is_not_read(
        htms: Callable[..., HTM], urls: tuple[str, str]) -> None:
    ada = htms("Ada")
    ada.add("Ada keeps a blue notebook", key="Ada:book")
    _caught_up(urls)
    _replay(urls, paused=True)
    try:
        ada.add("Ada walks by the river", key="Ada:walk")
        before = _reads(ada).on_primary
        assert listed(ada) == {"Ada:book", "Ada:walk"}
        assert "Ada:walk" in recalled(ada, "walks by the river")
        assert _reads(ada).on_primary > before
    finally:
        _replay(urls, paused=False)
    _caught_up(urls)
    before = _reads(ada).on_replica
    assert listed(ada) == {"Ada:book", "Ada:walk"}
    assert _reads(ada).on_replica == before + 1


def test_a_forget_is_never_served_from_the_replica(
        htms: Callable[..., HTM], urls: tuple[str, str]) -> None:
    names = ("Ada", "ada", "a:da")
    robots = {n: htms(n) for n in names}
    for n, htm in robots.items():
        htm.add(f"{n} keeps a red kite", key=f"{n}:kite")
    _caught_up(urls)
    _replay(urls, paused=True)
    try:
        robots["ada"].forget("ada:kite", confirm=True)
        for htm in robots.values():  # every robot, those that never held it too
            assert "ada:kite" not in recalled(htm, "red kite")
        assert "ada:kite" not in listed(robots["ada"])
        assert "ada:kite" not in robots["ada"].create_context().text
    finally:
        _replay(urls, paused=False)


def _add_in_child(url: str, robot: str, key: str, content: str) -> None:
    with HTM(robot=robot, database_url=url, embedder=HashingEmbedder()) as htm:
        if content:
            htm.add(content, key=key)
        else:
            htm.forget(key, confirm=True)


def in_another_process(url: str, robot: str, key: str, content: str = "") -> None:
    process = multiprocessing.get_context("spawn").Process(
        target=_add_in_child, args=(url, robot, key, content))
    process.start()
    process.join(120)
    assert process.exitcode == 0


def test_another_process_write_is_seen_once_replayed(
        htms: Callable[..., HTM], urls: tuple[str, str]) -> None:
    reader = htms("ada")
    reader.add("ada keeps a red kite", key="ada:kite")
    _caught_up(urls)
    _replay(urls, paused=True)
    try:
        in_another_process(urls[0], "Ada", "Ada:boat", "Ada sails a small boat")
        assert "Ada:boat" not in listed(reader)  # the replica has not replayed it yet
        in_another_process(urls[0], "ada", "ada:kite")  # another process forgets
        assert "ada:kite" not in recalled(reader, "red kite")  # checked on the primary
    finally:
        _replay(urls, paused=False)
    _caught_up(urls)
    assert listed(reader) == {"Ada:boat"}
    assert "Ada:boat" in recalled(reader, "small boat")


def test_a_replica_that_is_down_sends_reads_to_the_primary(
        htms: Callable[..., HTM], pair: Pair, caplog: pytest.LogCaptureFixture) -> None:
    ada = htms("Ada")
    ada.add("Ada keeps a blue notebook", key="Ada:book")
    pair.stop_replica()
    try:
        with caplog.at_level(logging.WARNING, logger="htm_core.store.postgres"):
            assert "Ada:book" in recalled(ada, "blue notebook")
            assert listed(ada) == {"Ada:book"}
            ada.add("Ada walks by the river", key="Ada:walk")
            assert listed(ada) == {"Ada:book", "Ada:walk"}
        assert any("on the replica" in r.getMessage() and "reading the primary" in r.getMessage()
                   for r in caplog.records)
    finally:
        pair.start_replica()


def test_the_replica_comes_from_the_environment(
        urls: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTM_READ_DATABASE_URL", urls[1])
    with HTM(robot="Ada", database_url=urls[0], embedder=HashingEmbedder()) as htm:
        assert isinstance(htm._store, PostgresStore) and htm._store.replica is not None


def test_a_replica_for_sqlite_is_refused(tmp_path: Any, urls: tuple[str, str]) -> None:
    with pytest.raises(ValidationError, match="PostgreSQL"):
        open_store(str(tmp_path / "htm.db"), read_database_url=urls[1])


@pytest.mark.parametrize("bad", [-1, "0.1", True, 10_000])
def test_a_replica_wait_out_of_range_is_refused(urls: tuple[str, str], bad: Any) -> None:
    with pytest.raises(ValidationError, match="replica_wait"):
        PostgresStore(urls[0], read_database_url=urls[1], replica_wait=bad)
