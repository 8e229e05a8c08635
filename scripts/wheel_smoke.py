"""Smoke-test an installed htm wheel: ``python wheel_smoke.py EXTRA WHEEL``.

Run by scripts/wheel_smoke.sh with the interpreter of a fresh virtualenv that holds the wheel
with one extra (``core`` for none), from outside the source tree. Standard library only. Each
check drives what a user runs (the ``htm`` command, the adapters' imports), so it holds
wherever a module lives inside the packages.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from importlib import metadata, resources
from pathlib import Path

BIN = Path(sys.executable).parent
TIMEOUT = 120


def fail(message: str) -> None:
    raise SystemExit(f"wheel smoke: {message}")


def htm(*args: str, db: Path, stdin: int | None = None) -> subprocess.Popen[str]:
    """The virtualenv's ``htm`` command on the store ``db``, its output piped."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HTM_EMBEDDER": "hashing"}
    return subprocess.Popen([str(BIN / "htm"), "--db", str(db), "--create", *args], env=env,
                            text=True, cwd=db.parent, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def check_installed(wheel: str) -> None:
    """The packages come from the virtualenv, carry py.typed, and are the wheel's version."""
    import htm_core
    import htm_integrations

    for package in (htm_core, htm_integrations):
        where = Path(package.__file__ or "")
        if not where.is_relative_to(sys.prefix):
            fail(f"{package.__name__} imported from {where}, not from the virtualenv {sys.prefix}")
        if not resources.files(package.__name__).joinpath("py.typed").is_file():
            fail(f"{package.__name__} has no py.typed marker")
    installed = metadata.version("htm-memory")
    if f"-{installed}-" not in Path(wheel).name or htm_core.__version__ != installed:
        fail(f"installed {installed} (htm_core.__version__ {htm_core.__version__}) from {wheel}")


def check_core(db: Path, wheel: str) -> None:
    """``htm demo`` runs; ``htm ui`` without its extra names the commands that add it."""
    demo = htm("demo", "--fast", db=db)
    out, err = demo.communicate(timeout=TIMEOUT)
    if demo.returncode != 0 or "Recall brings the evicted fact back" not in out:
        fail(f"htm demo exited {demo.returncode}:\n{out}\n{err}")
    ui = htm("ui", db=db)
    out, err = ui.communicate(timeout=TIMEOUT)
    wanted = ['pip install -e ".[ui]"', f'pip install "dist/{Path(wheel).name}[ui]"',
              'pip install "htm-memory[ui]"']
    if ui.returncode != 1 or not all(w in err for w in wanted):
        fail(f"htm ui without the ui extra exited {ui.returncode}, wanted {wanted}:\n{out}\n{err}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> str:
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode("utf-8"))
        except (ConnectionError, urllib.error.URLError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def check_ui(db: Path, wheel: str) -> None:
    """``htm ui`` serves its pages (rendered from the packaged templates) on loopback."""
    server = htm("ui", "--port", str(_free_port()), db=db)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("htm ui on "):
            fail(f"htm ui printed {line!r}: {server.stderr.read() if server.stderr else ''}")
        url = line.split()[3]
        for page in ("", "working", "timeline"):
            html = _get(url + page)
            if "<html" not in html or "htm" not in html:
                fail(f"htm ui served no page at /{page}: {html[:200]!r}")
    finally:
        server.terminate()
        server.wait(timeout=TIMEOUT)


def _rpc(server: subprocess.Popen[str], message: dict[str, object]) -> dict[str, object]:
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()
    if "id" not in message:
        return {}
    line = server.stdout.readline()
    if not line:
        fail(f"htm mcp closed stdout: {server.stderr.read() if server.stderr else ''}")
    answer: dict[str, object] = json.loads(line)
    if "result" not in answer:
        fail(f"htm mcp answered {message['method']} with {answer}")
    return answer


def check_mcp(db: Path, wheel: str) -> None:
    """``htm mcp`` answers ``initialize`` over stdio and lists its tools."""
    server = htm("mcp", db=db, stdin=subprocess.PIPE)
    try:
        init = _rpc(server, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "wheel-smoke", "version": "1"}}})
        result = init["result"]
        if not isinstance(result, dict) or result.get("serverInfo", {}).get("name") != "htm":
            fail(f"htm mcp initialize answered {init}")
        _rpc(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = _rpc(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]
        names = {tool["name"] for tool in tools["tools"]}  # type: ignore[index]
        if "remember" not in names:
            fail(f"htm mcp lists no remember tool: {sorted(names)}")
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=TIMEOUT)


def check_langchain(db: Path, wheel: str) -> None:
    """The LangChain adapters import and a retriever answers over a real store."""
    from htm_core import HTM
    from htm_integrations.langchain import (  # noqa: F401
        HTMChatMessageHistory,
        HTMMemory,
        HTMMiddleware,
        HTMRetriever,
        htm_tools,
    )

    with HTM(database_url=str(db), embedder="hashing") as memory:
        memory.add("the wheel installs", key="w")
        docs = HTMRetriever(htm=memory, k=1, shared=True).invoke("wheel")
        if [d.metadata["key"] for d in docs] != ["w"]:
            fail(f"HTMRetriever returned {docs}")


def check_llamaindex(db: Path, wheel: str) -> None:
    """The LlamaIndex adapters import and a memory block reads a real store."""
    from htm_core import HTM
    from htm_integrations.llama_index import HTMMemory, HTMMemoryBlock, HTMVectorStore  # noqa: F401

    with HTM(database_url=str(db), embedder="hashing") as memory:
        memory.add("the wheel installs", key="w")
        HTMMemory.from_defaults(htm=memory)


CHECKS = {"core": check_core, "ui": check_ui, "mcp": check_mcp, "langchain": check_langchain,
          "llamaindex": check_llamaindex}


def main() -> None:
    extra, wheel = sys.argv[1], sys.argv[2]
    check_installed(wheel)
    with tempfile.TemporaryDirectory(prefix=f"htm-smoke-{extra}-") as tmp:
        db = Path(tmp) / "htm.db"
        CHECKS[extra](db, wheel)


if __name__ == "__main__":
    main()
