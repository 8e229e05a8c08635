"""The SQLite database file itself: created private, checked writable, found before reading."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ...errors import DatabaseUnavailableError, ValidationError
from ._errors import sqlite_error

__all__ = ["create_private", "existing_database_file", "writable"]


def create_private(path: Path) -> None:
    """Create a new database file readable and writable by its owner only (0600).

    SQLite gives the ``-wal`` and ``-shm`` files it creates beside it the same mode. An
    existing file keeps the mode it has.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError:
        return  # SQLite reports why the file cannot be opened, with htm's wording
    os.close(fd)


def writable(path: Path) -> bool:
    """Whether SQLite can write ``path``: the file, and its folder (for ``-wal``/``-shm``)
    unless both already exist and are writable."""
    if not os.access(path, os.W_OK):
        return False
    if os.access(path.parent, os.W_OK):
        return True
    sidecars = [Path(f"{path}-wal"), Path(f"{path}-shm")]
    return all(p.exists() and os.access(p, os.W_OK) for p in sidecars)


def existing_database_file(database: str | Path | None) -> Path:
    """The SQLite file ``database`` names, which must already exist as an htm database.

    For commands that only read a store (``htm export``, the source of ``htm copy``):
    nothing is created, and a missing file, a folder, a file that is not SQLite and a
    SQLite file without htm's tables are each refused with a message naming the path.
    """
    from ._engine import default_sqlite_path, sqlite_url

    if database is None:
        path = default_sqlite_path()
    else:
        url = sqlite_url(database)
        if url in ("sqlite://", "sqlite:///:memory:"):
            raise ValidationError("an in-memory database (:memory:) starts empty; give the path "
                                  "or URL of the database to read from")
        path = Path(url.split("///", 1)[-1].split("?", 1)[0])
    if not path.exists():
        raise DatabaseUnavailableError(
            f"no database at {path}: the file does not exist (a relative path is read from "
            f"{Path.cwd()}); check the path or --db; nothing was created")
    if not path.is_file():
        raise DatabaseUnavailableError(f"{path} is not a database file (it is a folder?); "
                                       "check the path")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise sqlite_error(exc, str(path), "opening") from exc
    if "htm_meta" not in tables or "memories" not in tables:
        raise DatabaseUnavailableError(
            f"{path} is an SQLite file but not an htm database (it has no htm tables); "
            "check the path")
    return path
