"""The PostgreSQL + pgvector long-term store: one memory shared by many processes and robots.

How it works:

- SQLAlchemy 2 engine on psycopg 3 (``postgresql+psycopg``) with a ``QueuePool``, so a
  process opens a handful of connections and reuses them. Connections are not pinged
  before use (a round trip on every call); a pooled connection found dead (the server
  restarted) is replaced and the call retried once, which is safe because the failure
  came before anything was committed: a read, or a transaction before its ``COMMIT``.
- ``memories.embedding`` is a pgvector ``vector`` column. Its dimension is fixed when the
  first vector arrives (``ALTER ... TYPE vector(dim)``), and the HNSW cosine index
  (``vector_cosine_ops``, ``m`` / ``ef_construction`` configurable) is created then. Rows
  are stored L2-normalised, as on SQLite. ``hnsw.ef_search`` is set on a pooled
  connection when it holds another value than the search asks for. The index is partial
  (``forgotten_at IS NULL``), so forgotten memories never take a slot in an approximate
  result. Reads run in autocommit mode (no BEGIN / ROLLBACK round trips on the recall
  path).
- Full text: a generated ``tsvector`` column (``to_tsvector('english', ...)`` of
  :data:`~htm_core.text.PG_INDEX_TEXT`: punctuation as spaces, Latin diacritics
  removed) with a GIN index, ranked by ``ts_rank`` (``ts_rank_cd`` cost twice as much per
  matching row and ranked no better on the recall-quality set). User text is reduced to
  words and phrases (:func:`~htm_core.text.parse_query`, the rules SQLite follows
  too) and each goes through ``phraseto_tsquery`` as a bound value; they are OR-ed,
  except that a word in more than a tenth of the memories (by the table's statistics)
  only breaks ties. CJK runs are substrings (``strpos``) of the memories a partial index
  lists. Nothing the user types is ever parsed as tsquery syntax. A search is one
  statement.
- Timeframe (B-tree on ``created_at``), robot and tag filters are part of each SQL query.
  An HNSW scan applies filters after it has walked ``ef_search`` candidates, so when a
  filtered approximate search comes back short, the store re-runs it as an exact search
  (index scans off, bitmap scans on the filter indexes still allowed): a filter never
  starves the result.
- A batch of adds is a fixed number of statements whatever its size, in one transaction.
  Small batches send the rows as arrays (``INSERT ... SELECT FROM unnest(...) ... ON
  CONFLICT (key) DO NOTHING RETURNING``); batches of ``copy_min_rows`` new rows or more
  stream them with a binary ``COPY`` straight into ``memories``, ids drawn from its
  sequence first (a key another writer commits meanwhile fails the ``COPY``, and the batch
  is re-run by statements). While the server inserts the rows, the client builds the
  results and the working-memory change (a Unix socket gets a send buffer for the whole
  batch, so the client is not held back). Vectors travel in pgvector's binary form, not as
  text.
- :meth:`PostgresStore.bulk_load` is a context manager for very large loads: it drops the
  HNSW index (and by default the GIN full-text index) while the rows go in and builds
  them once at the end with a larger ``maintenance_work_mem``, also when the load fails.
  Searches meanwhile stay correct (exact scans). A marker in ``htm_meta`` plus an
  advisory lock let the next store that opens rebuild the indexes of a loader that died.
  Concurrent writers never lose or duplicate a memory: the unique key decides, and a key
  another process inserted first is treated as an existing memory (touched, or a
  ``DuplicateKeyError`` when its content differs). Deadlocks and serialisation failures
  are retried.
- Schema versioning in ``htm_meta`` like SQLite's; ``migrate()`` runs under an advisory
  lock so processes starting together do not race; it never drops anything.
"""

from __future__ import annotations

try:
    import psycopg  # noqa: F401  the driver SQLAlchemy loads for postgresql+psycopg
except ImportError:
    from ...errors import missing_extra

    raise missing_extra("psycopg", "postgres") from None
try:
    import pgvector.psycopg  # noqa: F401  the vector codec on every connection
except ImportError:
    from ...errors import missing_extra

    raise missing_extra("pgvector", "postgres") from None

from ._schema import _SCHEMA_V1 as _SCHEMA_V1
from ._schema import DEFAULT_COPY_MIN_ROWS as DEFAULT_COPY_MIN_ROWS
from ._schema import DEFAULT_EF_SEARCH as DEFAULT_EF_SEARCH
from .engine import postgres_url
from .store import PostgresStore

__all__ = ["DEFAULT_COPY_MIN_ROWS", "DEFAULT_EF_SEARCH", "PostgresStore", "postgres_url"]
