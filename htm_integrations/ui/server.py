"""Serving ``htm ui``: the address rules and uvicorn.

:func:`serve` binds ``127.0.0.1`` unless another host is given; a host that is not a
loopback address needs an access token (the one given, or a new one that is printed with
the address to open).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, TextIO

from htm_core.errors import ValidationError, missing_extra

from .app import create_app
from .security import is_loopback, new_token

if TYPE_CHECKING:
    from htm_core import HTM

__all__ = ["address", "serve"]


def address(host: str, port: int) -> str:
    """The URL of ``host:port`` (IPv6 in brackets).

    >>> address("127.0.0.1", 8765), address("::1", 80)
    ('http://127.0.0.1:8765/', 'http://[::1]:80/')
    """
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(htm: HTM, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
          out: TextIO | None = None) -> None:
    """Serve the UI over ``htm`` until interrupted (Ctrl-C).

    A ``host`` other than a loopback address requires a token: ``token`` if given, else a
    new one; the address to open (with ``?token=``) is written to ``out``.
    """
    if importlib.util.find_spec("uvicorn") is None:
        raise missing_extra("uvicorn (needed by htm ui)", "ui")
    import uvicorn

    if not 0 <= port <= 65_535:
        raise ValidationError(f"--port must be from 0 to 65535, got {port}")
    if token is not None and len(token) < 16:
        raise ValidationError("--token must be at least 16 characters; leave it out to get a "
                              "random one")
    if not is_loopback(host) and token is None:
        token = new_token()
    app = create_app(htm, token=token)
    url = address(host, port) + (f"?token={token}" if token else "")
    if out is not None:
        where = "loopback only" if token is None else "token required"
        out.write(f"htm ui on {url} ({where}); Ctrl-C to stop\n")
        out.flush()
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        app.state.ui.close()
