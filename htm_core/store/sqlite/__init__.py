"""The embedded long-term store: one SQLite file (or ``:memory:``), no server.

- WAL journal, a busy timeout, foreign keys on; writes take the write lock up front
  (``BEGIN IMMEDIATE``) so concurrent writers queue instead of failing half-way.
- Full text: an FTS5 table (porter stemming, unicode61) kept in step by triggers, ranked
  by bm25; ``add_many`` indexes its new rows with one statement per batch while the insert
  trigger stands aside (see ``_FTS_BATCH_KEY``). User text is reduced to quoted words and
  phrases (:func:`~htm_core.text.parse_query`) before it reaches ``MATCH``. A
  second FTS5 table with the trigram tokenizer holds the memories with CJK characters,
  whose substrings a CJK query looks for.
- Vectors: float32 BLOBs in the ``memories`` table and an in-process numpy index
  (:class:`~htm_core.store.vector_index.VectorIndex`) built on open and kept in step
  with adds, forgets, restores and purges. New rows written by other processes are
  picked up before each vector search. Large stores add an HNSW graph in front of it
  (:class:`~htm_core.store.ann.ApproximateIndex`), persisted beside the database file
  as ``<file>-vectors.usearch``.
"""

from __future__ import annotations

from ._schema import _FTS_BATCH_KEY as _FTS_BATCH_KEY
from ._schema import _HASH_INDEX as _HASH_INDEX
from ._schema import _LARGE_BATCH_CACHE_KIB as _LARGE_BATCH_CACHE_KIB
from ._schema import _SCHEMA_V1 as _SCHEMA_V1
from .engine import default_sqlite_path, sqlite_url
from .store import SQLiteStore

__all__ = ["SQLiteStore", "default_sqlite_path", "sqlite_url"]
