"""One bad text never blocks the rest; re-embedding is fresh; chunks embed alike in every mode;
``auto`` keeps an existing store's embedder. Real SQLite files and the real PostgreSQL server.

The embedders are the hashing embedder behind small switches (a text it rejects, a
version that changes its vectors), so the tests control exactly what fails.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.cli import main
from htm_core.errors import EmbeddingError
from htm_core.transfer import export_jsonl


class Picky:
    """Hashing vectors (64 dimensions); rejects any batch holding a text with ``POISON``
    while ``poisoned``; ``down`` makes every call fail (the server is gone)."""

    def __init__(self) -> None:
        self._inner = HashingEmbedder(dim=64)
        self.name = self._inner.name
        self.poisoned = True
        self.down = False
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.down:
            raise ConnectionError("connection refused")
        if self.poisoned and any("POISON" in t for t in texts):
            raise ValueError("input too long for the model")
        with self._lock:
            self.texts.extend(texts)
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._inner.embed_query(text)


def _vector(htm: HTM, key: str) -> np.ndarray | None:
    memory = htm.store.get(key, include_embedding=True)
    assert memory is not None
    return None if memory.embedding is None else np.asarray(memory.embedding)


def test_one_rejected_text_does_not_block_the_others(store_url: str, clock: Any) -> None:
    picky = Picky()
    items = [{"content": f"note {i} about the harbour", "key": f"n{i}"} for i in range(10)]
    items[3] = {"content": "POISON note about the harbour", "key": "bad"}
    with HTM(database_url=store_url, clock=clock, embedder=picky, background_embeddings=True,
             embed_batch_size=4) as htm:
        htm.add_many(items)
        htm.flush(timeout=60)  # returns: the bad one is marked, not pending
        s = htm.stats()
        assert (s.pending_embeddings, s.failed_embeddings) == (0, 1)  # memories, not attempts
        assert s.extra["embedding_failures"] == [
            {"key": "bad", "error": "ValueError: input too long for the model"}]
        assert all(_vector(htm, f"n{i}") is not None for i in range(10) if i != 3)
        assert _vector(htm, "bad") is None
        assert len(htm.recall("harbour", strategy="vector", limit=20)) == 9
    # The mark is in the store: another HTM sees it and its worker leaves the memory alone.
    again = Picky()
    with HTM(database_url=store_url, clock=clock, embedder=again,
             background_embeddings=True) as other:
        other.flush(timeout=60)
        assert other.stats().failed_embeddings == 1
        assert not any("POISON" in t for t in again.texts)
        again.poisoned = False  # the model was fixed: retry on demand
        assert other.retry_failed_embeddings() == 1
        other.flush(timeout=60)
        s = other.stats()
        assert (s.pending_embeddings, s.failed_embeddings) == (0, 0)
        assert _vector(other, "bad") is not None


def test_an_embedder_that_is_down_marks_nothing(store_url: str, clock: Any) -> None:
    picky = Picky()
    picky.down = True
    with HTM(database_url=store_url, clock=clock, embedder=picky) as htm:
        htm_bg = HTM(database_url=store_url, clock=clock, embedder=picky,
                     background_embeddings=True, robot="bg")
        try:
            htm_bg.add_many(["first while down", "second while down"])
            with pytest.raises(EmbeddingError, match="connection refused"):
                htm_bg.flush(timeout=30)
        finally:
            htm_bg.close()
        s = htm.stats()
        assert (s.pending_embeddings, s.failed_embeddings) == (2, 0)
        picky.down = False
        htm.flush()
        assert htm.stats().pending_embeddings == 0


def test_foreground_flush_and_reembed_skip_a_rejected_text(store_url: str, clock: Any) -> None:
    picky = Picky()
    with HTM(database_url=store_url, clock=clock, embedder=picky) as htm:
        htm.add_many(["fine one", "fine two"])
    picky.down = True  # a background run that never got to embed: two memories left pending
    with HTM(database_url=store_url, clock=clock, embedder=picky, background_embeddings=True,
             robot="bg") as htm:
        htm.add_many(["POISON text", "another fine one"])
    picky.down = False
    with HTM(database_url=store_url, clock=clock, embedder=picky) as htm:
        assert htm.stats().pending_embeddings == 2
        htm.flush()  # no error: the rejected text is marked, the other one embedded
        s = htm.stats()
        assert (s.pending_embeddings, s.failed_embeddings) == (0, 1)
        assert htm.reembed(progress=False, force=True) == 3
        assert htm.stats().failed_embeddings == 1


def test_reembed_force_computes_fresh_vectors(store_url: str, clock: Any) -> None:
    class Versioned(Picky):
        """A model updated behind an unchanged name: version 2 gives other vectors."""

        version = 1

        def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
            return super().embed_documents([f"v{self.version} {t}" for t in texts])

    model = Versioned()
    with HTM(database_url=store_url, clock=clock, embedder=model) as htm:
        htm.add_many([{"content": f"fact number {i}", "key": f"f{i}"} for i in range(4)])
        old = _vector(htm, "f0")
        model.version = 2
        model.texts.clear()
        assert htm.reembed(progress=False, force=True) == 4
        assert sorted(model.texts) == sorted(f"v2 fact number {i}" for i in range(4))
        new = _vector(htm, "f0")
        expected = np.asarray(HashingEmbedder(dim=64).embed_query("v2 fact number 0"))
        assert old is not None and new is not None
        assert np.allclose(new, expected, atol=1e-6) and not np.allclose(new, old, atol=1e-3)
        htm.add("fact number 0", key="again")  # the in-process cache holds no old vector
        assert np.allclose(_vector(htm, "again"), expected, atol=1e-6)  # type: ignore[arg-type]


DOC = "# Setup\n\nRun pip install.\n\n## Linux\n\nUse the package manager.\n"


def test_chunks_embed_the_same_text_in_every_mode(store_url: str, tmp_path: Path,
                                                  clock: Any) -> None:
    with HTM(database_url=str(tmp_path / "fg.db"), clock=clock, embedder="hashing:64") as fg:
        chunks = fg.add_document(DOC, source="guide.md", chunk_tokens=8)
        foreground = {m.key: _vector(fg, m.key) for m in chunks}
    assert len(foreground) >= 2
    with HTM(database_url=store_url, clock=clock, embedder="hashing:64",
             background_embeddings=True) as bg:
        bg.add_document(DOC, source="guide.md", chunk_tokens=8)
        bg.flush(timeout=60)
        background = {key: _vector(bg, key) for key in foreground}
        bg.reembed(progress=False, force=True)
        rebuilt = {key: _vector(bg, key) for key in foreground}
    for key, vector in foreground.items():
        assert vector is not None
        assert np.allclose(vector, background[key], atol=1e-6), key  # type: ignore[arg-type]
        assert np.allclose(vector, rebuilt[key], atol=1e-6), key  # type: ignore[arg-type]
    first = chunks[0]
    with_heading = f"{' > '.join(first.metadata['heading_path'])}\n\n{first.content}"
    assert with_heading.startswith("Setup\n\n")
    assert np.allclose(foreground[first.key],  # type: ignore[arg-type]
                       HashingEmbedder(dim=64).embed_query(with_heading), atol=1e-6)


def test_auto_keeps_the_store_embedder(store_url: str, clock: Any,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HTM_EMBEDDER", raising=False)
    with HTM(database_url=store_url, clock=clock, embedder="hashing:48") as htm:
        htm.add("made with a 48-dimensional hashing embedder", key="k")
    for spec in (None, "auto"):
        with HTM(database_url=store_url, clock=clock, embedder=spec) as htm:
            s = htm.stats()
            assert (s.embedder, s.embedding_dim) == ("hashing-v1-48", 48)
            assert "the store's embedder" in s.embedder_choice
            assert [h.memory.key for h in htm.recall("48-dimensional", strategy="vector",
                                                     limit=1)] == ["k"]


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_import_keeps_the_store_usable_and_retries_failures(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    monkeypatch.delenv("HTM_EMBEDDER", raising=False)
    with HTM(database_url=str(tmp_path / "src.db"), embedder="hashing:48") as htm:
        htm.add_many([f"exported fact {i}" for i in range(3)])
        export_jsonl(htm.store, tmp_path / "out.jsonl", with_embeddings=True)
    # Into an empty store, with no embedder asked for: the file's own, and later commands agree.
    db = str(tmp_path / "new.db")
    assert _cli("--db", db, "import", str(tmp_path / "out.jsonl"))[0] == 0
    code, out, err = _cli("--db", db, "stats")
    assert code == 0, err
    assert "hashing-v1-48" in out and re.search(r"failed embeddings +0\n", out)
    # An embedder asked for that differs from the file's: refused, then --reembed.
    other = str(tmp_path / "other.db")
    code, _, err = _cli("--db", other, "--embedder", "hashing:32", "import",
                        str(tmp_path / "out.jsonl"))
    assert code == 1 and "--reembed" in err and "'hashing-v1-48'" in err
    code, out, err = _cli("--db", other, "--embedder", "hashing:32", "import",
                          str(tmp_path / "out.jsonl"), "--reembed")
    assert code == 0, err
    assert "3 embedded" in out
    assert _cli("--db", other, "--embedder", "hashing:32", "stats")[0] == 0
    # A failure shows in `htm stats` and `htm reembed --retry-failed` retries it.
    picky = Picky()
    with HTM(database_url=str(tmp_path / "p.db"), embedder=picky, background_embeddings=True) as h:
        h.add_many(["POISON pill", "a fine text"])
        h.flush(timeout=60)
    code, out, _ = _cli("--db", str(tmp_path / "p.db"), "--embedder", "hashing:64", "stats")
    assert code == 0 and re.search(r"failed embeddings +1 \(retry with", out)
    assert "input too long" in out
    code, out, err = _cli("--db", str(tmp_path / "p.db"), "--embedder", "hashing:64", "reembed",
                          "--retry-failed")
    assert code == 0, err
    assert "retried 1" in out and "0 still failing" in out


def test_a_chunk_vector_is_never_reused_for_other_text(store_url: str, clock: Any) -> None:
    """A chunk's vector is of its heading path and text; a plain memory with the chunk's
    text, and the same text as a chunk under another heading, get vectors of their own."""
    hashing = HashingEmbedder(dim=64)
    text = "Run pip install now.\n"
    with HTM(database_url=store_url, clock=clock, embedder="hashing:64") as htm:
        chunks = htm.add_document(f"# Setup\n\nFirst paragraph here.\n\n{text}", source="a.md",
                                  chunk_tokens=6)
        assert chunks[-1].content == text
    with HTM(database_url=store_url, clock=clock, embedder="hashing:64") as htm:
        plain = htm.add(text, key="plain")
        assert np.allclose(_vector(htm, plain.key), hashing.embed_query(text),  # type: ignore[arg-type]
                           atol=1e-6)
        other = htm.add_document(f"# Deploy\n\nOther words first.\n\n{text}", source="b.md",
                                 chunk_tokens=6)[-1]
        assert other.content == text
        assert np.allclose(_vector(htm, other.key),  # type: ignore[arg-type]
                           hashing.embed_query(f"Deploy\n\n{text}"), atol=1e-6)
