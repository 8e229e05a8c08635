"""``htm ui`` from the command line: real processes serving on loopback (no token) and on
all interfaces (token printed and required), the missing-extra message, and the CLI not
importing the web stack for its other commands."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from htm_core.cli import main

from .conftest import _free_port

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "HTM_EMBEDDER": "hashing"}


def _started(proc: subprocess.Popen[str]) -> str:
    """The first line ``htm ui`` prints (its address)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("htm ui on "), line + (proc.stderr.read() if proc.stderr else "")
    return line


def _get(url: str, **kwargs: object) -> httpx.Response:
    deadline = time.monotonic() + 60
    while True:
        try:
            return httpx.get(url, timeout=10, **kwargs)  # type: ignore[arg-type]
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture
def run_ui(tmp_path: Path) -> Iterator[object]:
    started: list[subprocess.Popen[str]] = []

    def run(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "htm_core.cli", "--db", str(tmp_path / "htm.db"), "--create",
             "ui", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path)
        started.append(proc)
        return proc

    yield run
    for proc in started:
        proc.terminate()
        proc.wait(timeout=30)


def test_htm_ui_serves_loopback_without_a_token(run_ui: object) -> None:
    port = _free_port()
    proc = run_ui("--port", str(port))  # type: ignore[operator]
    line = _started(proc)
    assert f"http://127.0.0.1:{port}/ (loopback only)" in line
    assert "token" not in line.split("(")[0]
    response = _get(f"http://127.0.0.1:{port}/memories")
    assert response.status_code == 200
    assert "Memories" in response.text


def test_htm_ui_on_another_host_prints_and_requires_a_token(run_ui: object) -> None:
    port = _free_port()
    proc = run_ui("--host", "0.0.0.0", "--port", str(port))  # type: ignore[operator]
    line = _started(proc)
    found = re.search(r"\?token=(\S+) \(token required\)", line)
    assert found, line
    token = found.group(1)
    assert _get(f"http://127.0.0.1:{port}/memories").status_code == 401
    assert _get(f"http://127.0.0.1:{port}/memories",
                headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_a_short_token_is_refused() -> None:
    err = io.StringIO()
    status = main(["--db", ":memory:", "--embedder", "hashing", "ui", "--token", "short"],
                  stdout=io.StringIO(), stderr=err)
    assert status == 1
    assert "at least 16 characters" in err.getvalue()


def test_without_the_extra_htm_ui_names_the_install() -> None:
    """The web stack is hidden from the import system (``sys.modules[name] = None``, which
    Python treats as not installed): the only way to run without an installed package in
    this environment."""
    code = (
        "import sys, io\n"
        "for name in ('starlette', 'jinja2', 'uvicorn'):\n"
        "    sys.modules[name] = None\n"
        "from htm_core.cli import main\n"
        "err = io.StringIO()\n"
        "print(main(['--db', ':memory:', '--embedder', 'hashing', 'ui'], stderr=err))\n"
        "print(err.getvalue())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(), timeout=120)
    assert done.stdout.splitlines()[0] == "1", done.stdout + done.stderr
    assert 'pip install "htm-memory[ui]"' in done.stdout


def test_the_cli_does_not_import_the_web_stack() -> None:
    code = ("import sys, io\nfrom htm_core.cli import main\n"
            "main(['--db', ':memory:', '--embedder', 'hashing', 'stats'], stdout=io.StringIO())\n"
            "print(sorted(m for m in ('starlette', 'jinja2', 'uvicorn', 'htm_integrations.ui') "
            "if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(), timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
