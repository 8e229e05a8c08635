"""The embedding cache (vectors found by content hash and embedder) on every backend, and
the schema-5 upgrade, which put SQLite's cache index on a 64-bit prefix of the hash.

The meaning is the same before and after, on both backends: a stored vector is reused
for exactly the same content (the whole hash) by the same embedder.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from sqlalchemy import create_engine, text

from htm_core import HTM, HashingEmbedder
from htm_core.store import SCHEMA_VERSION, NewMemory, open_store
from htm_core.store.base import content_hash

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
EMBEDDER = HashingEmbedder(dim=64)


class Counting:
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.name = EMBEDDER.name
        self.texts: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return EMBEDDER.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return EMBEDDER.embed_query(text)


def _records(n: int) -> list[NewMemory]:
    return [NewMemory(key=f"k{i}", content=f"memory number {i} about the garden", robot="r1",
                      importance=1.0, token_count=6, created_at=T0,
                      embedding=EMBEDDER.embed_query(f"memory number {i} about the garden"),
                      embedder=EMBEDDER.name, explicit_key=True) for i in range(n)]


def _engine(url: str):  # type: ignore[no-untyped-def]
    if url.startswith("postgresql"):
        from htm_core.store.postgres import postgres_url

        return create_engine(postgres_url(url))
    return create_engine(f"sqlite:///{url}")


def _downgrade_to_v4(url: str) -> None:
    """The store as schema version 4 left it (SQLite: the index on the whole hash)."""
    engine = _engine(url)
    with engine.begin() as conn:
        if not url.startswith("postgresql"):
            conn.exec_driver_sql("DROP INDEX memories_hash")
            conn.exec_driver_sql("CREATE INDEX memories_hash ON memories(content_hash, embedder)")
        conn.execute(text("UPDATE htm_meta SET value = '4' WHERE key = 'schema_version'"))
    engine.dispose()


def _hash_index_sql(url: str) -> str:
    engine = _engine(url)
    with engine.connect() as conn:
        sql = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'memories_hash'")
                           ).scalar_one()
    engine.dispose()
    return str(sql)


def test_a_version_4_store_is_upgraded_and_its_cached_vectors_are_found(store_url: str) -> None:
    records = _records(30)
    store = open_store(store_url)
    try:
        store.add_many(records)
    finally:
        store.close()
    _downgrade_to_v4(store_url)
    store = open_store(store_url)
    try:
        assert store.schema_version() == SCHEMA_VERSION >= 5
        assert 5 in {op.detail["to"] for op in store.operations(op="migrate")}
        hashes = [r.content_hash for r in records]
        found = store.find_embeddings([*hashes, content_hash("never stored")], EMBEDDER.name)
        assert set(found) == set(hashes)
        for r in records:
            assert np.allclose(found[r.content_hash], r.embedding, atol=1e-6)
        assert store.find_embeddings(hashes, "another-model") == {}
    finally:
        store.close()
    if not store_url.startswith("postgresql"):
        assert "substr(content_hash, 1, 16)" in _hash_index_sql(store_url)
    # A new HTM (empty in-process cache) reuses the stored vector for the same content.
    embedder = Counting()
    with HTM(database_url=store_url, embedder=embedder, robot="r2") as htm:
        htm.add_many([{"content": records[3].content, "key": "again"},
                      {"content": "a text never stored", "key": "new"}])
    assert embedder.texts == ["a text never stored"]


def test_a_cached_vector_needs_the_whole_hash_to_match(store_url: str) -> None:
    """Two hashes sharing the indexed prefix are still two contents."""
    records = _records(2)
    store = open_store(store_url)
    try:
        store.add_many(records)
        real = records[0].content_hash
        twin = real[:16] + ("0" if real[16] != "0" else "1") + real[17:]
        engine = _engine(store_url)
        with engine.begin() as conn:  # the second memory's hash now shares the first's prefix
            conn.execute(text("UPDATE memories SET content_hash = :h WHERE key = 'k1'"),
                         {"h": twin})
        engine.dispose()
        found = store.find_embeddings([real], EMBEDDER.name)
        assert list(found) == [real]
        assert np.allclose(found[real], records[0].embedding, atol=1e-6)
        assert np.allclose(store.find_embeddings([twin], EMBEDDER.name)[twin],
                           records[1].embedding, atol=1e-6)
        lone = real[:16] + "f" * 48
        if lone not in (real, twin):
            assert store.find_embeddings([lone], EMBEDDER.name) == {}
    finally:
        store.close()


def test_sqlite_finds_cached_vectors_through_the_prefix_index(tmp_path: Path) -> None:
    from htm_core.store.sqlite.rows import _FIND_EMBEDDINGS

    store = open_store(str(tmp_path / "plan.db"))
    try:
        with store.reads.cursor() as cur:  # type: ignore[attr-defined]
            plan = " ".join(str(row[-1]) for row in cur.execute(
                "EXPLAIN QUERY PLAN " + _FIND_EMBEDDINGS, ('["ab"]', EMBEDDER.name)))
    finally:
        store.close()
    assert "USING INDEX memories_hash" in plan and "SCAN memories" not in plan
