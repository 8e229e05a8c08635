"""PostgreSQL vector columns: their dimension, fixed by the first vector, and HNSW indexes."""

from __future__ import annotations

import json

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import ValidationError
from ...validation import check_int
from ..one_embedder import check_embedder
from ._schema import _BULK_MARKER, _DIMENSION_LOCK, _HNSW_INDEX, _WINDOWS_HNSW_INDEX
from .engine import PostgresDatabase, embedding_settings

__all__ = ["VectorColumns", "check_hnsw"]


def check_hnsw(hnsw_m: int, hnsw_ef_construction: int) -> tuple[int, int]:
    """``hnsw_m`` and ``hnsw_ef_construction`` checked against what pgvector accepts."""
    m = check_int("hnsw_m", hnsw_m, 2, 100)
    ef_construction = check_int("hnsw_ef_construction", hnsw_ef_construction, 4, 1000)
    if ef_construction < 2 * m:
        raise ValidationError(
            f"hnsw_ef_construction ({hnsw_ef_construction}) must be at least 2 * hnsw_m "
            f"({2 * hnsw_m}); pgvector refuses a smaller one")
    return m, ef_construction


class VectorColumns:
    """The ``vector`` columns of ``memories`` and ``memory_windows`` and their HNSW indexes.

    ``memories.embedding`` takes its dimension (and its index) with the first vector;
    the window column with the first windows of an embedder. ``hnsw_m`` and
    ``hnsw_ef_construction`` are used whenever an index is built.
    """

    def __init__(self, db: PostgresDatabase, *, hnsw_m: int, hnsw_ef_construction: int) -> None:
        self.db = db
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construction = hnsw_ef_construction

    def hnsw_ddl(self) -> str:
        """The statement building the memories' HNSW index (if it is missing)."""
        return (f"CREATE INDEX IF NOT EXISTS {_HNSW_INDEX} ON memories "
                f"USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = {self.hnsw_m}, ef_construction = {self.hnsw_ef_construction}) "
                "WHERE forgotten_at IS NULL")

    def check_embedding(self, conn: Connection, embedder: str, dim: int) -> None:
        """Fix the dimension with the first vector (column type + HNSW index); else check it.

        While a bulk load runs (its marker is in ``htm_meta``) the index is left to the
        load's end, which builds it once over all the rows.
        """
        meta = self.db.meta(conn)
        info = embedding_settings(meta)
        if info is None:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _DIMENSION_LOCK})
            meta = self.db.meta(conn)  # another process may have fixed it meanwhile
            info = embedding_settings(meta)
        if info is None:
            conn.exec_driver_sql(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dim)})")
            if _BULK_MARKER not in meta:
                conn.exec_driver_sql(self.hnsw_ddl())
            self.db.set_meta(conn, "embedder", embedder)
            self.db.set_meta(conn, "embedding_dim", str(dim))
            self.db.set_meta(conn, "hnsw", json.dumps({
                "m": self.hnsw_m, "ef_construction": self.hnsw_ef_construction}))
            return
        check_embedder(info[0], info[1], embedder, dim)

    def window_dim(self, conn: Connection, dim: int) -> None:
        """Give the window column dimension ``dim`` and its HNSW index (once per embedder)."""
        def typmod() -> int:
            return int(conn.execute(text(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memory_windows'::regclass "
                "AND attname = 'embedding'")).scalar_one())

        if typmod() == dim:
            return
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _DIMENSION_LOCK})
        if typmod() == dim:
            return
        conn.execute(text("DELETE FROM memory_windows"))  # another embedder's, if any
        conn.exec_driver_sql(f"ALTER TABLE memory_windows ALTER COLUMN embedding TYPE vector({dim})")
        conn.exec_driver_sql(
            f"CREATE INDEX IF NOT EXISTS {_WINDOWS_HNSW_INDEX} ON memory_windows "
            f"USING hnsw (embedding vector_cosine_ops) WITH (m = {self.hnsw_m}, "
            f"ef_construction = {self.hnsw_ef_construction})")
