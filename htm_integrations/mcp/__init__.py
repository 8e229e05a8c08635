"""htm over the Model Context Protocol (extra ``mcp``): ``python -m htm_integrations.mcp``.

See :mod:`htm_integrations.mcp.server` and ``docs/mcp.md``.
"""

from .server import build_server, main

__all__ = ["build_server", "main"]
