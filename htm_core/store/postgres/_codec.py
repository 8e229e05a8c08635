"""PostgreSQL wire forms: pgvector values, binary COPY dumpers and statements."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg.adapt import Dumper
from psycopg.pq import Format

from ...errors import (
    DimensionMismatchError,
)
from ..base import (
    NewMemory,
)
from ..vector_index import normalise

#: Columns and binary types of a COPY into ``memories`` (``vector`` is resolved per database).
_COPY_MEMORIES = (
    "COPY memories(id, key, content, content_hash, robot_id, importance, token_count, "
    "created_at, last_accessed, access_count, metadata, embedding, embedder, forgotten_at) "
    "FROM STDIN (FORMAT BINARY)")
_COPY_MEMORIES_TYPES: tuple[str, ...] = (
    "int8", "text", "text", "text", "int8", "float8", "int4", "timestamptz", "timestamptz",
    "int4", "jsonb", "vector", "text", "timestamptz")
_JSONB_OID = 3802  # built-in type oids are fixed
_COPY_OPERATIONS = ("COPY operations(op, robot_id, memory_id, key, detail) "
                    "FROM STDIN (FORMAT BINARY)")
_COPY_OPERATIONS_TYPES: tuple[str, ...] = ("text", "int8", "int8", "text", "jsonb")


def _vector_literal(unit: np.ndarray) -> str:
    """pgvector's text form; 9 significant digits round-trip a float32 exactly."""
    return "[" + ",".join(f"{x:.9g}" for x in unit.tolist()) + "]"


def _unit(vector: Sequence[float], what: str) -> np.ndarray:
    unit = normalise(vector)
    if not np.isfinite(unit).all():
        raise DimensionMismatchError(f"embedding for {what} contains NaN or infinity")
    return unit


class _VectorBinaryDumper(Dumper):
    """pgvector's binary input: int16 dimension, int16 unused, big-endian float4 values."""

    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        unit = np.asarray(obj, dtype=np.float32)
        return struct.pack("!HH", unit.shape[0], 0) + unit.astype(">f4").tobytes()


class _JsonTextDumper(Dumper):
    """``jsonb``'s binary input from JSON text already made by ``json.dumps`` (version 1)."""

    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return b"\x01" + str(obj).encode("utf-8")


_EMPTY_JSON = "{}"


def _vector_dumper(oid: int) -> type[Dumper]:
    """The binary vector dumper bound to this database's ``vector`` type oid."""
    return type("VectorBinaryDumper", (_VectorBinaryDumper,), {"oid": oid})


def _units(records: Sequence[NewMemory]) -> list[np.ndarray | None]:
    """Each record's embedding as a float32 unit vector (None without one), in one pass.

    The caller has checked that all embeddings have one dimension.
    """
    have = [i for i, r in enumerate(records) if r.embedding is not None]
    out: list[np.ndarray | None] = [None] * len(records)
    if not have:
        return out
    matrix = np.asarray([records[i].embedding for i in have], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1)
    matrix = matrix / np.where(norms > 0, norms, 1.0).astype(np.float32)[:, None]
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        bad = records[have[int(np.argmin(finite))]]
        raise DimensionMismatchError(f"embedding for {bad.key!r} contains NaN or infinity")
    for row, i in enumerate(have):
        out[i] = matrix[row]
    return out
