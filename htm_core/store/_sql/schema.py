"""The schema version gate both SQL stores apply, with one wording.

A store refuses a database written by a newer htm, and one that still needs creating or
upgrading when it was opened with ``migrate=False``; ``migrate()`` then upgrades it step
by step (each backend runs its own DDL, never dropping anything).
"""

from __future__ import annotations

from ...errors import SchemaError
from ..base import SCHEMA_VERSION

__all__ = ["needs_migration"]


def needs_migration(url: str, version: int, *, migrate: bool) -> bool:
    """Whether the database at ``url`` (at schema ``version``) must be created or upgraded.

    Raises :class:`~htm_core.errors.SchemaError` when it is newer than this htm, or when
    it needs an upgrade that ``migrate`` (False) does not allow.
    """
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"database {url} has schema version {version}, newer than this htm "
            f"understands ({SCHEMA_VERSION}); upgrade htm")
    if version < SCHEMA_VERSION and not migrate:
        raise SchemaError(
            f"database {url} has schema version {version}; run HTM(...).migrate() "
            "or `htm migrate` to create or upgrade it")
    return version < SCHEMA_VERSION
