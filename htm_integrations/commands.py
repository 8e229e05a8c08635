"""``htm mcp`` and ``htm ui``: the subcommands this package provides to the ``htm`` command.

pyproject.toml names :func:`mcp` and :func:`ui` in the ``htm.commands`` entry-point group,
where :mod:`htm_core.cli` finds them (:mod:`htm_core.cli_commands`). Each adds its
subcommand and returns the handler that runs it; this module imports neither the MCP SDK
nor the web stack, so a missing extra is reported when its command runs, naming the
``pip install`` that adds it.
"""

from __future__ import annotations

import argparse
import importlib.util

from htm_core.cli_commands import AddCommand, CommandRun, Handler
from htm_core.errors import missing_extra

__all__ = ["mcp", "ui"]


def mcp(add: AddCommand) -> Handler:
    """``htm mcp``: every token after it is the MCP server's (:mod:`htm_integrations.mcp`)."""
    add("run the MCP server (needs the mcp extra); every option after `mcp` is the server's "
        "(`htm mcp --help` lists them)", passthrough=True)
    return _run_mcp


def _run_mcp(args: argparse.Namespace, command: CommandRun) -> int:
    if importlib.util.find_spec("mcp") is None:
        raise missing_extra("mcp", "mcp")
    try:
        from .mcp.server import main
    except ImportError as exc:
        raise missing_extra(f"the MCP server ({exc.name or exc})", "mcp") from None
    try:
        return int(main(command.argv) or 0)
    except SystemExit as exc:  # the server's own --help and usage errors
        return exc.code if isinstance(exc.code, int) else 2


def ui(add: AddCommand) -> Handler:
    """``htm ui``: the inspector (:mod:`htm_integrations.ui`) on the memory ``htm`` opens."""
    p = add("serve the inspector and recall debugger in the browser (needs the ui extra)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any other needs a token)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    p.add_argument("--token", help="access token for a non-loopback --host (default: a new "
                                   "one, printed with the address)")
    return _run_ui


def _run_ui(args: argparse.Namespace, command: CommandRun) -> int:
    from . import ui  # raises MissingDependencyError naming the ui extra without it

    with command.open_htm() as htm:
        ui.serve(htm, host=args.host, port=args.port, token=args.token, out=command.out)
    return 0
