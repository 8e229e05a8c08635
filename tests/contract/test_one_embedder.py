"""A store never holds two models' vectors, on every backend.

Every vector write (``add_many``, ``set_embeddings``, an ``HTM`` in another process, import,
copy) is checked against the embedder recorded in the store's meta, inside the store's
write transaction; models of the same dimension are told apart by name. Also: the
schema-v2 upgrade of a version-1 store (the table of failed embeddings).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from htm_core import HTM, HashingEmbedder
from htm_core.errors import EmbedderMismatchError
from htm_core.store import NewMemory, open_store
from htm_core.transfer import copy_store, export_jsonl, import_jsonl

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)


class Renamed:
    """The hashing embedder (64 dimensions) under another model's name: same dimension,
    different model, exactly what a dimension check alone lets through."""

    def __init__(self, name: str = "other-model-64") -> None:
        self._inner = HashingEmbedder(dim=64)
        self.name = name

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._inner.embed_query(text)


def _rec(key: str, embedder: Any) -> NewMemory:
    return NewMemory(key=key, content=f"content of {key}", robot="r1", importance=1.0,
                     token_count=3, created_at=T0,
                     embedding=embedder.embed_query(f"content of {key}"),
                     embedder=embedder.name, explicit_key=True)


def test_store_refuses_vectors_of_another_embedder_of_the_same_dimension(store_url: str) -> None:
    store = open_store(store_url)
    try:
        store.add_many([_rec("first", HashingEmbedder(dim=64))])
        with pytest.raises(EmbedderMismatchError, match="other-model-64") as info:
            store.add_many([_rec("second", Renamed())])
        assert "htm import --reembed" in str(info.value) and "reembed()" in str(info.value)
        assert store.get("second") is None
        plain = store.add_many([NewMemory(key="novec", content="no vector yet", robot="r1",
                                          importance=1.0, token_count=3, created_at=T0)])
        with pytest.raises(EmbedderMismatchError, match="hashing-v1-64"):
            store.set_embeddings([(plain[0].memory.id, Renamed().embed_query("x"))],
                                 "other-model-64")
        assert store.get("novec", include_embedding=True).embedding is None  # type: ignore[union-attr]
        with pytest.raises(EmbedderMismatchError, match="several embedders"):
            store.add_many([_rec("a", HashingEmbedder(dim=64)), _rec("b", Renamed())])
        assert store.get("a") is None
    finally:
        store.close()


def test_two_htms_opened_before_any_vector_cannot_mix_models(store_url: str) -> None:
    """Both open an empty store (nothing to check yet); the first write fixes the embedder,
    the other's write is refused by the store itself."""
    first = HTM(database_url=store_url, embedder=HashingEmbedder(dim=64), robot="a")
    second = HTM(database_url=store_url, embedder=Renamed(), robot="b")
    try:
        first.add("the first model's vector", key="one")
        with pytest.raises(EmbedderMismatchError, match="reembed"):
            second.add("the second model's vector", key="two")
        assert first.retrieve("two") is None
        assert first.stats().long_term_total == 1
    finally:
        first.close()
        second.close()


