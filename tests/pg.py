"""PostgreSQL for the tests: ``HTM_TEST_DATABASE_URL`` if set, else a throwaway pgserver."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


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
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=name).render_as_string(hide_password=False)


def fresh_database(server_url: str) -> Iterator[str]:
    """Create a uniquely named database on the server; drop it afterwards."""
    import psycopg

    name = f"htm_test_{uuid.uuid4().hex[:12]}"
    admin = _with_database(server_url, "postgres").replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(server_url, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
