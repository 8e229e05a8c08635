"""PostgreSQL binary COPY on a transaction's own connection (the large-batch add path)."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from ._codec import _JSONB_OID, _BinaryPassDumper, _JsonTextDumper
from .native import driver_of

__all__ = ["KeyRace", "aware", "copy_rows"]


class KeyRace(Exception):
    """A COPY met a key another writer committed after the batch looked (retry by statement)."""


def aware(*values: datetime | None) -> bool:
    """Whether every value given is None or carries its time zone (a COPY sends it as is)."""
    return all(v is None or v.utcoffset() is not None for v in values)


#: Send buffer asked for a local (Unix-socket) connection: room for a whole batch of rows.
_SEND_BUFFER = 4 * 2**20


def _room_to_send(driver: psycopg.Connection[Any]) -> None:
    """Let a Unix socket to the server hold a whole COPY batch (the kernel caps the size
    at ``net.core.wmem_max``). With the default (about 200 KB, a hundred rows) the client
    stalls until the server has nearly caught up, so work it does after the rows are sent
    cannot overlap the server's inserting them. TCP sockets size their buffers themselves."""
    unix = getattr(socket, "AF_UNIX", None)
    if unix is None:
        return
    with contextlib.suppress(OSError):
        fd = os.dup(driver.pgconn.socket)
        try:
            sock = socket.socket(fileno=fd)  # owns the copy of the descriptor from here on
        except OSError:
            os.close(fd)
            raise
        with sock:
            if sock.family == unix and sock.getsockopt(
                    socket.SOL_SOCKET, socket.SO_SNDBUF) < _SEND_BUFFER:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SEND_BUFFER)


def copy_rows(conn: Connection, statement: str, types: Sequence[str],
              rows: Iterator[tuple[Any, ...]] | Sequence[tuple[Any, ...]],
              during: Callable[[], None] | None = None) -> None:
    """Stream ``rows`` with a binary COPY on the transaction's own connection; ``during``
    runs once they are all sent, while the server may still be inserting them. A
    ``vector`` column takes bytes made by ``_vectors_binary``."""
    driver = driver_of(conn)
    if during is not None:
        _room_to_send(driver)
    try:
        with driver.cursor() as cur:
            jsonb = type("JsonTextDumper", (_JsonTextDumper,), {"oid": _JSONB_OID})
            cur.adapters.register_dumper(None, jsonb)
            vector = cur.adapters.types.get("vector")
            if "vector" in types and vector is not None:  # values made by ``_vectors_binary``
                cur.adapters.register_dumper(None, type(
                    "VectorBinaryDumper", (_BinaryPassDumper,), {"oid": vector.oid}))
            with cur.copy(statement) as copy:
                copy.set_types(list(types))
                for row in rows:
                    copy.write_row(row)
                if during is not None:
                    during()
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name == "memories_key_key":
            raise KeyRace() from exc
        raise DBAPIError.instance(statement, None, exc, psycopg.Error) from exc
    except psycopg.Error as exc:
        raise DBAPIError.instance(statement, None, exc, psycopg.Error) from exc