def test_another_process_with_another_model_is_refused(store_url: str) -> None:
    with HTM(database_url=store_url, embedder="hashing:64") as htm:
        htm.add("written by the first model", key="one")
    script = textwrap.dedent(f"""
        import sys
        from htm_core import HashingEmbedder
        from htm_core.errors import EmbedderMismatchError
        from htm_core.store import NewMemory, open_store
        from datetime import datetime, timezone
        e = HashingEmbedder(dim=64)
        store = open_store({store_url!r})
        rec = NewMemory(key="two", content="from another process", robot="p",
                        importance=1.0, token_count=3, created_at=datetime.now(timezone.utc),
                        embedding=e.embed_query("x"), embedder="other-model-64")
        try:
            store.add_many([rec])
        except EmbedderMismatchError as exc:
            print("refused:", exc)
            sys.exit(3)
        sys.exit(0)
    """)
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env={**_env(), "PYTHONPATH": str(ROOT)})
    assert run.returncode == 3, run.stderr
    assert "hashing-v1-64" in run.stdout
    with HTM(database_url=store_url, embedder="hashing:64") as htm:
        assert htm.retrieve("two") is None


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_import_refuses_another_models_vectors_and_reembed_works(store_url: str,
                                                                 tmp_path: Path) -> None:
    source = str(tmp_path / "source.db")
    with HTM(database_url=source, embedder=Renamed()) as htm:
        htm.add_many([f"exported memory {i}" for i in range(5)])
        export_jsonl(htm.store, tmp_path / "out.jsonl", with_embeddings=True)
    target = open_store(store_url)
    try:
        target.add_many([_rec("resident", HashingEmbedder(dim=64))])
        with pytest.raises(EmbedderMismatchError, match="--reembed") as info:
            import_jsonl(target, tmp_path / "out.jsonl")
        assert "'other-model-64'" in str(info.value) and "'hashing-v1-64'" in str(info.value)
        assert target.counts("r1").total == 1  # nothing was written
        with pytest.raises(EmbedderMismatchError):
            import_jsonl(target, tmp_path / "out.jsonl", embedder=Renamed())
        result = import_jsonl(target, tmp_path / "out.jsonl", embedder=HashingEmbedder(dim=64),
                              reembed=True)
        assert (result.written, result.embedded) == (5, 5)
        assert target.embedding_info() == ("hashing-v1-64", 64)
        assert target.counts("r1").missing_embeddings == 0
        assert {m.embedder for batch in target.iter_memories() for m in batch} == {"hashing-v1-64"}
    finally:
        target.close()


def test_copy_refuses_a_target_of_another_model(store_url: str, tmp_path: Path) -> None:
    source = str(tmp_path / "source.db")
    with HTM(database_url=source, embedder=Renamed()) as htm:
        htm.add("a memory of the other model", key="src")
    target = open_store(store_url)
    src = open_store(source)
    try:
        target.add_many([_rec("resident", HashingEmbedder(dim=64))])
        with pytest.raises(EmbedderMismatchError, match="htm import --reembed"):
            copy_store(src, target)
        assert target.get("src") is None
    finally:
        src.close()
        target.close()


# -- the version-2 upgrade -------------------------------------------------------------------


def _make_v1(url: str) -> None:
    """A store exactly as htm with schema version 1 left it, holding one memory."""
    if url.startswith("postgresql"):
        from htm_core.store import postgres as backend
        from htm_core.store.postgres import postgres_url

        engine = create_engine(postgres_url(url))
        now = "now()"
    else:
        from htm_core.store import sqlite as backend

        engine = create_engine(f"sqlite:///{url}")
        now = "0"
    with engine.begin() as conn:
        if url.startswith("postgresql"):
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
        for statement in backend._SCHEMA_V1:
            conn.exec_driver_sql(statement)
        conn.execute(text("INSERT INTO htm_meta(key, value) VALUES ('schema_version', '1')"))
        conn.execute(text(f"INSERT INTO robots(name, created_at) VALUES ('old', {now})"))
        conn.execute(text(
            "INSERT INTO memories(key, content, content_hash, robot_id, token_count, "
            "created_at, last_accessed) SELECT 'kept', 'from version one', "
            f"'6acc924f43453cef79a654d6484a115ea19523b6e5796a8540050c3d633bf2e2', id, 3, "
            f"{now}, {now} FROM robots WHERE name = 'old'"))
    engine.dispose()


@pytest.mark.empty_database
def test_a_version_1_store_is_upgraded_and_keeps_its_memories(store_url: str) -> None:
    _make_v1(store_url)
    with HTM(database_url=store_url, embedder="hashing:64", robot="new") as htm:
        assert htm.store.schema_version() >= 2
        assert htm.retrieve("kept").content == "from version one"  # type: ignore[union-attr]
        s = htm.stats()
        assert (s.pending_embeddings, s.failed_embeddings) == (1, 0)
        htm.flush()
        assert htm.stats().pending_embeddings == 0
