"""PgBouncer in front of the test server, in transaction mode: Debian's ``pgbouncer``
(installed by scripts/test.sh), started on a loopback port for the session."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(server_url: str, folder: Path, port: int) -> Path:
    """A pgbouncer.ini pooling every database of ``server_url`` per transaction."""
    url = make_url(server_url)
    host = url.query.get("host") or url.host or "127.0.0.1"
    target = f"host={host} port={url.port or 5432} user={url.username or 'postgres'}"
    if url.password:
        target += f" password={url.password}"
    ini = folder / "pgbouncer.ini"
    ini.write_text("\n".join([
        "[databases]", f"* = {target}", "",
        "[pgbouncer]", "listen_addr = 127.0.0.1", f"listen_port = {port}",
        "unix_socket_dir =", "auth_type = any", "pool_mode = transaction",
        "max_client_conn = 500", "default_pool_size = 20",
        f"logfile = {folder / 'pgbouncer.log'}", f"pidfile = {folder / 'pgbouncer.pid'}", ""]))
    return ini


def _as_service_user(command: list[str]) -> list[str]:
    """PgBouncer refuses to run as root: run it as pgserver's user then."""
    if os.geteuid() != 0:
        return command
    user = "pgserver" if shutil.which("runuser") else None
    if user is None:
        pytest.skip("pgbouncer cannot run as root and runuser is missing")
    return ["runuser", "-u", user, "--", *command]


def session_pooler(server_url: str) -> Iterator[str]:
    """Yield the URL of a transaction-mode PgBouncer in front of ``server_url`` (the
    database name is passed through); stop it afterwards."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        pytest.skip("Debian's pgbouncer is not installed (scripts/test.sh installs it)")
    folder = Path(tempfile.mkdtemp(prefix="htm-pgbouncer-"))
    folder.chmod(0o777)
    port = _free_port()
    ini = _config(server_url, folder, port)
    ini.chmod(0o644)
    # PgBouncer logs each connection to stderr as well as to its log file: to a file here,
    # since a pipe nobody reads fills up and PgBouncer then blocks, accepting no client.
    stderr = (folder / "stderr.log").open("wb")
    process = subprocess.Popen(_as_service_user([binary, str(ini)]),
                               stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = folder / "pgbouncer.log"
                    raise RuntimeError("pgbouncer did not start: " + (
                        log if log.exists() else folder / "stderr.log").read_text()) from None
                time.sleep(0.05)
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        _stop(process, ini)
        stderr.close()
        shutil.rmtree(folder, ignore_errors=True)


def _stop(process: subprocess.Popen[bytes], ini: Path) -> None:
    """Stop the pooler: SIGTERM through runuser; a pooler still up after ten seconds (one
    waiting on a client) is killed by its command line, which names its own ``ini``."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(FileNotFoundError):
            subprocess.run(["pkill", "-KILL", "-f", str(ini)], check=False, timeout=10)
        process.kill()
        process.wait(10)


def through_pooler(pooler_url: str, database_url: str) -> str:
    """``database_url``'s database, reached through the pooler."""
    name = make_url(database_url).database
    return make_url(pooler_url).set(database=name).render_as_string(hide_password=False)
