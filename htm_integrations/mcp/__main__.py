"""``python -m htm_integrations.mcp``: run the htm MCP server (stdio by default)."""

import sys

from .server import main

sys.exit(main())
