"""Bad-input matrix: every public entry point of ``HTM`` and of each adapter, fed hostile input.

Each case either raises one specific :class:`~htm_core.errors.HTMError` subclass and leaves
the store exactly as it was (memory rows and their contents, forgotten flags, tags, the
operations log, the working-memory keys in this process and as persisted), or, when the
input is valid (SQL/FTS-hostile text, odd but legal keys and tags, ``limit`` at its
maximum), works and does what it should.

Decided here (and documented in docs/reliability.md): content larger than
``MAX_CONTENT_BYTES`` (256 KiB of UTF-8, so a 10 MB text) is refused with
``InvalidContentError`` on every backend; content just under the limit is stored and found.

The matrix runs on every backend in the conftest's ``BACKENDS`` (SQLite and PostgreSQL); on
PostgreSQL one database serves the module and is emptied before each case. The embedder is
a real ``HashingEmbedder`` wrapped so that particular trigger words make it misbehave (wrong
dimension, NaN, too few vectors, an exception): the misbehaving embedder the issue asks
for, not a mock of htm.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.base import InvalidNamespaceError
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from htm_core import HTM, HashingEmbedder
from htm_core.errors import (
    ConfirmationRequiredError,
    DimensionMismatchError,
    DuplicateKeyError,
    EmbedderMismatchError,
    EmbeddingError,
    InvalidBudgetError,
    InvalidContentError,
    InvalidImportanceError,
    InvalidKeyError,
    InvalidTagError,
    NotFoundError,
    TimeframeError,
    UnknownPolicyError,
    UnknownStrategyError,
    UnsupportedFilterError,
    ValidationError,
)
from htm_core.testing import working_memories
from htm_core.validation import MAX_CONTENT_BYTES
from htm_integrations.langchain import (
    HTMChatMessageHistory,
    HTMMemory,
    HTMRetriever,
    HTMStore,
)
from htm_integrations.llama_index import HTMMemory as LlamaMemory
from htm_integrations.llama_index import HTMVectorStore
from tests.conftest import BACKENDS

HOSTILE = ["'; DROP TABLE memories; --", '"', 'say "hello', "NEAR(", "a NEAR(b c)", "*", "foo*",
           "\\", "back\\slash\\", "AND OR NOT", "col:umn", "^", "(((", "%_%", "$1 ? :x",
           "memories WHERE 1=1 OR ''='"]
SEED = "the seed memory about harbour lanterns"


@pytest.fixture(scope="module")
def matrix_database(postgres_server_url: str) -> Iterator[str]:
    """One PostgreSQL database for the module; each test empties it (creating one per case
    would make this matrix of hundreds of cases take minutes)."""
    from tests.pg import fresh_database

    yield from fresh_database(postgres_server_url)


def empty_postgres(url: str) -> None:
    """Remove every row htm wrote, keeping the schema and its embedder record."""
    import psycopg

    plain = url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(plain, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename <> 'htm_meta'")]
        if tables:
            conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables)
                         + " RESTART IDENTITY CASCADE")


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each backend of the conftest's BACKENDS; empty for each test."""
    if request.param == "sqlite":
        return str(tmp_path / "htm.db")
    url: str = request.getfixturevalue("matrix_database")
    empty_postgres(url)
    return url


class ScriptedEmbedder:
    """A real ``HashingEmbedder`` that misbehaves on trigger words (the bad embedder)."""

    name = "scripted-hashing-64"

    def __init__(self) -> None:
        self._inner = HashingEmbedder(dim=64)

    def _vector(self, text: str) -> list[float]:
        vector = self._inner.embed_query(text)
        if "EMBED_WRONG_DIM" in text:
            return vector[:-1]
        if "EMBED_NAN" in text:
            return [math.nan, *vector[1:]]
        if "EMBED_INF" in text:
            return [math.inf, *vector[1:]]
        if "EMBED_EMPTY" in text:
            return []
        if "EMBED_RAISE" in text:
            raise RuntimeError("embedding service answered 503")
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = [self._vector(t) for t in texts]
        if any("EMBED_FEWER" in t for t in texts):
            vectors.pop()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


@dataclass
class Env:
    """The HTM under test with a seeded store, and its adapters (built on demand)."""

    htm: HTM
    url: str
    extra: dict[str, Any] = field(default_factory=dict)

    def open(self, **kwargs: Any) -> HTM:
        """Another HTM on the same store (closed at once if it opens)."""
        kwargs.setdefault("embedder", ScriptedEmbedder())
        HTM(database_url=self.url, **kwargs).close()
        return self.htm

    @property
    def history(self) -> HTMChatMessageHistory:
        return self.extra.setdefault("history", HTMChatMessageHistory(htm=self.htm, session_id="s1"))

    @property
    def lc_memory(self) -> HTMMemory:
        return self.extra.setdefault("lc_memory", HTMMemory(htm=self.htm))

    @property
    def lg_store(self) -> HTMStore:
        return self.extra.setdefault("lg_store", HTMStore(htm=self.htm, fields=["text"]))

    @property
    def li_memory(self) -> LlamaMemory:
        return self.extra.setdefault("li_memory", LlamaMemory.from_defaults(htm=self.htm))

    @property
    def li_store(self) -> HTMVectorStore:
        return self.extra.setdefault("li_store", HTMVectorStore(htm=self.htm))


def snapshot(htm: HTM) -> dict[str, Any]:
    """Everything a failed call must leave untouched."""
    memories = [m for batch in htm.store.iter_memories(include_forgotten=True) for m in batch]
    return {
        "memories": sorted((m.key, m.content, m.importance, m.tags, m.forgotten_at is None,
                            m.embedding is not None) for m in memories),
        "counts": htm.store.counts(htm.robot),
        "operations": len(htm.operations(limit=10_000)),
        "tags": htm.tags(),
        "working": sorted(htm.working_memory.keys()),
        "persisted_working": sorted(m.key for m in working_memories(htm.store, htm.robot)),
    }


