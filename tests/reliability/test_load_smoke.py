"""Smoke test of ``benchmarks/load.py`` in its short mode (the CI run of the load script).

Not a timing test: it runs ``python -m benchmarks.load --quick`` against the session's
PostgreSQL server (a unix socket) and checks the report says what the script promises: some
operations held, no error, no lost or duplicated memory, no missed recall, no working-memory
overrun. The figure recorded in docs/reliability.md comes from the full run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_load(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "benchmarks.load", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.postgres
def test_load_quick_loses_nothing(postgres_server_url: str) -> None:
    done = run_load("--quick", "--seconds", "2", "--url", postgres_server_url)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.strip("|").split("|") for line in done.stdout.splitlines()
            if line.startswith("| ")]
    header, values = [c.strip() for c in rows[0]], [c.strip() for c in rows[2]]
    report = dict(zip(header, values, strict=True))
    assert int(report["adds"].replace(",", "")) > 0
    assert int(report["recalls"].replace(",", "")) > 0
    assert int(report["ops/s held (worst second)"].replace(",", "")) > 0
    for column in ("errors", "lost", "duplicates", "recall missed own", "WM over budget"):
        assert report[column] == "0", (column, done.stdout)


def test_load_refuses_a_remote_server() -> None:
    done = run_load("--quick", "--url", "postgresql://htm@db.example.com/htm")
    assert done.returncode != 0
    assert "only runs against a server on 127.0.0.1, localhost or a unix socket" in done.stderr
