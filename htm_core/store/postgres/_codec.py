"""PostgreSQL wire forms: pgvector's codec on every connection, COPY statements, JSON dumper.

Vectors travel as float32 numpy arrays in pgvector's binary form, by the ``pgvector``
package's psycopg adapters (:func:`register_vectors`), in parameters, arrays of parameters
and binary COPY alike.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.adapt import Dumper
from psycopg.pq import Format
from sqlalchemy import event
from sqlalchemy.engine import Engine

from ..base import (
    NewMemory,
)
from ..values import unit_embeddings

#: Columns and binary types of a COPY into ``memories`` (``vector`` is pgvector's, by name).
_COPY_MEMORIES = (
    "COPY memories(id, key, content, content_hash, content_crc, robot_id, importance, "
    "token_count, created_at, last_accessed, access_count, metadata, embedding, embedder, "
    "forgotten_at, kind, source, confidence) "
    "FROM STDIN (FORMAT BINARY)")
_COPY_MEMORIES_TYPES: tuple[str, ...] = (
    "int8", "text", "text", "text", "int8", "int8", "float8", "int4", "timestamptz",
    "timestamptz", "int4", "jsonb", "vector", "text", "timestamptz", "text", "text", "float8")
_JSONB_OID = 3802  # built-in type oids are fixed
_COPY_OPERATIONS = ("COPY operations(op, robot_id, memory_id, key, detail) "
                    "FROM STDIN (FORMAT BINARY)")
_COPY_OPERATIONS_TYPES: tuple[str, ...] = ("text", "int8", "int8", "text", "jsonb")
_COPY_WORKING = ("COPY working_memory(robot_id, memory_id, added_at, last_accessed, "
                 "access_count, seq, access_seq) FROM STDIN (FORMAT BINARY)")
_COPY_WORKING_TYPES: tuple[str, ...] = (
    "int8", "int8", "timestamptz", "timestamptz", "int4", "int8", "int8")


def register_vectors(engine: Engine) -> None:
    """Give every connection of ``engine`` pgvector's psycopg codec (``register_vector``).

    A numpy array parameter is then sent as a ``vector`` in binary, and ``vector`` results
    load as :class:`pgvector.Vector`. A connection is registered at its first checkout
    after the extension exists: a store opening a new database creates the extension on
    a connection it has already checked out, and registers it at the next checkout. The
    check is one lookup in the connection's own type registry.
    """
    @event.listens_for(engine, "checkout")
    def _register(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if dbapi_connection.adapters.types.get("vector") is not None:
            return
        with contextlib.suppress(psycopg.ProgrammingError):  # no vector type yet
            register_vector(dbapi_connection)


class _JsonTextDumper(Dumper):
    """``jsonb``'s binary input from JSON text already made by ``json.dumps`` (version 1)."""

    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return b"\x01" + str(obj).encode("utf-8")


_EMPTY_JSON = "{}"


class _BinaryPassDumper(Dumper):
    """A value already in its type's binary input form (``oid`` set by a subclass)."""

    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return bytes(obj)


#: pgvector's binary vector header: the dimension and an unused short.
_VECTOR_HEAD = struct.Struct(">HH")


def _vectors_binary(units: Sequence[np.ndarray | None]) -> list[bytes | None]:
    """Each of ``units`` (one dimension) in pgvector's binary form (dimension, unused,
    big-endian float32s), converted together with numpy rather than one by one through
    ``pgvector.Vector`` (a COPY sends one per row); None stays None."""
    have = [u for u in units if u is not None]
    if not have:
        return [None] * len(units)
    rows = iter(np.stack(have).astype(">f4"))
    head = _VECTOR_HEAD.pack(len(have[0]), 0)
    return [None if u is None else head + next(rows).tobytes() for u in units]


def _units(records: Sequence[NewMemory]) -> list[np.ndarray | None]:
    """Each record's embedding as a float32 unit vector (None without one), in one pass.

    The caller has checked that all embeddings have one dimension.
    """
    out: list[np.ndarray | None] = [None] * len(records)
    have, matrix = unit_embeddings(records)
    for row, i in enumerate(have):
        out[i] = matrix[row]
    return out
