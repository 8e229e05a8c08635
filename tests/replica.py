"""A primary and a streaming replica of it, started from the bundled server's binaries
(pgserver's ``pginstall/bin``: ``initdb``, ``pg_ctl``, ``pg_basebackup``) on Unix sockets
in a temporary folder, for the tests that need a replica; stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PRIMARY_PORT, REPLICA_PORT = 5441, 5442


def _binaries() -> Path:
    """pgserver's ``pginstall/bin``, or a skip naming what is missing."""
    try:
        import pgserver
    except ImportError:
        pytest.skip("the replica tests need the pgserver package (its PostgreSQL binaries)")
    folder = Path(pgserver.__file__).parent / "pginstall" / "bin"
    missing = [b for b in ("initdb", "pg_ctl", "pg_basebackup", "postgres")
               if not (folder / b).exists()]
    if missing:
        pytest.skip(f"pgserver's {folder} lacks {', '.join(missing)}: no replica to test")
    return folder


def _as_service_user(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run it as pgserver's user then."""
    if os.geteuid() != 0:
        return command
    if shutil.which("runuser") is None:
        pytest.skip("PostgreSQL cannot run as root and runuser is missing")
    return ["runuser", "-u", "pgserver", "--", *command]


@dataclass
class Pair:
    """A running primary and replica: their folders, binaries and URLs."""

    folder: Path
    bin: Path

    def url(self, port: int, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.folder}&port={port}"

    @property
    def primary_url(self) -> str:
        return self.url(PRIMARY_PORT)

    def _ctl(self, data: str, *args: str) -> None:
        _run(_as_service_user([str(self.bin / "pg_ctl"), "-D", str(self.folder / data),
                               "-l", str(self.folder / f"{data}.log"), *args]))

    def stop_replica(self) -> None:
        self._ctl("replica", "-m", "fast", "-w", "stop")

    def start_replica(self) -> None:
        self._ctl("replica", "-w", "start")

    def fresh_database(self) -> tuple[str, str]:
        """A new database on the primary (and so on the replica): its two URLs."""
        import psycopg

        name = f"htm_replica_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.primary_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
            lsn = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        self.wait_for_replay(lsn)  # else the replica may not hold the database yet
        return self.url(PRIMARY_PORT, name), self.url(REPLICA_PORT, name)

    def wait_for_replay(self, lsn: Any) -> None:
        """Wait until the replica has replayed the primary's WAL up to ``lsn``."""
        wait_for_replay(self.url(REPLICA_PORT), lsn)


def wait_for_replay(replica_url: str, lsn: Any, timeout: float = 60) -> None:
    """Wait (at most ``timeout`` seconds) until the replica at ``replica_url`` has replayed
    WAL up to ``lsn``."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(replica_url, autocommit=True) as replica:
        while not replica.execute("SELECT pg_last_wal_replay_lsn() >= %s", lsn).fetchone()[0]:
            assert time.monotonic() < deadline, "the replica did not catch up"
            time.sleep(0.02)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}")


def _settings(port: int, folder: Path) -> str:
    return "\n".join([
        f"port = {port}", "listen_addresses = ''", f"unix_socket_directories = '{folder}'",
        "wal_level = replica", "max_wal_senders = 4", "hot_standby = on", "fsync = off",
        "shared_buffers = 32MB", "max_connections = 60", ""])


def primary_and_replica() -> Iterator[Pair]:
    """Yield a primary (``initdb``) and a streaming replica of it (``pg_basebackup`` with
    ``standby.signal`` and ``primary_conninfo``); stop both afterwards."""
    binaries = _binaries()
    folder = Path(tempfile.mkdtemp(prefix="htm-rep-"))
    folder.chmod(0o777)
    pair = Pair(folder, binaries)
    started: list[str] = []
    try:
        primary = folder / "primary"
        _run(_as_service_user([str(binaries / "initdb"), "-D", str(primary), "-U", "postgres",
                               "--auth=trust", "-E", "UTF8", "--no-sync"]))
        with (primary / "postgresql.conf").open("a") as conf:
            conf.write(_settings(PRIMARY_PORT, folder))
        pair._ctl("primary", "-w", "start")
        started.append("primary")
        replica = folder / "replica"
        _run(_as_service_user([str(binaries / "pg_basebackup"), "-h", str(folder), "-p",
                               str(PRIMARY_PORT), "-U", "postgres", "-D", str(replica),
                               "-X", "stream", "--no-sync"]))
        with (replica / "postgresql.conf").open("a") as conf:
            conf.write(_settings(REPLICA_PORT, folder))
            conf.write(f"primary_conninfo = 'host={folder} port={PRIMARY_PORT} "
                       "user=postgres application_name=htm_replica'\n")
        _run(_as_service_user(["touch", str(replica / "standby.signal")]))
        pair.start_replica()
        started.append("replica")
        yield pair
    finally:
        for data in reversed(started):
            with contextlib.suppress(RuntimeError):  # already stopped by the test
                pair._ctl(data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)