def unique_words(n_bytes: int, seed: int = 7) -> str:
    """ASCII text of about ``n_bytes`` made of distinct random words (a worst case for FTS)."""
    rnd = random.Random(seed)
    words: list[str] = []
    size = 0
    while size < n_bytes - 12:
        word = "".join(rnd.choice(string.ascii_lowercase) for _ in range(rnd.randint(4, 10)))
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def arun(coro: Any) -> Any:
    return asyncio.run(coro)


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[Env], Any]
    error: type[Exception] | None = None
    check: Callable[[Env, Any], None] | None = None


def _case(id: str, call: Callable[[Env], Any], error: type[Exception]) -> Any:
    return pytest.param(Case(id, call, error), id=id)



def _works(id: str, call: Callable[[Env], Any], check: Callable[[Env, Any], None]) -> Any:
    return pytest.param(Case(id, call, None, check), id=id)


# -- checks for the valid cases --------------------------------------------------------------


def stored_and_found(text: str) -> Callable[[Env, Any], None]:
    def check(env: Env, memory: Any) -> None:
        got = env.htm.retrieve(memory.key)
        assert got is not None and got.content == text
        hits = env.htm.recall(text, strategy="fulltext", limit=10_000)
        if any(ch.isalnum() for ch in text):
            assert memory.key in [h.memory.key for h in hits]
        assert env.htm.retrieve("seed") is not None  # the tables are all still there
    return check


def hostile_query_ok(env: Env, hits: Any) -> None:
    assert isinstance(hits, list)
    assert env.htm.store.counts(env.htm.robot).total == 2  # seed and collide (gone is forgotten)


def returns_none(env: Env, result: Any) -> None:
    assert result is None


# -- the matrix ------------------------------------------------------------------------------

BIG = "x" * (10 * 1024 * 1024)

