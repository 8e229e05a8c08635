"""The token redirect of ``htm ui`` stays on its own site.

Opening the printed address (``?token=``) sets the cookie and redirects to the same page
without the token. The page is the request's path, which an attacker can shape so that a
browser reads the ``Location`` as another host (``//evil.example``, a backslash, encoded
or tab-split variants). Each attempt must land on a path of the ui itself, as a browser
resolves it (WHATWG URL rules: tabs and newlines dropped, ``\\`` read as ``/``).
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

import pytest
from starlette.testclient import TestClient

from htm_core import HTM
from htm_integrations.ui import create_app
from htm_integrations.ui.security import local_path

TOKEN = "s3cret-token-of-this-test"
BASE = "http://192.0.2.1:8765"
ATTEMPTS = ["//evil.example/", "//evil.example/memories", "/\\evil.example",
            "/\\/evil.example/", "/%2F%2Fevil.example", "/%2f/evil.example", "/%5Cevil.example",
            "/%5C%5Cevil.example", "///evil.example", "/%09/evil.example",
            "/%0A/evil.example", "/https://evil.example", "/%68ttps://evil.example",
            "//EVIL.example:80/a", "//evil.example%2F..", "/.//evil.example"]


def _as_a_browser_reads(location: str) -> str:
    """The host a browser goes to for ``location`` given on a page of ``BASE``."""
    cleaned = location.replace("\t", "").replace("\n", "").replace("\r", "")
    return urlsplit(urljoin(BASE + "/memories", cleaned.replace("\\", "/"))).netloc


@pytest.mark.parametrize("path", ATTEMPTS)
def test_the_token_redirect_never_leaves_the_site(ui_htm: HTM, path: str) -> None:
    remote = TestClient(create_app(ui_htm, token=TOKEN), base_url=BASE,
                        client=("192.0.2.7", 40_000))
    response = remote.get(f"{BASE}{path}?token={TOKEN}&tag=user", follow_redirects=False)
    assert response.status_code == 303
    location = response.headers["location"]
    assert location.startswith("/") and not location.startswith(("//", "/\\"))
    assert _as_a_browser_reads(location) == "192.0.2.1:8765", location
    assert TOKEN not in location and urlsplit(location).query == "tag=user"


def test_the_ui_own_paths_redirect_to_themselves(ui_htm: HTM) -> None:
    remote = TestClient(create_app(ui_htm, token=TOKEN), base_url=BASE,
                        client=("192.0.2.7", 40_000))
    response = remote.get(f"/memory?key=pref-vim&token={TOKEN}", follow_redirects=False)
    assert response.headers["location"] == "/memory?key=pref-vim"
    assert remote.get(response.headers["location"]).status_code == 200


@pytest.mark.parametrize(("path", "expected"), [
    ("/memories", "/memories"), ("//evil.example/x", "/evil.example/x"),
    ("/\\evil.example", "/%5Cevil.example"), ("", "/"), ("evil.example", "/evil.example"),
    ("/a b/ü", "/a%20b/%C3%BC"), ("/\t/evil", "/%09/evil")])
def test_local_path(path: str, expected: str) -> None:
    assert local_path(path) == expected
