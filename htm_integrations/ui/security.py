"""The safety rules of ``htm ui``, in one place.

Loopback only unless a token is set (a loopback client and a loopback ``Host`` header, so
DNS rebinding cannot reach it; with a token, every request carries it: the ``?token=`` of
the printed URL, which sets a cookie and redirects to :func:`local_path`, that cookie, or
``Authorization: Bearer``); CSRF tokens (HMAC of a per-browser cookie and a per-process
secret) on every ``POST``; no secrets shown (:func:`store_name`, :func:`redact_url`);
escaped output and a ``Content-Security-Policy`` allowing no script. See docs/ui.md
("Safety").
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from pathlib import PurePath
from urllib.parse import parse_qs, quote, unquote, urlsplit

__all__ = [
    "CSRF_COOKIE",
    "SECURITY_HEADERS",
    "TOKEN_COOKIE",
    "Guard",
    "host_name",
    "is_loopback",
    "local_path",
    "new_token",
    "redact_url",
    "store_name",
]

TOKEN_COOKIE = "htm_ui_token"
CSRF_COOKIE = "htm_ui_csrf"

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                                "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^@\s]*@")


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``.

    >>> redact_url("postgresql://htm:s3cret@db.example:5432/htm")
    'postgresql://htm:***@db.example:5432/htm'
    >>> redact_url("/home/me/memories.db")
    '/home/me/memories.db'
    """
    return _PASSWORD.sub(lambda m: m.group("head") + "***@", url)


def store_name(url: str) -> str:
    """A short name of the store at ``url``: a SQLite file's name, ``in memory``, or a
    PostgreSQL server's ``host/database`` (no user, password or options).

    >>> store_name("sqlite:////home/me/memories.db"), store_name("sqlite://")
    ('memories.db', 'in memory')
    >>> store_name("postgresql://htm:s3cret@db.example:5432/htm?sslmode=require")
    'db.example:5432/htm'
    >>> store_name("postgresql://postgres:pw@/postgres?host=/run/pg")
    '/run/pg/postgres'
    """
    parts = urlsplit(url)
    if not parts.scheme.startswith("postgres"):
        path = unquote(parts.path) if parts.scheme else url
        name = PurePath(path).name if path not in ("", "/", ":memory:") else ""
        return name or "in memory"
    host = parts.netloc.rpartition("@")[2] or parse_qs(parts.query).get("host", ["local"])[0]
    return f"{host.rstrip('/')}/{unquote(parts.path.lstrip('/'))}"


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine's loopback.

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if not host:
        return False
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The host part of a ``Host`` header (no port; IPv6 without brackets).

    >>> host_name("127.0.0.1:8765"), host_name("[::1]:80"), host_name("localhost")
    ('127.0.0.1', '::1', 'localhost')
    """
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


#: Characters a path keeps as they are in a redirect; everything else (``\\``, ``%``,
#: whitespace, control and non-ASCII characters) is percent-encoded.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def local_path(path: str) -> str:
    r"""``path`` (a request's decoded path) as a redirect target on this site only.

    Percent-encoded again, so a backslash, tab or newline cannot reach the browser (which
    would read ``/\host`` or ``/<tab>/host`` as ``//host``), and with one leading ``/``,
    so no ``//host`` or ``scheme:`` form can name another site.

    >>> local_path("//evil.example/?x"), local_path("/\\evil.example"), local_path("/memories")
    ('/evil.example/%3Fx', '/%5Cevil.example', '/memories')
    """
    return "/" + quote(path, safe=_PATH_SAFE).lstrip("/")


def new_token() -> str:
    """A fresh random access token."""
    return secrets.token_urlsafe(24)


class Guard:
    """The token and CSRF checks of one running app."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self._secret = secrets.token_bytes(32)

    def token_ok(self, given: str | None) -> bool:
        """Whether ``given`` is the access token (always True when none is set)."""
        if self.token is None:
            return True
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_for(self, cookie: str) -> str:
        """The form token that goes with the browser's CSRF cookie."""
        return hmac.new(self._secret, cookie.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, cookie: str | None, given: str | None) -> bool:
        """Whether a form's token matches the browser's cookie."""
        if not cookie or not given:
            return False
        return hmac.compare_digest(self.csrf_for(cookie).encode(), given.encode())
