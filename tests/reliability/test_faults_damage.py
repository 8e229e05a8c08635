"""Damage is never served as good: reads and exports check what they hand out.

A flipped bit in a memory's text (a real byte of the SQLite file changed) used to be
returned by ``get`` and copied into a fresh backup under a valid checksum of its own; a key
index that lost entries (its root page pointed at a copy built over 72 of the 82 rows: the
damage ``PRAGMA integrity_check`` reports as "row missing from index") made ``get(key)``
return None for 10 existing memories. Each case runs on a real file.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from htm_core import HTM, HashingEmbedder
from htm_core.errors import DatabaseCorruptError
from htm_core.store import open_store
from htm_core.transfer import export_jsonl

N = 82


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("pristine") / "htm.db"
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        htm.add_many([{"content": f"memory {i} about cats and dogs", "key": f"k{i}"}
                      for i in range(N)])
    return db


@pytest.fixture
def db(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "htm.db"
    shutil.copy(pristine, copy)
    return copy


def _flip_a_bit_of(db: Path, text: bytes) -> None:
    data = bytearray(db.read_bytes())
    at = data.find(text)
    assert at > 0
    data[at + len(text) - 1] ^= 0x01
    db.write_bytes(bytes(data))


def _lose_key_index_entries(db: Path) -> None:
    """Point the key index's root at an index over 72 of the rows (every 8th id left out)."""
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE UNIQUE INDEX partial_keys ON memories(key) WHERE id % 8 != 0")
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'partial_keys'"
                            ).fetchone()[0]
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET rootpage = ? "
                     "WHERE name = 'sqlite_autoindex_memories_1'", (root,))
        conn.execute("DELETE FROM sqlite_master WHERE name = 'partial_keys'")
        conn.commit()
    finally:
        conn.close()
    with sqlite3.connect(db) as conn:
        assert any("missing from index" in r[0]
                   for r in conn.execute("PRAGMA integrity_check").fetchall())


def test_a_damaged_text_is_refused_by_get_and_recall(db: Path) -> None:
    _flip_a_bit_of(db, b"memory 17 about cats")
    store = open_store(db)
    try:
        with pytest.raises(DatabaseCorruptError, match="htm check") as caught:
            store.get("k17")
        assert "'k17'" in str(caught.value)
        assert store.get("k16").content == "memory 16 about cats and dogs"  # type: ignore[union-attr]
    finally:
        store.close()
    # Its working memory holds k17: the facade refuses to load it rather than serve it.
    with pytest.raises(DatabaseCorruptError, match="k17"), \
            HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        htm.recall("memory 17 about cats", limit=5, strategy="fulltext")
    with HTM(database_url=str(db), embedder=HashingEmbedder(), robot="other") as htm, \
            pytest.raises(DatabaseCorruptError, match="k17"):
        htm.recall("memory 17 about cats", limit=5, strategy="fulltext")


def test_a_text_damaged_after_it_was_read_is_refused_by_the_open_store(db: Path) -> None:
    """Text changed behind an open store's back after a read that passed, or a damaged
    checksum beside sound text, is refused on the next read by the same store."""
    store = open_store(db)
    try:
        assert store.get("k17").content == "memory 17 about cats and dogs"  # type: ignore[union-attr]
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE memories SET content = 'memory 17 about bats and dogs' "
                         "WHERE key = 'k17'")
        with pytest.raises(DatabaseCorruptError, match="'k17'"):
            store.get("k17")
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE memories SET content = 'memory 17 about cats and dogs', "
                         "content_crc = content_crc + 1 WHERE key = 'k17'")
        with pytest.raises(DatabaseCorruptError, match="'k17'"):
            store.get("k17")
    finally:
        store.close()


def test_a_damaged_text_never_reaches_a_backup(db: Path, tmp_path: Path) -> None:
    backup = tmp_path / "backup.jsonl"
    store = open_store(db)
    try:
        assert export_jsonl(store, backup) == N
    finally:
        store.close()
    good = backup.read_bytes()
    _flip_a_bit_of(db, b"memory 17 about cats")
    store = open_store(db)
    try:
        with pytest.raises(DatabaseCorruptError, match="k17"):
            export_jsonl(store, backup)
    finally:
        store.close()
    assert backup.read_bytes() == good  # the earlier backup stays as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.jsonl", "htm.db"]


