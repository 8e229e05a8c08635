"""A memory's versions, written once: update in place, superseded versions kept as history.

``update_memory`` copies the current version of a memory (content, importance, tags,
metadata, vector) into ``memory_versions`` and writes the new one into the memory's own
row, so its id, key, creation time and working-memory membership stay; the full-text
index follows the row (SQLite's triggers, PostgreSQL's generated ``tsvector``). Every
robot holding the memory in working memory gets its working-set version bumped, so its
readers fetch the new text; the ``update`` log line names the version superseded. All of
it is one transaction. It is compare-and-set: the row is read under its lock (SQLite's
``BEGIN IMMEDIATE``, PostgreSQL's ``FOR UPDATE``) and
:func:`~htm_core.store.merging.merge_update` decides, against the version the caller read,
which fields to write or whether to refuse.

A backend supplies how a vector is written and how the history is searched by vector and
by full text (its :class:`~htm_core.store._sql.parts.HistorySQL`); the history of a memory
goes with it when it is purged (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import NotFoundError
from ...models import Memory
from ...text import parse_query
from ..base import UPDATE_FIELDS, ArmQuery, NewMemory
from ..merging import merge_update, update_fields
from ..one_embedder import clear_failures
from .dialect import Dialect
from .filters import filter_sql
from .parts import Database, HistorySQL, RowListener, Rows

__all__ = ["Versions"]

#: The columns of a superseded version, with its memory's (``v``: the version, ``m``, ``r``).
_VERSION_COLUMNS = (
    "SELECT m.id, m.key, v.content, v.content_hash, r.name, v.importance, v.token_count, "
    "m.created_at, m.last_accessed, m.access_count, v.metadata, v.tags, v.embedder, "
    "m.forgotten_at, v.version, v.superseded_at, v.id, v.kind, v.source, v.confidence "
    "FROM memory_versions v "
    "JOIN memories m ON m.id = v.memory_id JOIN robots r ON r.id = m.robot_id ")

#: The fields an update writes to their own column, as given.
_PROVENANCE = ("kind", "source", "confidence")


class Versions:
    """``update_memory``, ``versions`` and ``search_history`` of both SQL stores."""

    def __init__(self, db: Database, dialect: Dialect, rows: Rows, history: HistorySQL, *,
                 listeners: Sequence[RowListener] = ()) -> None:
        self._db, self._dialect, self._rows = db, dialect, rows
        self._history = history
        self._listeners = tuple(listeners)

    def update_memory(self, record: NewMemory, *, robot: str, at: datetime,
                      read_version: int | None = None,
                      fields: Collection[str] = UPDATE_FIELDS,
                      strict: bool = False) -> Memory:
        """Set ``fields`` of the memory under ``record.key`` to ``record``'s, as a new
        version, compared and written under the row's lock (see ``Versions``)."""
        key = record.key

        def write(conn: Connection, rid: int) -> tuple[Memory, bool]:
            if self._dialect.serial_history:
                conn.execute(text(self._dialect.serial_history))
            mid, version = self._locked_row(conn, key)
            now = self._rows.fetch(conn, "m.id = :id", {"id": mid}, False)[0]
            base = update_fields(now) if read_version in (None, version) else \
                self._version_fields(conn, mid, int(read_version))
            changes = merge_update(key, record, fields, now=update_fields(now), base=base,
                                   versions=(read_version, version), strict=strict)
            if not changes:
                return now, False
            self._supersede(conn, mid, now.tags, at, rid)
            self._write_fields(conn, mid, record, changes)
            # Every robot, not only those holding it now: a robot whose recall of it is
            # still pending (written behind) holds it without a membership row yet.
            conn.execute(text("UPDATE robots SET working_version = working_version + 1"))
            self._db.log_lines(conn, [("update", rid, mid, key, {
                "version": version + 1, "superseded": version,
                "content_changed": "content" in changes})])
            return self._rows.fetch(conn, "m.id = :id", {"id": mid}, False)[0], "content" in changes

        memory, changed = self._db.writing_as(robot, "updating a memory", write)
        for listener in self._listeners:
            listener.after_update(memory, record.embedding if changed else None, changed)
        return memory

    def _locked_row(self, conn: Connection, key: str) -> tuple[int, int]:
        """(id, version) of the memory under ``key``, its row locked for this transaction
        (SQLite's write transaction holds the whole database)."""
        row = conn.execute(text(
            "SELECT id, forgotten_at IS NOT NULL, version FROM memories WHERE key = :k"
            + self._dialect.lock_rows), {"k": key}).first()
        if row is None:
            raise NotFoundError(f"no memory with key {key!r} to update: it was never "
                                "stored, or it has been purged; add() it instead")
        if bool(row[1]):
            raise NotFoundError(f"memory {key!r} is forgotten; restore({key!r}) it "
                                "before updating it")
        return int(row[0]), int(row[2])

    def _version_fields(self, conn: Connection, mid: int,
                        version: int) -> dict[str, Any] | None:
        """The fields of the memory's superseded ``version``, None when it has none."""
        row = conn.execute(text(
            "SELECT content, importance, tags, metadata, kind, source, confidence "
            "FROM memory_versions WHERE memory_id = :id AND version = :v"),
            {"id": mid, "v": version}).first()
        if row is None:
            return None
        return {"content": row[0], "importance": float(row[1]),
                "tags": frozenset(json.loads(row[2])), "metadata": self._dialect.json_out(row[3]),
                "kind": row[4], "source": row[5],
                "confidence": None if row[6] is None else float(row[6])}

    def _supersede(self, conn: Connection, mid: int, tags: Sequence[str], at: datetime,
                   rid: int) -> None:
        """Copy the memory's current version into its history."""
        given = self._history.next_history_id(conn)
        conn.execute(text(
            "INSERT INTO memory_versions(" + ("id, " if given else "") + "memory_id, version, "
            "content, content_hash, importance, token_count, metadata, tags, embedding, "
            "embedder, written_at, superseded_at, superseded_by, kind, source, confidence) "
            "SELECT " + (":hid, " if given else "") + "m.id, m.version, m.content, "
            "m.content_hash, m.importance, m.token_count, m.metadata, CAST(:tags AS text), "
            "m.embedding, m.embedder, coalesce((SELECT p.superseded_at FROM memory_versions p "
            "WHERE p.memory_id = m.id AND p.version = m.version - 1), m.created_at), :at, :r, "
            "m.kind, m.source, m.confidence FROM memories m WHERE m.id = :id"),
            {"tags": json.dumps(list(tags)), "at": self._dialect.time_in(at), "r": rid, "id": mid,
             "hid": given})

    def _write_fields(self, conn: Connection, mid: int, record: NewMemory,
                      changes: set[str]) -> None:
        """Write ``changes`` (fields of ``record``) on the row as its next version. A new
        text drops the old text's vector and takes ``record``'s, made for that text."""
        sets = ["version = version + 1"]
        params: dict[str, Any] = {"id": mid}
        if "content" in changes:
            sets += ["content = :c", "content_hash = :h", "content_crc = :crc",
                     "token_count = :n", "embedding = NULL", "embedder = NULL"]
            params |= {"c": record.content, "h": record.content_hash,
                       "crc": record.content_crc, "n": record.token_count}
        if "importance" in changes:
            sets.append("importance = :i")
            params["i"] = float(record.importance)
        if "metadata" in changes:
            sets.append(f"metadata = {self._dialect.json_param}")
            params["meta"] = json.dumps(record.metadata)
        for name in _PROVENANCE:
            if name in changes:
                sets.append(f"{name} = :{name}")
                params[name] = getattr(record, name)
        conn.execute(text(f"UPDATE memories SET {', '.join(sets)} WHERE id = :id"), params)
        if "content" in changes:
            clear_failures(conn, [mid])  # the marks were about the old text
            if record.embedding is not None:
                self._history.set_vector(conn, mid, record.embedding, record.embedder or "unknown")
            for listener in self._listeners:
                listener.visibility_changed(conn)
        if "tags" in changes:
            conn.execute(text("DELETE FROM memory_tags WHERE memory_id = :id"), {"id": mid})
            self._rows.link_tags(conn, [(mid, list(record.tags))])

    # -- reading ---------------------------------------------------------------------

    def _version_memories(self, conn: Connection, where: str,
                          params: dict[str, Any]) -> list[tuple[int, Memory]]:
        """(version row id, superseded version as a Memory) of the rows matching ``where``."""
        rows = conn.execute(text(_VERSION_COLUMNS + "WHERE " + where), params).all()
        return [(int(r[16]), Memory(
            id=int(r[0]), key=r[1], content=r[2], content_hash=r[3], robot=r[4],
            importance=float(r[5]), token_count=int(r[6]), created_at=self._dialect.time_out(r[7]),
            last_accessed=self._dialect.time_out(r[8]), access_count=int(r[9]),
            metadata=self._dialect.json_out(r[10]), tags=tuple(json.loads(r[11])), embedder=r[12],
            forgotten_at=self._dialect.time_out(r[13]) if r[13] is not None else None,
            version=int(r[14]), superseded_at=self._dialect.time_out(r[15]), kind=r[17],
            source=r[18], confidence=None if r[19] is None else float(r[19])))
            for r in rows]

    def versions(self, key: str) -> list[Memory]:
        """Every version of the memory under ``key``, oldest first, the current one last."""
        def read(conn: Connection) -> list[Memory]:
            current = self._rows.fetch(conn, "m.key = :key", {"key": key}, False)
            if not current:
                return []
            old = self._version_memories(conn, "v.memory_id = :id ORDER BY v.version",
                                         {"id": current[0].id})
            return [*(m for _, m in old), current[0]]

        return self._db.reading("reading versions", read)

    def search_history(self, arm: ArmQuery) -> list[tuple[Memory, float]]:
        """Superseded versions of visible memories passing the arm's filters, best first."""
        params: dict[str, Any] = {}
        where = filter_sql(self._dialect, arm.filters, params)

        def read(conn: Connection) -> list[tuple[Memory, float]]:
            if arm.vector is not None:
                hits = self._history.vector_hits(conn, arm.vector, where, params, arm.limit)
            else:
                words = parse_query(arm.text or "").flat_words()
                hits = self._history.text_hits(conn, words, where, params, arm.limit) \
                    if words else []
            if not hits:
                return []
            ids = ", ".join(str(int(vid)) for vid, _ in hits)
            found = dict(self._version_memories(conn, f"v.id IN ({ids})", {}))
            return [(found[vid], score) for vid, score in hits if vid in found]

        return self._db.reading("searching history", read)


