"""LISTEN/NOTIFY on PostgreSQL (``listen=True``): a read skips the working-set version round
trip while its listener heard nothing about the robot, and stays coherent with writers in
other processes (robot names drawn to collide: ``Ada``, ``ada``, ``a:da``), also when the
listening connection is terminated."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.errors import ValidationError
from htm_core.store.postgres import PostgresStore
from htm_core.store.postgres.listener import Listener
from tests.pgbouncer import through_pooler

ROBOTS = ("Ada", "ada", "a:da")


def listening(url: str) -> str:
    return url + ("&" if "?" in url else "?") + "listen=true"


@pytest.fixture
def htms(pg_url: str) -> Iterator[Callable[..., HTM]]:
    """Listening ``HTM`` objects, each on its own store. The stores allow a staleness of
    a minute, so that a heartbeat late on a busy machine never makes a read check the
    version where a test expects it to skip (what is heard is what these tests pin)."""
    made: list[HTM] = []

    def make(robot: str) -> HTM:
        store = PostgresStore(listening(pg_url), listen_staleness=60)
        made.append(HTM(robot=robot, embedder=HashingEmbedder(), store=store))
        return made[-1]

    yield make
    for htm in made:
        htm.close()
        htm._store.close()


def _store(htm: HTM) -> PostgresStore:
    store = htm._store
    assert isinstance(store, PostgresStore)
    return store


def _listener(htm: HTM) -> Listener:
    listener = _store(htm).database.heard.listener
    assert listener is not None
    return listener


def _in_child(url: str, robot: str, op: str, key: str, content: str = "") -> None:
    """One write by a robot's ``HTM`` in this (child) process, which does not listen."""
    with HTM(robot=robot, database_url=url, embedder=HashingEmbedder()) as htm:
        if op == "add":
            htm.add(content, key=key)
        elif op == "forget":
            htm.forget(key, confirm=True)
        elif op == "update":
            htm.update(key, content)


def in_another_process(url: str, robot: str, op: str, key: str, content: str = "") -> None:
    process = multiprocessing.get_context("spawn").Process(
        target=_in_child, args=(url, robot, op, key, content))
    process.start()
    process.join(120)
    assert process.exitcode == 0


def wait_heard(htm: HTM, before: tuple[int, ...]) -> None:
    """Wait (at most 10 s) until ``htm``'s listener heard something since ``before``."""
    listener, rid = _listener(htm), _rid(htm)
    deadline = time.monotonic() + 10
    while listener.stamp(rid)[:3] == before[:3]:
        assert time.monotonic() < deadline, "no notification arrived"
        time.sleep(0.01)


def _rid(htm: HTM) -> int:
    return _store(htm).database.robot_id(htm.robot)


def context_keys(htm: HTM) -> set[str]:
    return {m.key for m in htm.create_context(strategy="recent").memories}


def warm(htm: HTM) -> None:
    """Read until a read skips the version round trip (at most 10 s): the notifications of
    the robot's own writes have arrived, and its version is remembered."""
    heard = _store(htm).database.heard
    deadline = time.monotonic() + 10
    skipped = heard.skipped
    while heard.skipped == skipped:
        assert time.monotonic() < deadline, "reads never skipped the version round trip"
        context_keys(htm)
        time.sleep(0.01)


def test_a_second_read_skips_the_version_round_trip(htms: Callable[..., HTM]) -> None:
    ada = htms("Ada")
    ada.add("Ada likes green tea", key="Ada:tea")
    heard = _store(ada).database.heard
    assert _store(ada).listening
    warm(ada)
    skipped, checked = heard.skipped, heard.checked
    assert context_keys(ada) == {"Ada:tea"}
    assert (heard.skipped, heard.checked) == (skipped + 1, checked)


def test_a_url_with_listen_true_listens(pg_url: str) -> None:
    with HTM(robot="Ada", database_url=listening(pg_url), embedder=HashingEmbedder()) as htm:
        assert _store(htm).listening
    with HTM(robot="Ada", database_url=pg_url, embedder=HashingEmbedder()) as htm:
        assert not _store(htm).listening


def test_a_late_heartbeat_makes_reads_check_the_version(htms: Callable[..., HTM]) -> None:
    """The bound: a listener whose last heartbeat started more than ``listen_staleness``
    ago (a stalled thread, a hung connection) vouches for nothing. The heartbeat's time is
    moved back by hand, as a stall would leave it."""
    ada = htms("Ada")
    ada.add("Ada likes green tea", key="Ada:tea")
    warm(ada)
    heard, listener = _store(ada).database.heard, _listener(ada)
    with listener._lock:
        listener._synced -= 2 * listener.staleness
    checked = heard.checked
    assert context_keys(ada) == {"Ada:tea"}
    assert heard.checked == checked + 1


def test_another_process_forget_is_seen_by_the_next_read(
        htms: Callable[..., HTM], pg_url: str) -> None:
    readers = {name: htms(name) for name in ROBOTS}
    for name, htm in readers.items():
        htm.add(f"{name} keeps a blue notebook", key=f"{name}:book")
        htm.add(f"{name} walks by the river", key=f"{name}:walk")
    for htm in readers.values():
        warm(htm)
    before = _listener(readers["Ada"]).stamp(_rid(readers["Ada"]))
    in_another_process(pg_url, "Ada", "forget", "Ada:book")
    wait_heard(readers["Ada"], before)
    assert context_keys(readers["Ada"]) == {"Ada:walk"}
    assert "Ada:book" not in {h.memory.key for h in readers["Ada"].recall("blue notebook",
                                                                           limit=5)}
    for name in ("ada", "a:da"):
        assert context_keys(readers[name]) == {f"{name}:book", f"{name}:walk"}


