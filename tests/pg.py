"""PostgreSQL for the tests: ``HTM_TEST_DATABASE_URL`` if set, else a throwaway pgserver."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url


def session_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Yield the URL of a server with the ``vector`` extension available.

    The throwaway server's data directory lives outside pytest's ``tmp_path`` tree on
    purpose: pytest resets that tree's permissions to 0700 (and rotates old runs away)
    whenever another pytest session starts, and when running as root pgserver runs
    PostgreSQL as a separate ``pgserver`` user that must be able to reach the directory.
    """
    del tmp_path_factory  # kept in the signature for the conftest fixture
    url = os.environ.get("HTM_TEST_DATABASE_URL")
    if url:
        yield url
        return
    try:
        import pgserver
    except ImportError:
        pytest.skip("pgserver is not installed and HTM_TEST_DATABASE_URL is not set")
    pgdata = Path(tempfile.mkdtemp(prefix="htm-pg-"))
    server = pgserver.get_server(str(pgdata), cleanup_mode="stop")
    try:
        _throwaway_settings(server.get_uri())
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)


#: Settings of the suite's own throwaway server: it never outlives the run, so nothing
#: is written for an operating-system crash, which halves the cost of the hundreds of
#: databases the suite creates, migrates and drops (each drop is a checkpoint).
THROWAWAY_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def _throwaway_settings(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for name, value in THROWAWAY_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {name} = {value}")
        conn.execute("SELECT pg_reload_conf()")


def _with_database(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def _admin_url(server_url: str) -> str:
    """The server's ``postgres`` database, as a plain libpq URL for psycopg."""
    return _with_database(server_url, "postgres").replace("postgresql+psycopg", "postgresql")


def fresh_database(server_url: str, template: str | None = None) -> Iterator[str]:
    """Create a uniquely named database on the server (a copy of ``template`` if given,
    else an empty one); drop it afterwards."""
    import psycopg

    name = f"htm_test_{uuid.uuid4().hex[:12]}"
    admin = _admin_url(server_url)
    source = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{source}')
    try:
        yield _with_database(server_url, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrated_template(server_url: str) -> Iterator[str]:
    """Yield the name of a database holding htm's current schema, made by opening a store
    on an empty database, for :func:`fresh_database` to copy; drop it afterwards.

    Most of the suite's PostgreSQL tests open a store on a fresh database. Copying this
    one costs about what creating an empty database costs, and spares the first open the
    migration (``CREATE EXTENSION vector`` and every schema version), which costs more.
    Connections to the template are then refused, so that nobody (another session on a
    shared server included) holds one while it is copied: PostgreSQL refuses to copy a
    database that is in use.
    """
    import psycopg

    from htm_core.store import open_store

    admin = _admin_url(server_url)
    for url in fresh_database(server_url):
        open_store(url).close()
        name = make_url(url).database
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        yield name
