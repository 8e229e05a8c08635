"""The ``htm mcp`` command line: parse the server's options, open the memory, serve it.

``htm mcp ...`` (through :mod:`htm_core.cli`) and ``python -m htm_integrations.mcp ...``
both end in :func:`main`; the server itself is :func:`~htm_integrations.mcp.server.build_server`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Any

from htm_core import HTM, HTMError

__all__ = ["DEFAULT_HTTP_PORT", "LOOPBACK", "http_url", "main", "parse_args"]

# the server's log lines keep the logger name they have always had (docs/observability.md)
logger = logging.getLogger("htm_integrations.mcp.server")

DEFAULT_HTTP_PORT = 8765
LOOPBACK = "127.0.0.1"


def http_url(port: int) -> str:
    """The address ``htm mcp --http --port PORT`` serves.

    >>> http_url(8765)
    'http://127.0.0.1:8765/mcp'
    """
    return f"http://{LOOPBACK}:{port}/mcp"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="htm mcp",
        description="Serve an htm memory over the Model Context Protocol (stdio by default).")
    parser.add_argument("--robot", metavar="NAME", help="this server's robot name (default $HTM_ROBOT or "
                                        "'default')")
    parser.add_argument("--db", "--database-url", dest="db", metavar="URL",
                        help="SQLite path or postgresql:// URL (default $HTM_DATABASE_URL, else "
                             "a SQLite file in the user data directory)")
    parser.add_argument("--embedder", metavar="NAME", help="auto, hashing, local or ollama[:model] (default "
                                           "$HTM_EMBEDDER or auto)")
    parser.add_argument("--user", metavar="ID",
                        help="whose memory this server works in (default $HTM_USER, else the "
                             "login name); `htm add --user ID` and the other scoped commands "
                             "meet it")
    parser.add_argument("--session", metavar="ID",
                        help="work in this session of the user only (default every session)")
    parser.add_argument("--shared", action="store_true",
                        help="serve the whole store, every user's memories (not scoped)")
    parser.add_argument("--shared-tag", dest="shared_tags", action="append", default=None,
                        metavar="TAG", help="memories with this tag are visible too "
                                            "(repeatable; knowledge shared with every user)")
    parser.add_argument("--working-memory-tokens", type=int, default=None, metavar="N",
                        help="working-memory budget in tokens (default 128000)")
    parser.add_argument("--http", action="store_true",
                        help=f"serve streamable HTTP on {LOOPBACK} instead of stdio")
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, metavar="N",
                        help=f"HTTP port with --http (default {DEFAULT_HTTP_PORT})")
    parser.add_argument("--telemetry", action="store_true",
                        help="export OpenTelemetry metrics and spans (extra 'otel')")
    parser.add_argument("--log-level", default="WARNING",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="log level on stderr (default WARNING)")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the server's command line (see ``htm mcp --help``)."""
    args = _parser().parse_args(argv)
    if args.port is not None and not 0 < args.port < 65536:
        _parser().error(f"--port must be 1..65535, got {args.port}")
    return args


def _open_htm(args: argparse.Namespace) -> HTM:
    kwargs: dict[str, Any] = {"robot": args.robot, "database_url": args.db,
                              "working_memory_tokens": args.working_memory_tokens,
                              "embedder": args.embedder}
    if args.telemetry:
        kwargs["telemetry"] = True
    return HTM(**kwargs)


def main(argv: list[str] | None = None) -> int:
    """Run the server until the client disconnects (stdio) or it is interrupted (HTTP).

    Returns the process exit status: 0 after a clean stop, 2 when the memory cannot be
    opened (the reason is printed on stderr, since stdout belongs to the protocol).
    """
    from .server import build_server

    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        htm = _open_htm(args)
    except HTMError as exc:
        sys.stderr.write(f"htm mcp: {type(exc).__name__}: {exc}\n")
        return 2
    with htm, contextlib.suppress(KeyboardInterrupt):
        try:
            server = build_server(htm, log_level=args.log_level, user_id=args.user,
                                  session_id=args.session, shared=args.shared,
                                  shared_tags=args.shared_tags)
        except HTMError as exc:
            sys.stderr.write(f"htm mcp: {type(exc).__name__}: {exc}\n")
            return 2
        if args.http:
            logger.info("htm mcp robot=%s serving %s", htm.robot, http_url(args.port))
            sys.stderr.write(f"htm mcp on {http_url(args.port)} (robot {htm.robot}, "
                             "loopback only); Ctrl-C to stop\n")
            sys.stderr.flush()
            server.run("streamable-http", host=LOOPBACK, port=args.port)
        else:
            logger.info("htm mcp robot=%s serving stdio", htm.robot)
            server.run("stdio")
    return 0
