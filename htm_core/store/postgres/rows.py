"""PostgreSQL memory rows: reading them as memories (by a ``WHERE`` clause, by ids, by
content hash), linking tags, deleting rows."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from psycopg.rows import namedtuple_row
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...models import Memory
from .._sql.filters import VISIBLE as _VISIBLE
from ..base import SearchFilters
from ..one_embedder import (
    CHUNK_POSTGRES,
    NOT_FAILED,
    EmbeddingFailure,
    list_failures,
)
from ..values import check_stored_text, checked_instance
from ._schema import _MEMORY_COLUMNS
from .engine import PostgresDatabase, driver_rows

__all__ = ["FilterSQL", "PostgresRows", "utc"]

#: The ``WHERE`` clause (on ``memories m``) of a search's filters, binding its values.
FilterSQL = Callable[[SearchFilters, dict[str, Any]], str]


def utc(value: datetime | None) -> datetime | None:
    """A stored time (or None) as an aware UTC datetime."""
    return None if value is None else value.astimezone(timezone.utc)


class PostgresRows:
    """The memory rows of one database, read as :class:`~htm_core.models.Memory`."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    # -- reading ---------------------------------------------------------------------

    def to_memory(self, row: Any, include_embedding: bool) -> Memory:
        check_stored_text(row.key, int(row.id), row.content, row.content_crc,
                          row.content_hash, self.db.url)
        return checked_instance(Memory,
            id=int(row.id), key=row.key, content=row.content,
            content_hash=row.content_hash, robot=row.robot,
            importance=float(row.importance), token_count=int(row.token_count),
            created_at=row.created_at.astimezone(timezone.utc),
            last_accessed=row.last_accessed.astimezone(timezone.utc),
            access_count=int(row.access_count), tags=tuple(row.tags),
            metadata=dict(row.metadata or {}), embedder=row.embedder,
            embedding=[float(x) for x in row.embedding]
            if include_embedding and row.embedding is not None else None,
            forgotten_at=utc(row.forgotten_at), version=int(row.version), kind=row.kind,
            source=row.source,
            confidence=None if row.confidence is None else float(row.confidence))

    @staticmethod
    def select(where: str, include_embedding: bool, join: str = "") -> str:
        """The statement reading memories (and their robot's name) that match ``where``."""
        cols = _MEMORY_COLUMNS + (", CAST(m.embedding AS real[]) AS embedding"
                                  if include_embedding else "")
        return f"SELECT {cols} FROM memories m JOIN robots r ON r.id = m.robot_id {join} WHERE {where}"

    def fetch(self, conn: Connection, where: str, params: dict[str, Any],
               include_embedding: bool, *, join: str = "") -> list[Memory]:
        found = conn.execute(text(self.select(where, include_embedding, join)), params).all()
        return [self.to_memory(r, include_embedding) for r in found]

    def get_many(self, ids: Sequence[int], *, include_embedding: bool = False,
                 include_forgotten: bool = False) -> list[Memory]:
        """Memories with these ids (visible ones unless asked), in the order of ``ids``."""
        if not ids:
            return []
        where = "m.id = ANY(:ids)" + ("" if include_forgotten else f" AND {_VISIBLE}")
        found = [self.to_memory(r, include_embedding) for r in self.db.quick(
            "reading memories", lambda pg, _info: driver_rows(
                pg, self.select(where, include_embedding), {"ids": [int(i) for i in ids]},
                namedtuple_row))]
        by_id = {m.id: m for m in found}
        return [by_id[i] for i in ids if i in by_id]

    def find_embeddings(self, content_hashes: Sequence[str], embedder: str
                        ) -> dict[str, list[float]]:
        """Stored vectors by this embedder for any of these contents, by content hash."""
        if not content_hashes:
            return {}
        # The hashes as one JSON text: psycopg dumps a text[] parameter element by element.
        found = self.db.read("looking up embeddings", lambda conn: conn.execute(text(
            "SELECT DISTINCT ON (content_hash) content_hash, CAST(embedding AS real[]) "
            "FROM memories WHERE content_hash = ANY(ARRAY(SELECT jsonb_array_elements_text("
            "CAST(:h AS jsonb)))) AND embedder = :e "
            f"AND embedding IS NOT NULL AND NOT {CHUNK_POSTGRES}"),
            {"h": json.dumps(list(dict.fromkeys(content_hashes))), "e": embedder}).all())
        return {str(r[0]): [float(x) for x in r[1]] for r in found}

    def missing_embeddings(self, *, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        """Up to ``limit`` (id, content, metadata) of visible memories without a vector and
        not marked as failing, oldest id first."""
        found = self.db.read("listing memories without embeddings", lambda conn: conn.execute(text(
            "SELECT m.id, m.content, m.metadata FROM memories m WHERE m.embedding IS NULL "
            f"AND m.forgotten_at IS NULL AND {NOT_FAILED} ORDER BY m.id LIMIT :l"),
            {"l": limit}).all())
        return [(int(r[0]), str(r[1]), dict(r[2] or {})) for r in found]

    def embedding_failures(self, *, limit: int = 100) -> list[EmbeddingFailure]:
        """The memories marked as failing, with the reason, oldest mark first."""
        found = self.db.read("listing failed embeddings", lambda conn: list_failures(conn, limit))
        return [EmbeddingFailure(key=k, embedder=e, error=r, failed_at=t) for k, e, r, t in found]

    # -- writing ---------------------------------------------------------------------

    @staticmethod
    def link_tags(conn: Connection, items: Sequence[tuple[int, Sequence[str]]]) -> None:
        pairs = [(mid, tag) for mid, tags in items for tag in tags]
        if not pairs:
            return
        # Sorted, so concurrent writers take the tag rows' locks in the same order.
        conn.execute(text(
            "INSERT INTO tags(name) SELECT DISTINCT n FROM unnest(CAST(:names AS text[])) AS n "
            "ORDER BY n ON CONFLICT (name) DO NOTHING"),
            {"names": sorted({tag for _mid, tag in pairs})})
        conn.execute(text(
            "INSERT INTO memory_tags(memory_id, tag_id) SELECT p.mid, t.id FROM unnest("
            "CAST(:mids AS bigint[]), CAST(:names AS text[])) AS p(mid, name) "
            "JOIN tags t ON t.name = p.name ON CONFLICT DO NOTHING"),
            {"mids": [p[0] for p in pairs], "names": [p[1] for p in pairs]})

    @staticmethod
    def delete_rows(conn: Connection, ids: Sequence[int]) -> None:
        """Delete the memory rows ``ids`` (their tags, windows and history go with them)."""
        conn.execute(text("DELETE FROM memories WHERE id = ANY(:ids)"), {"ids": list(ids)})
