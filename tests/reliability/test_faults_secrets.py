"""Secrets: every form a database address can carry a password in is masked (#25 item 7)."""

from __future__ import annotations

import pytest

from htm_core.secrets import mask_text, mask_url

SECRET = "s3cr3t-Pw"


@pytest.mark.parametrize("url", [
    f"postgresql://ana:{SECRET}@db:5432/htm",
    f"postgresql+psycopg://ana:{SECRET}@db/htm?sslmode=require",
    f"postgresql://ana@db/htm?password={SECRET}",
    f"postgresql://ana@db/htm?sslmode=require&password={SECRET}",
    f"postgresql://ana@db/htm?PASSWORD={SECRET}&sslmode=require",
    f"postgresql://ana@db/htm?sslpassword={SECRET}",
    f"host=db user=ana password={SECRET} dbname=htm",
    f"host=db password='{SECRET} with space' dbname=htm",
    f"host=db password = \"{SECRET}\"",
    f"postgresql//ana:{SECRET}@db/htm",
    f"postgresql://ana:{SECRET}@x@db/htm",
])
def test_every_password_form_is_masked(url: str) -> None:
    masked = mask_url(url)
    assert SECRET not in masked
    assert "***" in masked


@pytest.mark.parametrize("url", [
    "memories.db", "sqlite:///tmp/x.db", ":memory:", "postgresql://ana@db:5432/htm",
    "postgresql://db:5432/htm?sslmode=require",
])
def test_addresses_without_a_password_are_unchanged(url: str) -> None:
    assert mask_url(url) == url


def test_text_holding_an_address_is_masked() -> None:
    message = (f"connection to postgresql://ana:{SECRET}@db/htm failed; "
               f"retry with host=db password={SECRET}")
    masked = mask_text(message)
    assert SECRET not in masked
    assert masked.startswith("connection to postgresql://ana:***@db/htm failed")


# -- where addresses are shown ----------------------------------------------------------


def _with_query_password(url: str) -> str:
    """The test server's URL with the password moved into ``?password=`` (the server trusts
    local connections, so any password connects)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    bare = parsed.set(password=None).render_as_string(hide_password=False)
    return f"{bare}{'&' if '?' in bare else '?'}password={SECRET}"


@pytest.mark.postgres
def test_a_query_password_never_shows_in_stats_cli_logs_or_errors(
        pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Before the fix ``?password=`` was shown in full (only ``user:pw@`` was masked)."""
    import io
    import logging

    from htm_core import HTM, HashingEmbedder
    from htm_core.cli import main
    from htm_core.errors import HTMError

    url = _with_query_password(pg_url)
    caplog.set_level(logging.DEBUG)
    with HTM(database_url=url, embedder=HashingEmbedder()) as htm:
        htm.add("hello")
        assert SECRET not in htm.stats().database and "password=***" in htm.stats().database
        assert SECRET not in repr(htm.stats())
    out, err = io.StringIO(), io.StringIO()
    assert main(["--db", url, "--embedder", "hashing", "stats"], stdout=out, stderr=err) == 0
    assert SECRET not in out.getvalue() + err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert main(["copy", url, url], stdout=out, stderr=err) == 1  # refused: the same database
    assert SECRET not in out.getvalue() + err.getvalue() and "***" in err.getvalue()
    missing = url.replace("/htm_test_", "/no_such_db_", 1)
    with pytest.raises(HTMError) as info:
        HTM(database_url=missing, embedder=HashingEmbedder())
    assert SECRET not in str(info.value)
    assert SECRET not in caplog.text


# -- files readable by their owner only -------------------------------------------------


def test_new_database_files_are_private(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Before the fix the SQLite file was created 0644 (world-readable)."""
    import os
    import stat

    from htm_core import HTM, HashingEmbedder

    old = os.umask(0o022)
    try:
        db = tmp_path / "private.db"
        with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
            htm.add("a secret memory")
            files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
        assert files["private.db"] == 0o600
        assert all(mode == 0o600 for name, mode in files.items() if name.startswith("private.db"))
        assert {"private.db-wal", "private.db-shm"} <= set(files)
    finally:
        os.umask(old)


def test_an_existing_database_keeps_its_mode(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import stat

    from htm_core import HTM, HashingEmbedder

    db = tmp_path / "shared.db"
    db.touch()
    os.chmod(db, 0o640)
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        htm.add("x")
    assert stat.S_IMODE(db.stat().st_mode) == 0o640


def test_the_vector_graph_file_is_private(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import stat

    import numpy as np

    pytest.importorskip("usearch")
    from htm_core.store.ann import ApproximateIndex

    old = os.umask(0o022)
    try:
        path = tmp_path / "db-vectors.usearch"
        index = ApproximateIndex(8, path=path, min_rows=50, background=False)
        x = np.random.default_rng(0).standard_normal((100, 8)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        ids = np.arange(1, 101, dtype=np.int64)
        index.add_arrays(ids, x, np.zeros(100), ids % 2)
        index.ensure_graph()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        os.umask(old)


# -- the CLI shows control characters escaped --------------------------------------------


def test_the_cli_shows_terminal_escapes_in_memories_escaped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Before the fix ``htm recall`` / ``htm context`` wrote ESC sequences as they were."""
    import io

    from htm_core.cli import main

    db = str(tmp_path / "cli.db")
    nasty = "editor \x1b[2J\x1b]0;owned\x07 vim \u202egnp.exe \x9b31m"

    def run(*argv: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        assert main(["--db", db, "--embedder", "hashing", *argv], stdout=out, stderr=err) == 0
        return out.getvalue() + err.getvalue()

    out, err = io.StringIO(), io.StringIO()  # a key may not hold one (test_faults_names.py)
    assert main(["--db", db, "--embedder", "hashing", "add", nasty, "--key", "k\x1b[1m"],
                stdout=out, stderr=err) == 1
    assert "\x1b" not in err.getvalue() and "control character" in err.getvalue()
    run("add", nasty, "--key", "k-bold")
    for shown in (run("recall", "editor vim"), run("context"), run("log")):
        assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
        assert "\x9b" not in shown
    assert "\\x1b[2J" in run("recall", "editor vim")