def test_text_changed_behind_htms_back_is_not_exported_from_postgres(
        pg_url: str, tmp_path: Path) -> None:
    with HTM(database_url=pg_url, embedder=HashingEmbedder()) as htm:
        htm.add_many([{"content": f"memory {i}", "key": f"k{i}"} for i in range(20)])
    admin = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("UPDATE memories SET content = 'memory 99' WHERE key = 'k9'")
    store = open_store(pg_url)
    try:
        with pytest.raises(DatabaseCorruptError, match="'k9'"):
            export_jsonl(store, tmp_path / "backup.jsonl")
    finally:
        store.close()
    assert not (tmp_path / "backup.jsonl").exists()


def test_text_changed_behind_htms_back_is_refused_by_get_and_recall_on_postgres(
        pg_url: str) -> None:
    """PostgreSQL checks what it serves as SQLite does: a text that no longer matches its
    stored checksum is a ``DatabaseCorruptError`` naming the key, never a memory."""
    with HTM(database_url=pg_url, embedder=HashingEmbedder()) as htm:
        htm.add_many([{"content": f"memory {i}", "key": f"k{i}"} for i in range(20)])
    admin = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("UPDATE memories SET content = 'memory 99' WHERE key = 'k9'")
    with HTM(robot="reader", database_url=pg_url, embedder=HashingEmbedder()) as htm:
        assert htm.get("k8") is not None
        with pytest.raises(DatabaseCorruptError, match=r"'k9'.*htm check"):
            htm.get("k9")
        with pytest.raises(DatabaseCorruptError, match="'k9'"):
            htm.recall("memory 99", strategy="fulltext")


def test_a_key_index_that_lost_entries_is_never_read_as_absence(db: Path) -> None:
    _lose_key_index_entries(db)
    store = open_store(db)
    try:
        outcomes = {}
        for i in range(N):
            try:
                outcomes[i] = "found" if store.get(f"k{i}") is not None else "none"
            except DatabaseCorruptError as exc:
                assert "htm check" in str(exc) and "72 of its 82" in str(exc)
                outcomes[i] = "error"
        assert "none" not in outcomes.values(), outcomes
        assert sorted(i for i, o in outcomes.items() if o == "error") == [
            i for i in range(N) if (i + 1) % 8 == 0]
        with pytest.raises(DatabaseCorruptError):  # a true miss is no longer trusted either
            store.get("never-stored")
    finally:
        store.close()


def test_an_add_through_a_key_index_that_lost_entries_writes_no_second_memory(db: Path) -> None:
    """k7 is one of the memories the damaged index lost: adding k7 again (another text) must
    not write a second memory under its key, and nothing of the batch is written."""
    _lose_key_index_entries(db)
    with HTM(database_url=str(db), embedder=HashingEmbedder(), robot="other") as htm, \
            pytest.raises(DatabaseCorruptError, match="72 of its 82"):
        htm.add_many([{"content": "a new note", "key": "fresh"},
                      {"content": "another text for k7", "key": "k7"}])
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT key, count(*) FROM memories NOT INDEXED "
                            "WHERE key IN ('k7', 'fresh') GROUP BY key").fetchall()
        total = conn.execute("SELECT count(*) FROM memories NOT INDEXED").fetchone()[0]
    assert rows == [("k7", 1)] and total == N


def test_a_sound_key_index_keeps_misses_as_none(db: Path) -> None:
    store = open_store(db)
    try:
        assert store.get("never-stored") is None
        assert store.get("k5") is not None
        assert store.get("also-never-stored") is None
    finally:
        store.close()


def test_the_export_is_unchanged_for_a_sound_store(db: Path, tmp_path: Path) -> None:
    store = open_store(db)
    try:
        assert export_jsonl(store, tmp_path / "b.jsonl") == N
    finally:
        store.close()
    lines = (tmp_path / "b.jsonl").read_text().splitlines()
    assert len(lines) == N + 2 and json.loads(lines[1])["key"] == "k0"