def test_another_process_update_is_seen_by_the_next_read(
        htms: Callable[..., HTM], pg_url: str) -> None:
    readers = {name: htms(name) for name in ROBOTS}
    for name, htm in readers.items():
        htm.add(f"{name} drinks green tea", key=f"{name}:tea")
        warm(htm)
    before = _listener(readers["a:da"]).stamp(_rid(readers["a:da"]))
    in_another_process(pg_url, "a:da", "update", "a:da:tea", "a:da drinks black coffee now")
    wait_heard(readers["a:da"], before)
    contents = {m.key: m.content for m in
                readers["a:da"].create_context(strategy="recent").memories}
    assert contents == {"a:da:tea": "a:da drinks black coffee now"}
    assert [m.content for m in readers["Ada"].create_context(strategy="recent").memories] == \
        ["Ada drinks green tea"]


def test_a_change_to_one_robot_keeps_the_others_reads_skipping(
        htms: Callable[..., HTM], pg_url: str) -> None:
    """Notifications name robots by id: ``ada``'s change is not ``Ada``'s or ``a:da``'s."""
    readers = {name: htms(name) for name in ROBOTS}
    for name, htm in readers.items():
        htm.add(f"{name} keeps a red kite", key=f"{name}:kite")
    for htm in readers.values():
        warm(htm)
    heard = _store(readers["Ada"]).database.heard
    before = _listener(readers["ada"]).stamp(_rid(readers["ada"]))
    in_another_process(pg_url, "ada", "add", "ada:boat", "ada sails a small boat")
    wait_heard(readers["ada"], before)
    skipped = heard.skipped
    assert context_keys(readers["Ada"]) == {"Ada:kite"}
    assert heard.skipped == skipped + 1
    assert context_keys(readers["ada"]) == {"ada:kite", "ada:boat"}


def test_reads_stay_coherent_when_the_listening_connection_is_killed(
        htms: Callable[..., HTM], pg_url: str) -> None:
    reader = htms("Ada")
    reader.add("Ada keeps a blue notebook", key="Ada:book")
    reader.add("Ada walks by the river", key="Ada:walk")
    warm(reader)
    listener = _listener(reader)
    pid = listener.backend_pid
    with psycopg.connect(pg_url, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,)).fetchone() == \
            (True,)
    in_another_process(pg_url, "Ada", "forget", "Ada:book")  # not heard: nobody listened
    assert context_keys(reader) == {"Ada:walk"}
    deadline = time.monotonic() + 10
    while not listener.healthy or listener.backend_pid in (0, pid):
        assert time.monotonic() < deadline, "the listener did not reconnect"
        time.sleep(0.01)
    before = listener.stamp(_rid(reader))
    in_another_process(pg_url, "Ada", "forget", "Ada:walk")
    wait_heard(reader, before)
    assert context_keys(reader) == set()


def test_without_the_triggers_and_migrate_off_reads_check_each_time(pg_url: str) -> None:
    PostgresStore(pg_url).close()  # migrated, but no store has listened yet
    store = PostgresStore(pg_url, listen=True, migrate=False)
    try:
        assert not store.listening
        store.ensure_robot("Ada")
        store.working_version("Ada")
        store.working_version("Ada")
        assert store.database.heard.skipped == 0
    finally:
        store.close()


def test_listen_is_refused_behind_a_transaction_pooler(pooler_url: str, pg_url: str) -> None:
    pooled = through_pooler(pooler_url, pg_url)
    with pytest.raises(ValidationError, match="transaction-mode pooler"):
        PostgresStore(pooled + "?pooler=transaction&listen=true")
    with pytest.raises(ValidationError, match="transaction-mode pooler"):
        PostgresStore(pooled, pooler="transaction", listen=True)


@pytest.mark.parametrize("bad", ["maybe", "2"])
def test_a_listen_value_that_is_not_a_yes_or_no_is_refused(pg_url: str, bad: str) -> None:
    with pytest.raises(ValidationError, match="listen=true"):
        PostgresStore(pg_url + f"&listen={bad}")


@pytest.mark.parametrize("bad", [0, -1, "1", True, float("nan")])
def test_a_staleness_out_of_range_is_refused(pg_url: str, bad: Any) -> None:
    with pytest.raises(ValidationError, match="listen_staleness"):
        PostgresStore(pg_url, listen=True, listen_staleness=bad)


def test_the_benchmark_runs_quick(postgres_server_url: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m benchmarks.listen --quick``: a smoke run, never a timing assertion."""
    from benchmarks.listen import FIGURES, MODES, main

    payload = main(["--database-url", postgres_server_url, "--quick"])
    assert set(payload["result"]) == set(MODES)
    assert set(payload["result"]["listen=true"]) == set(FIGURES)
    assert "| listen=true |" in capsys.readouterr().out