HTM_CASES = [
    # the constructor: a rejected configuration writes nothing (not even a robot row)
    _case("init-robot-long", lambda e: e.open(robot="r" * 256), InvalidKeyError),
    _case("init-robot-nul", lambda e: e.open(robot="a\x00b"), InvalidKeyError),
    _case("init-wm-tokens-0", lambda e: e.open(robot="x", working_memory_tokens=0), InvalidBudgetError),
    _case("init-wm-tokens-negative", lambda e: e.open(robot="x", working_memory_tokens=-5),
          InvalidBudgetError),
    _case("init-eviction", lambda e: e.open(robot="x", eviction="random"), UnknownPolicyError),
    _case("init-batch-size", lambda e: e.open(robot="x", embed_batch_size=0), InvalidBudgetError),
    _case("init-margin", lambda e: e.open(robot="x", context_margin=1.5), InvalidBudgetError),
    _case("init-margin-nan", lambda e: e.open(robot="x", context_margin=math.nan), InvalidBudgetError),
    _case("init-embedder-name", lambda e: e.open(robot="x", embedder="psychic"), EmbeddingError),
    _case("init-url-scheme", lambda e: HTM(database_url="mysql://htm@localhost/htm",
                                           embedder=ScriptedEmbedder()), ValidationError),
    _case("init-other-embedder", lambda e: e.open(robot="x", embedder=HashingEmbedder(dim=64)),
          EmbedderMismatchError),
    # add: content
    _case("add-empty", lambda e: e.htm.add(""), InvalidContentError),
    _case("add-whitespace", lambda e: e.htm.add(" \t\n "), InvalidContentError),
    _case("add-not-str", lambda e: e.htm.add(b"bytes"), InvalidContentError),  # type: ignore[arg-type]
    _case("add-none", lambda e: e.htm.add(None), InvalidContentError),  # type: ignore[arg-type]
    _case("add-nul", lambda e: e.htm.add("before\x00after"), InvalidContentError),
    _case("add-surrogate", lambda e: e.htm.add("broken \ud800 text"), InvalidContentError),
    _case("add-lone-low-surrogate", lambda e: e.htm.add("\udfff"), InvalidContentError),
    _case("add-10MB", lambda e: e.htm.add(BIG), InvalidContentError),
    _case("add-10MB-multibyte", lambda e: e.htm.add("é" * (MAX_CONTENT_BYTES // 2 + 1)),
          InvalidContentError),
    _works("add-256KiB-unique-words", lambda e: e.htm.add(unique_words(MAX_CONTENT_BYTES)),
           lambda e, m: (stored_and_found(m.content)(e, m), None)[1]),
    # add: importance
    *[_case(f"add-importance-{name}", (lambda v: lambda e: e.htm.add("x", importance=v))(value),
            InvalidImportanceError)
      for name, value in [("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf),
                          ("negative", -0.01), ("11", 11), ("str", "5"), ("bool", True),
                          ("none-list", [5])]],
    _works("add-importance-0-and-10",
           lambda e: e.htm.add_many([{"content": "zero", "importance": 0},
                                     {"content": "ten", "importance": 10}]),
           lambda e, ms: (None if [m.importance for m in ms] == [0.0, 10.0]
                          else pytest.fail(f"{ms}"))),
    # add: keys
    _case("add-key-empty", lambda e: e.htm.add("x", key=""), InvalidKeyError),
    _case("add-key-blank", lambda e: e.htm.add("x", key="   "), InvalidKeyError),
    _case("add-key-256", lambda e: e.htm.add("x", key="k" * 256), InvalidKeyError),
    _case("add-key-1MB", lambda e: e.htm.add("x", key="k" * 1_000_000), InvalidKeyError),
    _case("add-key-nul", lambda e: e.htm.add("x", key="a\x00b"), InvalidKeyError),
    _case("add-key-surrogate", lambda e: e.htm.add("x", key="a\ud800"), InvalidKeyError),
    _case("add-key-int", lambda e: e.htm.add("x", key=5), InvalidKeyError),  # type: ignore[arg-type]
    _case("add-key-collides", lambda e: e.htm.add("different content", key="seed"),
          DuplicateKeyError),
    _case("add-key-collides-forgotten", lambda e: e.htm.add("other", key="gone"), DuplicateKeyError),
    _works("add-key-255", lambda e: e.htm.add("long key", key="k" * 255),
           lambda e, m: None if e.htm.retrieve("k" * 255).content == "long key" else pytest.fail()),
    _works("add-key-same-content", lambda e: e.htm.add(SEED, key="seed"),
           lambda e, m: None if e.htm.store.counts(e.htm.robot).total == 2 else pytest.fail()),
    *[_works(f"add-key-hostile-{i}", (lambda q: lambda e: e.htm.add("hostile key", key=q))(s),
             (lambda q: lambda e, m: None if e.htm.retrieve(q).key == q else pytest.fail())(s))
      for i, s in enumerate(HOSTILE)],
    # add: tags, metadata, created_at
    *[_case(f"add-tag-{name}", (lambda t: lambda e: e.htm.add("x", tags=[t]))(tag), InvalidTagError)
      for name, tag in [("space", "user prefs"), ("empty", ""), ("double-colon", "a::b"),
                        ("trailing-colon", "a:"), ("sql", "'; DROP TABLE tags; --"),
                        ("percent", "a%"), ("star", "a*"), ("backslash", "a\\b"),
                        ("nul", "a\x00"), ("long", "t" * 256), ("int", 5)]],
    _works("add-tag-odd-but-legal", lambda e: e.htm.add("tagged", tags=["ÿ:日本:a-b.c_d", "A:B"]),
           lambda e, m: None if set(m.tags) == {"ÿ:日本:a-b.c_d", "A:B"} else pytest.fail(f"{m.tags}")),
    _case("add-metadata-nan", lambda e: e.htm.add("x", metadata={"v": math.nan}), ValidationError),
    _case("add-metadata-object", lambda e: e.htm.add("x", metadata={"v": object()}), ValidationError),
    _case("add-metadata-list", lambda e: e.htm.add("x", metadata=[1]), ValidationError),  # type: ignore[arg-type]
    _case("add-created-at-str", lambda e: e.htm.add("x", created_at="yesterday"), ValidationError),  # type: ignore[arg-type]
    *[_works(f"add-hostile-{i}", (lambda q: lambda e: e.htm.add(f"note {q} end"))(s),
             (lambda s: stored_and_found(f"note {s} end"))(s)) for i, s in enumerate(HOSTILE)],
    # add: a misbehaving embedder
    _case("add-embedder-wrong-dim", lambda e: e.htm.add("EMBED_WRONG_DIM text"),
          DimensionMismatchError),
    _case("add-embedder-nan", lambda e: e.htm.add("EMBED_NAN text"), EmbeddingError),
    _case("add-embedder-inf", lambda e: e.htm.add("EMBED_INF text"), EmbeddingError),
    _case("add-embedder-empty", lambda e: e.htm.add("EMBED_EMPTY text"), EmbeddingError),
    _case("add-embedder-raises", lambda e: e.htm.add("EMBED_RAISE text"), EmbeddingError),
    _case("add-embedder-fewer", lambda e: e.htm.add_many(["one", "EMBED_FEWER two"]), EmbeddingError),
    # add_many: all or nothing
    _case("add_many-one-bad-importance",
          lambda e: e.htm.add_many(["good one", {"content": "bad", "importance": math.nan}]),
          InvalidImportanceError),
    _case("add_many-one-bad-content", lambda e: e.htm.add_many(["good", ""]), InvalidContentError),
    _case("add_many-not-dict", lambda e: e.htm.add_many(["good", 42]), InvalidContentError),  # type: ignore[list-item]
    _case("add_many-no-content", lambda e: e.htm.add_many([{"key": "k"}]), InvalidContentError),
    _case("add_many-unknown-field", lambda e: e.htm.add_many([{"content": "x", "colour": 1}]),
          ValidationError),
    _case("add_many-last-collides", lambda e: e.htm.add_many(["good", {"content": "x", "key": "seed"}]),
          DuplicateKeyError),
    _case("add_many-same-key-twice",
          lambda e: e.htm.add_many([{"content": "one", "key": "twin"}, {"content": "two", "key": "twin"}]),
          DuplicateKeyError),
    _case("add_many-wrong-dim-in-batch", lambda e: e.htm.add_many(["fine", "EMBED_WRONG_DIM"]),
          DimensionMismatchError),
    _works("add_many-empty", lambda e: e.htm.add_many([]), lambda e, r: None if r == [] else pytest.fail()),
    # add_document
    _case("add_document-empty", lambda e: e.htm.add_document("", source="doc"), InvalidContentError),
    _case("add_document-nul", lambda e: e.htm.add_document("# T\na\x00b", source="doc"),
          InvalidContentError),
    _case("add_document-10MB", lambda e: e.htm.add_document(BIG, source="doc"), InvalidContentError),
    _case("add_document-source-empty", lambda e: e.htm.add_document("# T\ntext", source=""),
          InvalidKeyError),
    _case("add_document-chunk-0", lambda e: e.htm.add_document("# T\ntext", source="d", chunk_tokens=0),
          InvalidBudgetError),
    _case("add_document-overlap-negative",
          lambda e: e.htm.add_document("# T\ntext", source="d", overlap=-1), InvalidBudgetError),
    _case("add_document-tag", lambda e: e.htm.add_document("# T\ntext", source="d", tags=["a b"]),
          InvalidTagError),
    _case("add_document-importance-11",
          lambda e: e.htm.add_document("# T\nfresh text", source="d", importance=11),
          InvalidImportanceError),
    _works("add_document-hostile",
           lambda e: e.htm.add_document("# '; DROP TABLE memories; --\nsay \"hello NEAR( * \\",
                                        source="'; DROP TABLE memories; --"),
           lambda e, ms: None if ms and all(e.htm.retrieve(m.key) for m in ms)
           and e.htm.retrieve("seed") is not None else pytest.fail(f"{ms}")),
    # recall
    _case("recall-empty", lambda e: e.htm.recall(""), InvalidContentError),
    _case("recall-whitespace", lambda e: e.htm.recall("   "), InvalidContentError),
    _case("recall-none", lambda e: e.htm.recall(None), InvalidContentError),  # type: ignore[arg-type]
    _case("recall-nul", lambda e: e.htm.recall("a\x00b"), InvalidContentError),
    _case("recall-surrogate", lambda e: e.htm.recall("a\ud800"), InvalidContentError),
    _case("recall-10MB", lambda e: e.htm.recall(BIG), InvalidContentError),
    _case("recall-strategy", lambda e: e.htm.recall("x", strategy="psychic"), UnknownStrategyError),
    _case("recall-strategy-case", lambda e: e.htm.recall("x", strategy=None), UnknownStrategyError),  # type: ignore[arg-type]
    _case("recall-timeframe", lambda e: e.htm.recall("x", timeframe="when pigs fly"), TimeframeError),
    _case("recall-timeframe-reversed",
          lambda e: e.htm.recall("x", timeframe="2024-06-01..2024-05-01"), TimeframeError),
    _case("recall-timeframe-int", lambda e: e.htm.recall("x", timeframe=12), TimeframeError),
    *[_case(f"recall-limit-{name}", (lambda v: lambda e: e.htm.recall("x", limit=v))(value),
            InvalidBudgetError)
      for name, value in [("0", 0), ("negative", -1), ("huge", 10**9), ("float", 2.5),
                          ("str", "5"), ("bool", True), ("nan", math.nan)]],
    _case("recall-tag", lambda e: e.htm.recall("x", tags=["bad tag"]), InvalidTagError),
    _case("recall-robot-empty", lambda e: e.htm.recall("x", robot=""), InvalidKeyError),
    _case("recall-robot-long", lambda e: e.htm.recall("x", robot="r" * 300), InvalidKeyError),
    *[_case(f"recall-min-score-{name}", (lambda v: lambda e: e.htm.recall("x", min_score=v))(value),
            ValidationError)
      for name, value in [("negative", -0.1), ("above-1", 1.5), ("nan", math.nan), ("str", "0.3"),
                          ("bool", True)]],
    _case("recall-rerank-not-callable", lambda e: e.htm.recall("harbour", rerank=42),
          ValidationError),
    _case("recall-rerank-wrong-count", lambda e: e.htm.recall("harbour", rerank=lambda q, t: []),
          ValidationError),
    _case("recall-embedder-nan", lambda e: e.htm.recall("EMBED_NAN query"), EmbeddingError),
    _case("recall-embedder-raises", lambda e: e.htm.recall("EMBED_RAISE query"), EmbeddingError),
    _case("recall-embedder-wrong-dim", lambda e: e.htm.recall("EMBED_WRONG_DIM query"),
          DimensionMismatchError),
    _works("recall-limit-max", lambda e: e.htm.recall("harbour", limit=10_000, strategy="fulltext"),
           lambda e, hits: None if [h.memory.key for h in hits] == ["seed"] else pytest.fail(f"{hits}")),
    *[_works(f"recall-hostile-{strategy}-{i}",
             (lambda q, st: lambda e: e.htm.recall(q, strategy=st))(s, strategy), hostile_query_ok)
      for strategy in ("hybrid", "fulltext") for i, s in enumerate(HOSTILE)],
    # retrieve
    _case("retrieve-empty", lambda e: e.htm.retrieve(""), InvalidKeyError),
    _case("retrieve-long", lambda e: e.htm.retrieve("k" * 256), InvalidKeyError),
    _case("retrieve-nul", lambda e: e.htm.retrieve("a\x00"), InvalidKeyError),
    _works("retrieve-unknown", lambda e: e.htm.retrieve("no-such-key"), returns_none),
    _works("retrieve-hostile", lambda e: e.htm.retrieve("'; DROP TABLE memories; --"), returns_none),
    _works("retrieve-forgotten", lambda e: e.htm.retrieve("gone"), returns_none),
    # get / list (no access counted)
    _case("get-empty", lambda e: e.htm.get(""), InvalidKeyError),
    _case("get-nul", lambda e: e.htm.get("a\x00"), InvalidKeyError),
    _works("get-hostile", lambda e: e.htm.get("'; DROP TABLE memories; --"), returns_none),
    _works("get-forgotten", lambda e: e.htm.get("gone"), returns_none),
    _case("list-limit", lambda e: e.htm.list(limit=0), InvalidBudgetError),
    _case("list-order", lambda e: e.htm.list(order="psychic"), ValidationError),
    _case("list-cursor", lambda e: e.htm.list(cursor="not a cursor"), ValidationError),
    _case("list-tags", lambda e: e.htm.list(tags=["a b"]), InvalidTagError),
    _case("list-timeframe", lambda e: e.htm.list(timeframe="soonish"), TimeframeError),
    _works("list-hostile-prefix", lambda e: e.htm.list(key_prefix="'; DROP TABLE memories; --"),
           lambda e, page: None if page.memories == () else pytest.fail(f"{page}")),
    # update / versions / get(version=) / recall(include_history=)
    _case("update-unknown", lambda e: e.htm.update("no-such-key", "new text"), NotFoundError),
    _case("update-forgotten", lambda e: e.htm.update("gone", "new text"), NotFoundError),
    _case("update-empty-key", lambda e: e.htm.update("", "new text"), InvalidKeyError),
    _case("update-empty", lambda e: e.htm.update("seed", "   "), InvalidContentError),
    _case("update-nul", lambda e: e.htm.update("seed", "a\x00b"), InvalidContentError),
    _case("update-huge", lambda e: e.htm.update("seed", BIG), InvalidContentError),
    _case("update-importance", lambda e: e.htm.update("seed", "new", importance=11),
          InvalidImportanceError),
    _case("update-tags", lambda e: e.htm.update("seed", "new", tags=["a b"]), InvalidTagError),
    _case("update-metadata", lambda e: e.htm.update("seed", "new", metadata=[1]),  # type: ignore[arg-type]
          ValidationError),
    _case("update-embedder-nan", lambda e: e.htm.update("seed", "EMBED_NAN text"),
          EmbeddingError),
    _case("update-embedder-wrong-dim", lambda e: e.htm.update("seed", "EMBED_WRONG_DIM text"),
          DimensionMismatchError),
    _case("update-embedder-raises", lambda e: e.htm.update("seed", "EMBED_RAISE text"),
          EmbeddingError),
    _works("update-hostile", lambda e: e.htm.update("seed", "'; DROP TABLE memories; --"),
           lambda e, m: None if m.version == 2 and e.htm.get("seed", version=1) is not None
           else pytest.fail(f"{m}")),
    _case("versions-unknown", lambda e: e.htm.versions("no-such-key"), NotFoundError),
    _case("versions-nul", lambda e: e.htm.versions("a\x00"), InvalidKeyError),
    _case("get-version-0", lambda e: e.htm.get("seed", version=0), ValidationError),
    _case("get-version-str", lambda e: e.htm.get("seed", version="1"),  # type: ignore[arg-type]
          ValidationError),
    _works("get-version-absent", lambda e: e.htm.get("seed", version=9), returns_none),
    _case("recall-include-history-str", lambda e: e.htm.recall("x", include_history="yes"),  # type: ignore[arg-type]
          ValidationError),
    # forget / restore / purge
    _case("forget-no-confirm", lambda e: e.htm.forget("seed"), ConfirmationRequiredError),
    _case("forget-confirm-truthy", lambda e: e.htm.forget("seed", confirm="yes"),  # type: ignore[arg-type]
          ConfirmationRequiredError),
    _case("forget-unknown", lambda e: e.htm.forget("no-such-key", confirm=True), NotFoundError),
    _case("forget-empty-key", lambda e: e.htm.forget("", confirm=True), InvalidKeyError),
    _case("forget-hostile-key", lambda e: e.htm.forget("' OR 1=1; --", confirm=True), NotFoundError),
    _case("restore-unknown", lambda e: e.htm.restore("no-such-key"), NotFoundError),
    _case("restore-long-key", lambda e: e.htm.restore("k" * 256), InvalidKeyError),
    _case("purge-no-confirm", lambda e: e.htm.purge(), ConfirmationRequiredError),
    _case("purge-confirm-1", lambda e: e.htm.purge(confirm=1), ConfirmationRequiredError),  # type: ignore[arg-type]
    _case("purge-long-key", lambda e: e.htm.purge(confirm=True, key="k" * 256), InvalidKeyError),
    _case("purge-unknown-key", lambda e: e.htm.purge(confirm=True, key="no-such-key"), NotFoundError),
    _case("purge-visible-key", lambda e: e.htm.purge(confirm=True, key="seed"),
          ConfirmationRequiredError),
    # create_context
    _case("context-strategy", lambda e: e.htm.create_context("psychic"), UnknownStrategyError),
    *[_case(f"context-max-tokens-{name}", (lambda v: lambda e: e.htm.create_context(max_tokens=v))(value),
            InvalidBudgetError)
      for name, value in [("0", 0), ("negative", -5), ("float", 100.0), ("str", "100"),
                          ("nan", math.nan), ("bool", True)]],
    _works("context-max-tokens-1", lambda e: e.htm.create_context(max_tokens=1),
           lambda e, c: None if c.tokens <= c.budget and c.memories == () else pytest.fail(f"{c}")),
    _works("context-max-tokens-huge", lambda e: e.htm.create_context(max_tokens=10**12),
           lambda e, c: None if c.keys == ("seed",) else pytest.fail(f"{c}")),
    # operations
    *[_case(f"operations-limit-{name}", (lambda v: lambda e: e.htm.operations(limit=v))(value),
            InvalidBudgetError)
      for name, value in [("0", 0), ("negative", -1), ("huge", 10**9), ("str", "10")]],
    _works("operations-hostile-op", lambda e: e.htm.operations(op="'; DROP TABLE operations; --"),
           lambda e, ops: None if ops == [] else pytest.fail(f"{ops}")),
    # async twins
    _case("aadd-nul", lambda e: arun(e.htm.aadd("a\x00b")), InvalidContentError),
    _case("aadd-importance", lambda e: arun(e.htm.aadd("x", importance=11)), InvalidImportanceError),
    _case("aadd_many-bad", lambda e: arun(e.htm.aadd_many(["ok", {"content": "x", "tags": ["a b"]}])),
          InvalidTagError),
    _case("arecall-limit", lambda e: arun(e.htm.arecall("x", limit=0)), InvalidBudgetError),
    _case("arecall-min-score", lambda e: arun(e.htm.arecall("x", min_score=2)), ValidationError),
    _case("arecall-rerank", lambda e: arun(e.htm.arecall("x", rerank="cohere")), ValidationError),
    _case("arecall-strategy", lambda e: arun(e.htm.arecall("x", strategy="psychic")),
          UnknownStrategyError),
    _case("aretrieve-empty", lambda e: arun(e.htm.aretrieve("")), InvalidKeyError),
    _case("aget-empty", lambda e: arun(e.htm.aget("")), InvalidKeyError),
    _case("alist-limit", lambda e: arun(e.htm.alist(limit=0)), InvalidBudgetError),
    _case("aupdate-unknown", lambda e: arun(e.htm.aupdate("no-such-key", "x")), NotFoundError),
    _case("aupdate-nul", lambda e: arun(e.htm.aupdate("seed", "a\x00")), InvalidContentError),
    _case("aversions-unknown", lambda e: arun(e.htm.aversions("no-such-key")), NotFoundError),
    # digests
    _case("consolidate-period", lambda e: e.htm.consolidate("year"), TimeframeError),
    _case("consolidate-at", lambda e: e.htm.consolidate("day", at="soon"), TimeframeError),
    _case("consolidate-tz", lambda e: e.htm.consolidate("day", tz="Mars/Base"), TimeframeError),
    _case("consolidate-scope", lambda e: e.htm.consolidate("day", scope="ada"),  # type: ignore[arg-type]
          ValidationError),
    _case("consolidate-user", lambda e: e.htm.consolidate("day", user_id=""), ValidationError),
    _case("consolidate-strategy", lambda e: e.htm.consolidate("day", strategy="psychic"),
          UnknownStrategyError),
    _case("consolidate-no-model", lambda e: e.htm.consolidate("day", strategy="simple"),
          ValidationError),
    _case("consolidate-target", lambda e: e.htm.consolidate("day", target_tokens=-1),
          InvalidBudgetError),
    _case("aconsolidate-period", lambda e: arun(e.htm.aconsolidate("fortnight")), TimeframeError),
    _case("schedule_consolidation-target",
          lambda e: e.htm.schedule_consolidation("week", target_tokens=0), InvalidBudgetError),
    _case("aschedule_consolidation-strategy",
          lambda e: arun(e.htm.aschedule_consolidation("week", strategy="psychic")),
          UnknownStrategyError),
    _case("digests-period", lambda e: e.htm.digests("year"), TimeframeError),
    _case("digests-limit", lambda e: e.htm.digests(limit=0), InvalidBudgetError),
    _case("adigests-user", lambda e: arun(e.htm.adigests(user_id="")), ValidationError),
    _case("acreate_context-strategy", lambda e: arun(e.htm.acreate_context("psychic")),
          UnknownStrategyError),
    _case("aforget-no-confirm", lambda e: arun(e.htm.aforget("seed")), ConfirmationRequiredError),
    _case("acreate_context-scope-no-tags", lambda e: arun(e.htm.acreate_context(scope_working=True)),
          ValidationError),
    _case("aadd_document-empty", lambda e: arun(e.htm.aadd_document("", source="doc")),
          InvalidContentError),
    _case("arestore-empty", lambda e: arun(e.htm.arestore("")), InvalidKeyError),
    _case("apurge-no-confirm", lambda e: arun(e.htm.apurge()), ConfirmationRequiredError),
    _case("aoperations-limit", lambda e: arun(e.htm.aoperations(limit=0)), InvalidBudgetError),
    _works("arecall-hostile", lambda e: arun(e.htm.arecall("'; DROP TABLE memories; --")),
           hostile_query_ok),
]


def _node(text: str, **kwargs: Any) -> TextNode:
    return TextNode(text=text, **kwargs)


def _query(text: str | None, **kwargs: Any) -> VectorStoreQuery:
    return VectorStoreQuery(query_str=text, similarity_top_k=kwargs.pop("k", 4), **kwargs)


def _retriever(e: Any, **kwargs: Any) -> HTMRetriever:
    """A retriever over the whole store (a retriever must be given a scope)."""
    return HTMRetriever(htm=e.htm, shared=True, **kwargs)


ADAPTER_CASES = [
    # LangChain retriever
    _case("lc-retriever-empty", lambda e: _retriever(e).invoke(""), InvalidContentError),
    _case("lc-retriever-nul", lambda e: _retriever(e).invoke("a\x00"), InvalidContentError),
    _case("lc-retriever-k0", lambda e: _retriever(e, k=0).invoke("x"), InvalidBudgetError),
    _case("lc-retriever-k-huge", lambda e: _retriever(e).invoke("x", k=10**7),
          InvalidBudgetError),
    _case("lc-retriever-strategy", lambda e: _retriever(e, strategy="psychic").invoke("x"),
          UnknownStrategyError),
    _case("lc-retriever-timeframe", lambda e: _retriever(e).invoke("x", timeframe="soonish"),
          TimeframeError),
    _case("lc-retriever-tag", lambda e: HTMRetriever(htm=e.htm, tags="bad tag").invoke("x"),
          InvalidTagError),
    _case("lc-retriever-unknown-option", lambda e: _retriever(e).invoke("x", colour=1),
          ValidationError),
    _case("lc-retriever-ainvoke", lambda e: arun(_retriever(e, k=-1).ainvoke("x")),
          InvalidBudgetError),
    *[_works(f"lc-retriever-hostile-{i}", (lambda q: lambda e: _retriever(e).invoke(q))(s),
             hostile_query_ok) for i, s in enumerate(HOSTILE)],
    # LangChain chat history
    _case("lc-history-importance", lambda e: HTMChatMessageHistory(htm=e.htm, session_id="s",
                                                                   importance=math.nan),
          InvalidImportanceError),
    _case("lc-history-session-empty", lambda e: HTMChatMessageHistory(htm=e.htm, session_id=""),
          ValidationError),
    _case("lc-history-not-message", lambda e: e.history.add_messages(["plain text"]),  # type: ignore[list-item]
          ValidationError),
    _case("lc-history-nul-second", lambda e: e.history.add_messages(
        [HumanMessage("fine"), AIMessage("bad\x00")]), InvalidContentError),
    _case("lc-history-huge", lambda e: e.history.add_messages([HumanMessage(BIG)]), InvalidContentError),
    _case("lc-history-async-surrogate", lambda e: arun(e.history.aadd_messages(
        [HumanMessage("bad \ud800")])), InvalidContentError),
    _works("lc-history-hostile-session",
           lambda e: HTMChatMessageHistory(htm=e.htm, session_id="'; DROP TABLE memories; --")
           .add_messages([HumanMessage('say "hello NEAR(')]),
           lambda e, _: None if [m.content for m in HTMChatMessageHistory(
               htm=e.htm, session_id="'; DROP TABLE memories; --").messages] == ['say "hello NEAR(']
           else pytest.fail()),
    # LangChain classic memory
    _case("lc-memory-max-tokens", lambda e: HTMMemory(htm=e.htm, max_tokens=0), InvalidBudgetError),
    _case("lc-memory-recall-limit", lambda e: HTMMemory(htm=e.htm, recall_limit=-1), InvalidBudgetError),
    _case("lc-memory-strategy", lambda e: HTMMemory(htm=e.htm, recall_strategy="psychic"),
          UnknownStrategyError),
    _case("lc-memory-context-strategy", lambda e: HTMMemory(htm=e.htm, context_strategy="psychic"),
          UnknownStrategyError),
    _case("lc-memory-tags", lambda e: HTMMemory(htm=e.htm, recall_tags=["a b"]), InvalidTagError),
    _case("lc-memory-importance", lambda e: HTMMemory(htm=e.htm, importance=11), InvalidImportanceError),
    _case("lc-memory-save-nul", lambda e: e.lc_memory.save_context({"input": "hi\x00"}, {"output": "ok"}),
          InvalidContentError),
    _case("lc-memory-save-bad-output",
          lambda e: e.lc_memory.save_context({"input": "hi"}, {"output": "\ud800"}),
          InvalidContentError),
    _case("lc-memory-save-ambiguous", lambda e: e.lc_memory.save_context({"input": "hi"}, {"a": 1, "b": 2}),
          ValidationError),
    _case("lc-memory-load-surrogate", lambda e: e.lc_memory.load_memory_variables({"input": "\ud800"}),
          InvalidContentError),
    _case("lc-memory-asave-nul",
          lambda e: arun(e.lc_memory.asave_context({"input": "\x00"}, {"output": "x"})),
          InvalidContentError),
    *[_works(f"lc-memory-load-hostile-{i}",
             (lambda q: lambda e: e.lc_memory.load_memory_variables({"input": q}))(s),
             lambda e, out: None if isinstance(out["history"], str) else pytest.fail())
      for i, s in enumerate(HOSTILE)],
    # LangGraph store
    _case("lg-store-importance", lambda e: HTMStore(htm=e.htm, importance=-1), InvalidImportanceError),
    _case("lg-store-not-dict", lambda e: e.lg_store.put(("ns",), "k", "text"), ValidationError),  # type: ignore[arg-type]
    _case("lg-store-nan", lambda e: e.lg_store.put(("ns",), "k", {"text": "x", "v": math.nan}),
          ValidationError),
    _case("lg-store-nul-field", lambda e: e.lg_store.put(("ns",), "k", {"text": "a\x00b"}),
          InvalidContentError),
    _case("lg-store-huge", lambda e: e.lg_store.put(("ns",), "k", {"text": BIG}), InvalidContentError),
    _case("lg-store-namespace-empty", lambda e: e.lg_store.put((), "k", {"text": "x"}),
          InvalidNamespaceError),  # LangGraph's own contract for namespaces, kept
    _case("lg-store-namespace-dot", lambda e: e.lg_store.put(("a.b",), "k", {"text": "x"}),
          InvalidNamespaceError),
    _case("lg-store-search-limit-negative", lambda e: e.lg_store.search(("ns",), limit=-1),
          InvalidBudgetError),
    _case("lg-store-search-limit-0", lambda e: e.lg_store.search(("ns",), query="x", limit=0),
          InvalidBudgetError),
    _case("lg-store-search-surrogate", lambda e: e.lg_store.search(("ns",), query="\ud800"),
          InvalidContentError),
    _case("lg-store-aput-nan", lambda e: arun(e.lg_store.aput(("ns",), "k", {"v": math.inf})),
          ValidationError),
    _works("lg-store-hostile-namespace-and-key",
           lambda e: e.lg_store.put(("'; DROP TABLE tags; --", "NEAR(", "*"), "k\\" * 300,
                                    {"text": 'say "hello'}),
           lambda e, _: None if e.lg_store.get(("'; DROP TABLE tags; --", "NEAR(", "*"), "k\\" * 300)
           .value == {"text": 'say "hello'} else pytest.fail()),
    *[_works(f"lg-store-search-hostile-{i}",
             (lambda q: lambda e: e.lg_store.search(("ns",), query=q))(s),
             lambda e, items: None if items == [] else pytest.fail(f"{items}"))
      for i, s in enumerate(HOSTILE)],
    # LlamaIndex chat memory
    _case("li-memory-token-limit-0", lambda e: LlamaMemory.from_defaults(htm=e.htm, token_limit=0),
          InvalidBudgetError),
    _case("li-memory-recall-limit-negative",
          lambda e: LlamaMemory.from_defaults(htm=e.htm, recall_limit=-1), InvalidBudgetError),
    _case("li-store-importance-11", lambda e: HTMVectorStore(htm=e.htm, importance=11),
          InvalidImportanceError),
    _case("li-memory-put-nul", lambda e: e.li_memory.put(ChatMessage(role="user", content="a\x00")),
          InvalidContentError),
    _case("li-memory-put-huge", lambda e: e.li_memory.put(ChatMessage(role="user", content=BIG)),
          InvalidContentError),
    _case("li-memory-aput-surrogate", lambda e: arun(e.li_memory.aput(
        ChatMessage(role="assistant", content="\udc80"))), InvalidContentError),
    _case("li-memory-set-bad-second", lambda e: e.li_memory.set(
        [ChatMessage(role="user", content="fine"), ChatMessage(role="user", content="\x00")]),
          InvalidContentError),
    _case("li-memory-initial-count", lambda e: e.li_memory.get("x", initial_token_count=-1),
          InvalidBudgetError),
    _case("li-memory-initial-count-all", lambda e: e.li_memory.get("x", initial_token_count=10**9),
          InvalidBudgetError),
    _case("li-memory-strategy", lambda e: LlamaMemory.from_defaults(
        htm=e.htm, recall_strategy="psychic").get("harbour"), UnknownStrategyError),
    _case("li-memory-get-surrogate", lambda e: e.li_memory.get("\ud800"), InvalidContentError),
    *[_works(f"li-memory-get-hostile-{i}", (lambda q: lambda e: e.li_memory.get(q))(s),
             lambda e, msgs: None if isinstance(msgs, list) else pytest.fail())
      for i, s in enumerate(HOSTILE)],
    # LlamaIndex vector store
    _case("li-store-empty-text", lambda e: e.li_store.add([_node("ok"), _node("")]), InvalidContentError),
    _case("li-store-nul-text", lambda e: e.li_store.add([_node("a\x00")]), InvalidContentError),
    _case("li-store-importance", lambda e: e.li_store.add([_node("x", metadata={"importance": 11})]),
          InvalidImportanceError),
    _case("li-store-importance-nan", lambda e: e.li_store.add(
        [_node("x", metadata={"importance": math.nan})]), InvalidImportanceError),
    _case("li-store-long-id", lambda e: e.li_store.add([_node("x", id_="n" * 300)]), InvalidKeyError),
    _case("li-store-id-collides", lambda e: e.li_store.add([_node("other", id_="seed")]),
          DuplicateKeyError),
    _case("li-store-bad-date", lambda e: e.li_store.add([_node("x", metadata={"created_at": "soon"})]),
          ValidationError),
    _case("li-store-async-bad", lambda e: arun(e.li_store.async_add([_node(" ")])), InvalidContentError),
    _case("li-store-query-empty", lambda e: e.li_store.query(_query("")), ValidationError),
    _case("li-store-query-none", lambda e: e.li_store.query(_query(None)), ValidationError),
    _case("li-store-query-mode", lambda e: e.li_store.query(_query("x", mode=VectorStoreQueryMode.MMR)),
          UnknownStrategyError),
    _case("li-store-query-huge-k", lambda e: e.li_store.query(_query("x", k=10**7)), InvalidBudgetError),
    _case("li-store-query-filter-op", lambda e: e.li_store.query(_query("x", filters=MetadataFilters(
        filters=[MetadataFilter(key="colour", value=1, operator=FilterOperator.GT)]))),
          UnsupportedFilterError),
    _case("li-store-aquery-nul", lambda e: arun(e.li_store.aquery(_query("a\x00"))), InvalidContentError),
    _case("li-store-delete-nodes-nothing", lambda e: e.li_store.delete_nodes(), ValidationError),
    _works("li-store-query-k0", lambda e: e.li_store.query(_query("harbour", k=0)),
           lambda e, r: None if r.ids == [] else pytest.fail(f"{r}")),
    *[_works(f"li-store-query-hostile-{i}",
             (lambda q: lambda e: e.li_store.query(_query(q, mode=VectorStoreQueryMode.HYBRID)))(s),
             lambda e, r: None if set(r.ids) <= {"seed", "collide"}
             and e.htm.store.counts(e.htm.robot).total == 2 else pytest.fail(f"{r.ids}"))
      for i, s in enumerate(HOSTILE)],
]


@pytest.fixture
def env(htm_factory: Callable[..., HTM], store_url: str) -> Env:
    """An HTM on a fresh store with a visible seed memory, a forgotten one and another key."""
    htm = htm_factory(robot="matrix", embedder=ScriptedEmbedder(), working_memory_tokens=4_000)
    htm.add(SEED, key="seed", importance=5, tags=["seed:one"])
    htm.add("a memory that was forgotten", key="gone")
    htm.forget("gone", confirm=True)
    htm.add("another robot's words", key="collide", tags=["seed:two"])
    htm.clear_working_memory()
    htm.add(SEED, key="seed")  # back in working memory
    return Env(htm, store_url)


def run_case(case: Case, env: Env) -> None:
    before = snapshot(env.htm)
    if case.error is not None:
        with pytest.raises(case.error) as info:
            case.call(env)
        assert str(info.value).strip(), "the error must say what to do"
        assert snapshot(env.htm) == before, "a rejected call changed the store"
        return
    result = case.call(env)
    assert case.check is not None
    case.check(env, result)


@pytest.mark.postgres
@pytest.mark.parametrize("case", HTM_CASES)
def test_htm_bad_input(case: Case, env: Env) -> None:
    run_case(case, env)


@pytest.mark.postgres
@pytest.mark.parametrize("case", ADAPTER_CASES)
def test_adapter_bad_input(case: Case, env: Env) -> None:
    run_case(case, env)


def test_every_public_method_is_in_the_matrix() -> None:
    """A new public HTM method must get rows here: this lists the ones the matrix covers."""
    covered = {"add", "add_many", "add_document", "recall", "retrieve", "forget", "restore", "purge",
               "create_context", "operations", "aadd", "aadd_many", "arecall", "aretrieve",
               "acreate_context", "aforget", "aadd_document", "arestore", "apurge", "aoperations",
               "get", "list", "aget", "alist", "update", "versions", "aupdate", "aversions",
               "consolidate", "aconsolidate", "schedule_consolidation",
               "aschedule_consolidation", "digests", "adigests"}
    exempt = {"close", "migrate", "flush", "flush_enrichment", "flush_consolidation",
              "reembed", "stats",
              "retry_failed_embeddings",
              "robots", "tags", "clear_working_memory"}
    exempt |= {f"a{name}" for name in exempt}  # their async twins
    public = {name for name in dir(HTM)
              if not name.startswith("_") and inspect.isfunction(getattr(HTM, name))}
    assert public - covered - exempt == set(), "add matrix rows for the new public methods"
    names = {c.values[0].id.split("-")[0] for c in HTM_CASES}
    assert {"init", "add", "add_many", "recall", "retrieve", "forget", "restore", "purge", "context",
            "operations", "aadd", "aadd_many", "arecall", "aretrieve", "acreate_context",
            "aforget", "get", "list", "aget", "alist", "update", "versions", "aupdate",
            "aversions"} <= names
