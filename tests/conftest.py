"""Shared fixtures.

``store_url`` / ``htm_factory`` are parametrized over every backend: contract tests written
once run on SQLite and on PostgreSQL. PostgreSQL comes from ``HTM_TEST_DATABASE_URL`` when
set, else from a throwaway ``pgserver`` (PostgreSQL 16 + pgvector) started for the session;
each test gets a fresh database with a unique name: for ``store_url``, a copy of a database
already holding htm's current schema (``tests.pg.migrated_template``); for ``pg_url`` and for
tests marked ``empty_database``, an empty one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from htm_core import HTM, FrozenClock, HashingEmbedder

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture
def clock() -> FrozenClock:
    """A clock frozen at 2024-05-15 12:00 UTC; advance it explicitly."""
    return FrozenClock(datetime(2024, 5, 15, 12, 0, tzinfo=timezone.utc))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return str(tmp_path / "htm.db")


@pytest.fixture(scope="session")
def postgres_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a PostgreSQL server with pgvector for the whole session."""
    from tests.pg import session_server

    yield from session_server(tmp_path_factory)


@pytest.fixture(scope="session")
def postgres_template(postgres_server_url: str) -> Iterator[str]:
    """Name of a database holding htm's current schema, copied by ``store_url``."""
    from tests.pg import migrated_template

    yield from migrated_template(postgres_server_url)


@pytest.fixture
def pg_url(postgres_server_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database (dropped afterwards)."""
    from tests.pg import fresh_database

    yield from fresh_database(postgres_server_url)


@pytest.fixture(scope="session")
def pooler_url(postgres_server_url: str) -> Iterator[str]:
    """A transaction-mode PgBouncer in front of the session's server (``tests.pgbouncer``)."""
    from tests.pgbouncer import session_pooler

    yield from session_pooler(postgres_server_url)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database on each backend: on PostgreSQL it already holds htm's current
    schema (as opening a store on an empty one would leave it), unless the test is marked
    ``empty_database``; on SQLite it is a new file."""
    if request.param == "sqlite":
        yield str(tmp_path / "htm.db")
        return
    from tests.pg import fresh_database

    server = request.getfixturevalue("postgres_server_url")
    empty = request.node.get_closest_marker("empty_database") is not None
    template = None if empty else request.getfixturevalue("postgres_template")
    yield from fresh_database(server, template)


@pytest.fixture
def htm_factory(store_url: str, clock: FrozenClock) -> Iterator[Callable[..., HTM]]:
    """Make ``HTM`` instances on the test's database; all closed at the end."""
    made: list[HTM] = []

    def make(**kwargs: Any) -> HTM:
        kwargs.setdefault("database_url", store_url)
        kwargs.setdefault("embedder", HashingEmbedder())
        kwargs.setdefault("clock", clock)
        htm = HTM(**kwargs)
        made.append(htm)
        return htm

    yield make
    for htm in made:
        htm.close()


@pytest.fixture
def berlin_machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's TZ set to Europe/Berlin (and libc told so), restored afterwards."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
