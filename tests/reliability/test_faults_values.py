"""Values that cannot round-trip are refused at ``add`` (#25 item 6); the rest round-trip.

Every bad value is tried on both backends: before the fix SQLite accepted lone surrogates
and NUL in metadata (then every export crashed, and copies/imports into PostgreSQL failed
at the same batch on every retry), and extreme dates or deep nesting raised raw Python
exceptions (OverflowError, ValueError, RecursionError). Valid values at the edges of what
is documented are stored and read back (from the database, not the working memory), and
carried through an export and an import unchanged.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from htm_core import HTM
from htm_core._values import MAX_METADATA_DEPTH, MAX_TIME, MIN_TIME
from htm_core.errors import (
    InvalidContentError,
    InvalidMetadataError,
    InvalidTimeError,
    ValidationError,
)
from htm_core.store import open_store
from htm_core.transfer import copy_store, export_jsonl, import_jsonl


def _nested(depth: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


BAD: list[tuple[str, dict[str, Any], type[ValidationError], str]] = [
    ("lone surrogate in a value", {"metadata": {"a": "x\ud800"}}, InvalidMetadataError,
     "surrogate"),
    ("lone surrogate in a key", {"metadata": {"k\udc00": 1}}, InvalidMetadataError, "surrogate"),
    ("NUL in a value", {"metadata": {"a": "x\x00y"}}, InvalidMetadataError, "NUL"),
    ("NUL in a key", {"metadata": {"a\x00": 1}}, InvalidMetadataError, "NUL"),
    ("NUL deep in a list", {"metadata": {"a": [{"b": ["ok", "\x00"]}]}}, InvalidMetadataError,
     r"metadata\['a'\]\[0\]\['b'\]\[1\]"),
    ("a set", {"metadata": {"a": {1, 2}}}, InvalidMetadataError, "set"),
    ("bytes", {"metadata": {"a": b"x"}}, InvalidMetadataError, "bytes"),
    ("a datetime", {"metadata": {"a": datetime(2024, 1, 1)}}, InvalidMetadataError,
     "isoformat"),
    ("a non-string key", {"metadata": {1: "x"}}, InvalidMetadataError, "keys must be strings"),
    ("infinity", {"metadata": {"a": float("inf")}}, InvalidMetadataError, "finite"),
    ("an int past 64 bits", {"metadata": {"a": 2**70}}, InvalidMetadataError, "64 bits"),
    ("nesting past the limit", {"metadata": _nested(MAX_METADATA_DEPTH + 1)},
     InvalidMetadataError, "deeper than"),
    ("nesting past the recursion limit", {"metadata": _nested(5000)}, InvalidMetadataError,
     "deeper than"),
    ("year 1 east of UTC", {"created_at": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))},
     InvalidTimeError, "outside the times"),
    ("year 9999", {"created_at": datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)},
     InvalidTimeError, "outside the times"),
    ("a date, not a datetime", {"created_at": datetime(2024, 1, 1).date()}, InvalidTimeError,
     "must be a datetime"),
    ("NUL in content", {"content": "a\x00b"}, InvalidContentError, "NUL"),
]


@pytest.mark.parametrize(("kwargs", "error", "match"), [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])
def test_values_that_cannot_round_trip_are_refused_at_add(
        htm_factory: Callable[..., HTM], kwargs: dict[str, Any], error: type[Exception],
        match: str) -> None:
    htm = htm_factory()
    kwargs = dict(kwargs)  # shared by both backends' runs
    content = kwargs.pop("content", "a memory with a bad value")
    with pytest.raises(error, match=match):
        htm.add(content, key="bad", **kwargs)
    with pytest.raises(error, match=match):
        htm.add_many([{"content": "fine", "key": "ok"}, {"content": content, **kwargs}])
    assert htm.store.get("bad") is None and htm.store.get("ok") is None
    assert htm.store.counts("").total == 0


GOOD: list[tuple[str, dict[str, Any]]] = [
    ("unicode everywhere", {"metadata": {"ключ": "значение 🙂", "emoji 🙂": ["日本", "é"]}}),
    ("nesting at the limit", {"metadata": _nested(MAX_METADATA_DEPTH)}),
    ("64-bit extremes", {"metadata": {"min": -(2**63), "max": 2**63 - 1, "f": -0.5e-300}}),
    ("empty containers", {"metadata": {"d": {}, "l": [], "n": None, "b": False}}),
    ("earliest time", {"created_at": MIN_TIME}),
    ("latest time", {"created_at": MAX_TIME}),
    ("1969 with microseconds", {"created_at": datetime(1969, 7, 20, 20, 17, 40, 123456,
                                                       tzinfo=timezone.utc)}),
]


@pytest.mark.parametrize("kwargs", [g[1] for g in GOOD], ids=[g[0] for g in GOOD])
def test_values_at_the_documented_edges_round_trip(
        htm_factory: Callable[..., HTM], tmp_path: Path, kwargs: dict[str, Any]) -> None:
    htm = htm_factory()
    htm.add("an edge value", key="edge", **kwargs)
    stored = htm.store.get("edge")
    assert stored is not None
    if "metadata" in kwargs:
        assert stored.metadata == kwargs["metadata"]
    else:
        assert stored.created_at == kwargs["created_at"]
    path = tmp_path / "edge.jsonl"
    export_jsonl(htm.store, path)
    target = open_store(tmp_path / "again.db")
    try:
        import_jsonl(target, path)
        again = target.get("edge")
        assert again is not None
        assert (again.metadata, again.created_at) == (stored.metadata, stored.created_at)
    finally:
        target.close()


def _legacy_store(path: Path, metadata_json: str) -> None:
    """A SQLite store holding a value an older htm let in (written behind htm's back)."""
    with HTM(database_url=str(path), embedder="hashing") as htm:
        htm.add("legacy memory", key="legacy")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE memories SET metadata = ? WHERE key = 'legacy'", (metadata_json,))


def test_a_legacy_surrogate_does_not_crash_export_and_is_refused_by_import(
        tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    _legacy_store(db, '{"a": "x\\ud800"}')
    source = open_store(db)
    try:
        path = tmp_path / "legacy.jsonl"
        assert export_jsonl(source, path) == 1  # before the fix: UnicodeEncodeError
        target = open_store(tmp_path / "target.db")
        try:
            with pytest.raises(InvalidMetadataError, match=r"line 2: .*surrogate"):
                import_jsonl(target, path)
            result = import_jsonl(target, path, partial=True)
            assert result.written == 0 and "damaged line" in result.notes[-1]
        finally:
            target.close()
    finally:
        source.close()


@pytest.mark.postgres
def test_a_legacy_nul_is_refused_by_copy_naming_the_memory(tmp_path: Path, pg_url: str) -> None:
    """Before the fix the copy into PostgreSQL failed with a raw database error at the same
    batch on every retry; now it names the memory and the value before writing the batch."""
    db = tmp_path / "legacy.db"
    _legacy_store(db, '{"note": "a\\u0000b"}')
    source, target = open_store(db), open_store(pg_url)
    try:
        with pytest.raises(InvalidMetadataError, match=r"memory 'legacy' of the source.*NUL"):
            copy_store(source, target)
        assert target.counts("").total == 0
    finally:
        source.close()
        target.close()
