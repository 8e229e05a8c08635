"""Every ``htm`` command line the docs show is accepted as written, and ``htm mcp`` hands
its options to the server verbatim (``--port 8765``, not only ``--port=8765``)."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from htm_core.cli import parse_args, server_argv

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"", "bash", "sh", "shell", "console", "text"}
#: tokens that end the command in a shell line (redirections, pipes, lists)
SHELL_SYNTAX = {">", ">>", "<", "|", "&&", "||", ";", "2>", "2>&1", "&"}


def documented_command_lines() -> list[tuple[str, str]]:
    """``(where, line)`` of every line starting with ``htm `` in a fenced shell block
    (continuation lines joined); synopsis lines (``htm COMMAND --help``) are left out."""
    found = []
    for page in DOCS:
        text = page.read_text()
        for block in re.finditer(r"^```(\w*)[^\n]*\n(.*?)^```", text, re.M | re.S):
            if block.group(1) not in SHELL:
                continue
            body = re.sub(r"\\\n\s*", " ", block.group(2))
            for line in body.splitlines():
                line = line.strip().removeprefix("$ ")
                if line.startswith("htm ") and "COMMAND" not in line:
                    found.append((f"{page.relative_to(ROOT)}: {line}", line))
    return found


COMMAND_LINES = documented_command_lines()


def argv_of(line: str) -> list[str]:
    """The arguments the shell would give ``htm`` (comments and redirections dropped)."""
    words = shlex.split(line, comments=True)[1:]
    cut = next((i for i, w in enumerate(words) if w in SHELL_SYNTAX), len(words))
    return words[:cut]


def test_the_docs_show_command_lines() -> None:
    """The collector finds the pages' commands (a broken pattern would pass vacuously)."""
    lines = [line for _, line in COMMAND_LINES]
    assert len(lines) >= 20
    assert "htm mcp --http --port 8765" in [line.split("#")[0].strip() for line in lines]


@pytest.mark.parametrize("line", [line for _, line in COMMAND_LINES],
                         ids=[where for where, _ in COMMAND_LINES])
def test_every_documented_command_line_parses(line: str) -> None:
    """``htm``'s parser accepts the line as written; for ``htm mcp`` the server's parser
    accepts the options ``htm`` hands it."""
    args = parse_args(argv_of(line))
    if args.command == "mcp":
        pytest.importorskip("mcp")
        from htm_integrations.mcp.command import parse_args as server_parse_args

        server = server_parse_args(server_argv(args))
        words = argv_of(line)
        if "--port" in words:
            assert server.port == int(words[words.index("--port") + 1])
            assert server.http


def test_mcp_options_with_separate_values_reach_the_server() -> None:
    """Regression: ``htm mcp --http --port 8765`` and ``--log-level INFO`` were usage
    errors (argparse split the value from its option); only ``--port=8765`` worked."""
    pytest.importorskip("mcp")
    from htm_integrations.mcp.command import parse_args as server_parse_args

    args = parse_args(["--db", "m.db", "mcp", "--http", "--port", "8765", "--log-level", "INFO",
                       "--robot", "mcp"])
    assert args.command == "mcp"
    server = server_parse_args(server_argv(args))
    assert (server.http, server.port, server.log_level) == (True, 8765, "INFO")
    assert (server.db, server.robot) == ("m.db", "mcp")
    # a global option's value spelled "mcp" is not the subcommand
    args = parse_args(["--robot", "mcp", "mcp", "--port", "9000"])
    assert args.robot == "mcp" and server_parse_args(server_argv(args)).port == 9000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_htm_mcp_http_serves_on_the_port_given_as_a_separate_value(tmp_path: Path) -> None:
    """The real server in a subprocess, started exactly as docs/mcp.md writes it (on a free
    port): it logs that it serves on that port, then is stopped."""
    pytest.importorskip("mcp")
    port = _free_port()
    env = {**os.environ, "HTM_DATABASE_URL": str(tmp_path / "mcp.db"), "HTM_EMBEDDER": "hashing"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "htm_core.cli", "mcp", "--http", "--port", str(port),
         "--log-level", "INFO"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(120, proc.kill)  # a hung server must not hang the suite
    killer.start()
    seen = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            if "serving http://" in line:
                break
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        killer.cancel()
    assert any(f"serving http://127.0.0.1:{port}/mcp" in line for line in seen), "".join(seen)
