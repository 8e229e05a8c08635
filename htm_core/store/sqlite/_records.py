"""SQLite: reading memories (by key, id, hash), tags and importance, the catalogue counts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...clock import utc_from_timestamp
from ...models import Memory
from .._common import chunks
from .._vectors import (
    CHUNK_SQLITE,
    NOT_FAILED,
    EmbeddingFailure,
    list_failures,
)
from ._engine import _SQLiteEngine
from ._schema import _MEMORY_COLUMNS


class _SQLiteRecords(_SQLiteEngine):
    """Reads of single memories and the catalogue."""

    # -- reading ---------------------------------------------------------------------

    def _to_memory(self, row: Any, tags: Sequence[str], embedding: bytes | None = None) -> Memory:
        return Memory(
            id=row.id, key=row.key, content=row.content, content_hash=row.content_hash,
            robot=row.robot, importance=row.importance, token_count=row.token_count,
            created_at=utc_from_timestamp(row.created_at),
            last_accessed=utc_from_timestamp(row.last_accessed),
            access_count=row.access_count, tags=tuple(tags), metadata=json.loads(row.metadata),
            embedder=row.embedder,
            embedding=np.frombuffer(embedding, dtype=np.float32).tolist() if embedding else None,
            forgotten_at=utc_from_timestamp(row.forgotten_at) if row.forgotten_at else None,
            version=int(row.version),
        )

    def _fetch(self, conn: Connection, where: str, params: dict[str, Any],
               include_embedding: bool) -> list[Memory]:
        cols = _MEMORY_COLUMNS + (", m.embedding" if include_embedding else "")
        rows = conn.execute(text(
            f"SELECT {cols} FROM memories m JOIN robots r ON r.id = m.robot_id WHERE {where}"
        ), params).all()
        if not rows:
            return []
        tags: dict[int, list[str]] = {}
        for part in chunks([r.id for r in rows], 500):
            for mid, name in conn.execute(text(
                "SELECT mt.memory_id, t.name FROM memory_tags mt JOIN tags t ON t.id = mt.tag_id "
                f"WHERE mt.memory_id IN ({', '.join(str(int(i)) for i in part)}) ORDER BY t.name"
            )):
                tags.setdefault(mid, []).append(name)
        return [self._to_memory(r, tags.get(r.id, ()), r.embedding if include_embedding else None)
                for r in rows]

    def get_many(self, ids: Sequence[int], *, include_embedding: bool = False,
                 include_forgotten: bool = False) -> list[Memory]:
        if not ids:
            return []
        found: dict[int, Memory] = {}
        visible = "" if include_forgotten else " AND m.forgotten_at IS NULL"
        with self._read() as conn:
            for part in chunks(list(ids), 500):
                id_list = ", ".join(str(int(i)) for i in part)
                for m in self._fetch(conn, f"m.id IN ({id_list}){visible}", {},
                                     include_embedding):
                    found[m.id] = m
        return [found[i] for i in ids if i in found]

    def find_embedding(self, content_hash: str, embedder: str) -> list[float] | None:
        with self._read() as conn:
            row = conn.execute(text(
                "SELECT embedding FROM memories WHERE content_hash = :h AND embedder = :e "
                f"AND embedding IS NOT NULL AND NOT {CHUNK_SQLITE} LIMIT 1"),
                {"h": content_hash, "e": embedder}).first()
        return np.frombuffer(row[0], dtype=np.float32).tolist() if row else None

    def find_embeddings(self, content_hashes: Sequence[str], embedder: str
                        ) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        with self._read() as conn:
            for part in chunks(list(dict.fromkeys(content_hashes)), 500):
                params: dict[str, Any] = {f"h{i}": h for i, h in enumerate(part)}
                params["e"] = embedder
                marks = ", ".join(f":h{i}" for i in range(len(part)))
                for h, blob in conn.execute(text(
                        f"SELECT content_hash, embedding FROM memories WHERE content_hash IN ({marks}) "
                        f"AND embedder = :e AND embedding IS NOT NULL AND NOT {CHUNK_SQLITE}"),
                        params):
                    found.setdefault(h, np.frombuffer(blob, dtype=np.float32).tolist())
        return found

    def missing_embeddings(self, *, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        with self._read() as conn:
            rows = conn.execute(text(
                "SELECT m.id, m.content, m.metadata FROM memories m WHERE m.embedding IS NULL "
                f"AND m.forgotten_at IS NULL AND {NOT_FAILED} ORDER BY m.id LIMIT :l"),
                {"l": limit}).all()
        return [(r[0], r[1], json.loads(r[2]) if r[2] else {}) for r in rows]

    def embedding_failures(self, *, limit: int = 100) -> list[EmbeddingFailure]:
        with self._read() as conn:
            rows = list_failures(conn, limit)
        return [EmbeddingFailure(key=k, embedder=e, error=r, failed_at=utc_from_timestamp(t))
                for k, e, r, t in rows]

    # -- tags ------------------------------------------------------------------------

    @staticmethod
    def _link_tags(conn: Connection, items: Sequence[tuple[int, Sequence[str]]]) -> None:
        for mid, tags in items:
            for tag in tags:
                tag_id = conn.execute(text(
                    "INSERT INTO tags(name) VALUES (:n) ON CONFLICT(name) DO UPDATE "
                    "SET name = excluded.name RETURNING id"), {"n": tag}).scalar_one()
                conn.execute(text("INSERT OR IGNORE INTO memory_tags(memory_id, tag_id) "
                                  "VALUES (:m, :t)"), {"m": mid, "t": tag_id})
