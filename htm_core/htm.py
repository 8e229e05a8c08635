"""``HTM``: the facade over working memory and long-term memory.

::

    from htm_core import HTM

    with HTM(robot="assistant") as htm:
        htm.add("User prefers Vim keybindings", importance=9.0, tags=["user:preferences"],
                key="pref-vim")
        hits = htm.recall("editor preferences", timeframe="last 7 days")
        ctx = htm.create_context(strategy="balanced", max_tokens=8_000)

Every write is one transaction: a memory, its working-memory membership and its log lines
commit together or not at all. Working memory is per robot and a coherent view of the
store (see :mod:`htm_core.working.resident`): a new ``HTM`` for the same robot starts with
exactly the working memory the last one had, and what any ``HTM`` forgets or purges leaves
every working memory from its next call on.
Eviction only clears membership; only ``forget(key, confirm=True)`` hides a memory and
only ``purge(confirm=True)`` removes a forgotten one for good.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ._embedding import PROBE_TEXT, fill_once
from .background import EmbeddingWorker
from .clock import Clock, local_now, to_aware
from .config import Settings
from .embeddings import embedder_name, resolve_embedder, store_embedder_hint
from .enrich.attach import SUMMARY_TAG, FacadeEnrichment
from .enrich.documents import diff_document, embed_text, plan_document
from .errors import (
    ConfirmationRequiredError,
    DuplicateKeyError,
    EmbedderMismatchError,
    EmbeddingError,
    HTMError,
    InvalidBudgetError,
    InvalidContentError,
    ValidationError,
)
from .models import Context, Hit, Memory, Operation, Robot, Stats
from .observability import Metrics, instrumented
from .retrieval import RetrievalConfig, check_recall_strategy, search
from .store import LongTermStore, NewMemory, SearchFilters, open_store
from .store.base import WorkingChange, WorkingResult, content_hash, generated_key
from .tags import tag_filter
from .timeframe import parse_timeframe
from .tokens import TokenCounter, resolve_counter
from .validation import (
    check_content,
    check_importance,
    check_key,
    check_limit,
    check_max_tokens,
    check_tags,
)
from .working import WorkingMemory
from .working.context import check_strategy
from .working.memory import SEPARATOR
from .working.resident import ResidentSet

__all__ = ["HTM"]

logger = logging.getLogger(__name__)

_EMBED_CACHE_SIZE = 10_000


class HTM:
    """A two-tier memory for one robot over a (possibly shared) long-term store.

    Args:
        robot: this instance's name. Robots on one store share long-term memory and each
            has its own working memory. Default ``HTM_ROBOT`` or ``"default"``.
        database_url: a SQLite path / ``sqlite:///`` URL / ``":memory:"``, or a
            ``postgresql://`` URL. Default ``HTM_DATABASE_URL``, else a SQLite file in
            the user data directory.
        working_memory_tokens: the working-memory budget (default 128,000).
        embedder: an object with ``embed_documents``/``embed_query`` (any LangChain
            ``Embeddings``), or ``"auto"``, ``"hashing"``, ``"local"``, ``"ollama[:model]"``.
            Default ``HTM_EMBEDDER``, else ``"auto"``: the store's own embedder when it
            already has vectors and that embedder is available here, else the best local
            embedder installed. Every vector written is checked against the store's.
        token_counter: a counter with ``count(text)``, any ``str -> int`` callable, or a
            tiktoken encoding name. Default tiktoken ``cl100k_base``, offline.
        eviction: working-memory policy: ``hybrid``, ``lru``, ``importance``, ``frequency``.
        clock: returns the current aware ``datetime``; timeframes are computed in its
            time zone. Default: local time.
        store: an already-open :class:`~htm_core.store.LongTermStore` (instead of a URL).
        context_margin: fraction of ``max_tokens`` that ``create_context`` leaves free.
        retrieval: how hybrid recall fuses its arms.
        embed_batch_size: texts per embedder call (default 64): ``add_many`` of 1,000 new
            texts makes 16 calls.
        background_embeddings: when True, ``add`` stores the memory without a vector and
            returns at once (full-text recall finds it immediately); a worker thread fills
            the vectors in batches, retrying failures with backoff. :meth:`flush` waits
            for it. Memories left without a vector (crash, failing embedder) are picked up
            by the next ``HTM`` in background mode on the store, or by :meth:`flush`. A
            text the embedder rejects is marked and skipped (the rest get their vectors)
            until :meth:`retry_failed_embeddings`.
        allow_embedder_mismatch: open a store whose vectors were made by another embedder
            instead of raising :class:`~htm_core.errors.EmbedderMismatchError`, so that
            :meth:`reembed` can rebuild them. Until then new memories get no vector and
            recall uses full text only.
        telemetry: export metrics and spans through the global OpenTelemetry providers
            (extra ``otel``). In-process counters (``htm.metrics``, ``stats().extra["metrics"]``)
            are kept either way; see :mod:`htm_core.observability`.
        meter_provider: an OpenTelemetry ``MeterProvider`` to export metrics through.
        tracer_provider: an OpenTelemetry ``TracerProvider`` to make spans with.
    """

    def __init__(
        self,
        robot: str | None = None,
        database_url: str | Path | None = None,
        working_memory_tokens: int | None = None,
        embedder: Any = None,
        token_counter: TokenCounter | Any = None,
        eviction: str | None = None,
        clock: Clock | None = None,
        *,
        store: LongTermStore | None = None,
        context_margin: float | None = None,
        retrieval: RetrievalConfig | None = None,
        embed_batch_size: int = 64,
        background_embeddings: bool = False,
        allow_embedder_mismatch: bool = False,
        importance_scorer: Any = None,
        tagger: Any = None,
        summariser: Any = None,
        enrichment_options: Mapping[str, Any] | None = None,
        telemetry: bool = False,
        meter_provider: Any = None,
        tracer_provider: Any = None,
    ) -> None:
        settings = Settings.resolve(
            robot=robot,
            database_url=str(database_url) if database_url is not None else None,
            working_memory_tokens=working_memory_tokens,
            eviction=eviction,
            context_margin=context_margin,
            embedder=embedder if isinstance(embedder, str) else None,
        )
        self.settings = settings
        self.robot = check_key(settings.robot)
        self.metrics = Metrics(robot=self.robot, telemetry=telemetry,
                               meter_provider=meter_provider, tracer_provider=tracer_provider)
        self._clock: Clock = clock or local_now
        self._lock = threading.RLock()
        self._retrieval = retrieval or RetrievalConfig()
        self._wm = WorkingMemory(
            check_max_tokens(settings.working_memory_tokens, name="working_memory_tokens"),
            settings.eviction,
            clock=self._clock,
            safety_margin=settings.context_margin,
        )
        self._counter = resolve_counter(token_counter)
        self._separator_tokens = self._counter.count(SEPARATOR)
        self._embed_cache: OrderedDict[str, list[float]] = OrderedDict()
        self._embedding_calls = 0
        self._cache_hits = 0
        if isinstance(embed_batch_size, bool) or not isinstance(embed_batch_size, int) \
                or embed_batch_size < 1:
            raise InvalidBudgetError(
                f"embed_batch_size must be a positive integer, got {embed_batch_size!r}")
        self._embed_batch_size = embed_batch_size
        self._embed_lock = threading.Lock()
        self._fill_lock = threading.RLock()
        self._embedder_mismatch = False
        self._worker: EmbeddingWorker | None = None
        self._owns_store = store is None
        self._store: LongTermStore = store if store is not None else open_store(
            settings.database_url)
        try:
            # An existing store's own embedder wins over "auto" (see resolve_embedder).
            info = self._store.embedding_info()
            self._embedder, self._embedder_choice = resolve_embedder(
                embedder if embedder is not None and not isinstance(embedder, str)
                else settings.embedder, store_embedder=info[0] if info else None)
            self._embedder_name = embedder_name(self._embedder)
            self._enrichment = FacadeEnrichment(
                store=self._store, robot=self.robot, importance_scorer=importance_scorer,
                tagger=tagger, summariser=summariser, add_summary=self._add_summary,
                refresh_importance=self._refresh_importance, options=enrichment_options)
            self._check_store_embedder(allow_mismatch=allow_embedder_mismatch)
            self._store.ensure_robot(self.robot)
            self._resident = ResidentSet(self._wm, self._store, self.robot, clock=self._clock)
            self._wm_memories = self._resident.memories
            self._sync()
        except BaseException:
            if self._owns_store:
                self._store.close()
            raise
        self._closed = False
        self._enrichment.start()
        if background_embeddings:
            self._worker = EmbeddingWorker(lambda: self._fill_pending(self._embed_batch_size),
                                           name=f"htm-embedder-{self.robot}")
            self._worker.start()
        logger.info("htm robot=%s store=%s embedder=%s counter=%s", self.robot, self._store.url,
                    self._embedder_name, self._counter.name)

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> HTM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store (if this instance opened it). Everything is already durable."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        if self._worker is not None:
            self._worker.stop()
        self._enrichment.stop()
        if self._owns_store:
            self._store.close()

    def __repr__(self) -> str:
        return (f"HTM(robot={self.robot!r}, store={self._store.url!r}, "
                f"working_memory={self._wm.tokens}/{self._wm.max_tokens} tokens)")

    @property
    def store(self) -> LongTermStore:
        """The long-term store."""
        return self._store

    @property
    def working_memory(self) -> WorkingMemory:
        """This robot's working memory as of this instance's last call (read it; change it
        through ``HTM``'s methods, which also bring it up to date with the store)."""
        return self._wm

    @property
    def embedder(self) -> Any:
        """The embedder in use."""
        return self._embedder

    @property
    def token_counter(self) -> TokenCounter:
        """The token counter in use."""
        return self._counter

    def migrate(self) -> int:
        """Create or upgrade the store's schema; return the version now in place."""
        return self._store.migrate()

    # -- embeddings ------------------------------------------------------------------

    def _check_store_embedder(self, *, allow_mismatch: bool = False) -> None:
        info = self._store.embedding_info()
        if info is None:
            return
        name, dim = info
        if name != self._embedder_name:
            if allow_mismatch:
                self._embedder_mismatch = True
                logger.warning("store vectors are from %s, embedder is %s: recall is full-text "
                               "only until reembed()", name, self._embedder_name)
                return
            raise EmbedderMismatchError(
                f"this store's vectors were made by {name!r} ({dim} dimensions) but the "
                f"embedder is {self._embedder_name!r}; pass embedder matching the store"
                f"{store_embedder_hint(name)}, or open it with HTM(..., "
                "allow_embedder_mismatch=True) and call .reembed() (`htm reembed`) to "
                "rebuild every vector with the new one"
            )

    def _call_embedder(self, texts: list[str]) -> list[list[float]]:
        try:
            vectors = self._embedder.embed_documents(texts)
        except HTMError:
            raise
        except Exception as exc:
            raise EmbeddingError(
                f"embedder {self._embedder_name} failed: {exc}; check it is reachable and "
                "configured, nothing was stored") from exc
        with self._embed_lock:
            self._embedding_calls += 1
        self.metrics.embedded(tokens=sum(self._counter.count(t) for t in texts))
        return [self._checked_vector(v) for v in vectors]

    def _checked_vector(self, vector: Sequence[float]) -> list[float]:
        values = [float(x) for x in vector]
        if not values or not all(math.isfinite(x) for x in values):
            raise EmbeddingError(
                f"embedder {self._embedder_name} returned an empty vector or one with NaN/inf")
        return values

    def _embed_documents(self, texts: Sequence[str], *, fresh: bool = False) -> list[list[float]]:
        """Vectors for ``texts``: from the LRU cache, the store, then the embedder.

        Each distinct text is embedded at most once, in calls of ``embed_batch_size``.
        ``fresh`` skips both caches (re-embedding computes every vector anew).
        """
        out: dict[str, list[float]] = {}
        todo: dict[str, str] = {}
        for text in texts:
            h = content_hash(text)
            if h in out or h in todo:
                continue
            with self._embed_lock:
                cached = None if fresh else self._embed_cache.get(h)
            if cached is not None:
                out[h] = cached
                with self._embed_lock:
                    self._cache_hits += 1
            else:
                todo[h] = text
        if todo and not fresh:  # one store lookup for the whole batch
            for h, vec in self._store.find_embeddings(list(todo), self._embedder_name).items():
                out[h] = vec
                del todo[h]
                with self._embed_lock:
                    self._cache_hits += 1
                    self._remember(h, vec)
        pending = list(todo.items())
        size = self._embed_batch_size
        for start in range(0, len(pending), size):
            part = pending[start:start + size]
            vectors = self._call_embedder([text for _, text in part])
            if len(vectors) != len(part):
                raise EmbeddingError(
                    f"embedder {self._embedder_name} returned {len(vectors)} vectors for "
                    f"{len(part)} texts; nothing was stored")
            with self._embed_lock:
                for (h, _), vec in zip(part, vectors, strict=True):
                    out[h] = vec
                    self._remember(h, vec)
        return [out[content_hash(t)] for t in texts]

    def _remember(self, h: str, vec: list[float]) -> None:
        """Put a vector in the LRU cache (call with ``_embed_lock`` held)."""
        self._embed_cache[h] = vec
        self._embed_cache.move_to_end(h)
        while len(self._embed_cache) > _EMBED_CACHE_SIZE:
            self._embed_cache.popitem(last=False)

    def _embed_query(self, text: str) -> list[float]:
        try:
            vector = self._embedder.embed_query(text)
        except Exception as exc:
            raise EmbeddingError(f"embedder {self._embedder_name} failed on the query: {exc}"
                                 ) from exc
        with self._embed_lock:
            self._embedding_calls += 1
        self.metrics.embedded(tokens=self._counter.count(text))
        return self._checked_vector(vector)

    def _fill_pending(self, limit: int) -> int:
        """Embed up to ``limit`` stored memories that have no vector; return how many were
        done (embedded, or marked as failing: see :mod:`htm_core._embedding`)."""
        return sum(self._fill_once(limit))

    def _fill_once(self, limit: int, *, fresh: bool = False) -> tuple[int, int]:
        with self._fill_lock:
            if self._embedder_mismatch:
                return 0, 0
            return fill_once(self._store, lambda texts: self._embed_documents(texts, fresh=fresh),
                             self._embedder_name, limit,
                             probe=lambda: self._call_embedder([PROBE_TEXT]))

    def retry_failed_embeddings(self) -> int:
        """Give the memories whose embedding failed another try; return how many.

        Their failure marks are cleared (for every process on the store) and they are
        embedded again: by the worker in background mode (:meth:`flush` waits for it), here
        otherwise. One that fails again is marked again with the new reason.
        """
        count = self._store.retry_embedding_failures()
        if count:
            logger.info("retrying %d memories whose embedding failed", count)
        if self._worker is not None:
            self._worker.wake()
        elif not self._embedder_mismatch:
            while self._fill_pending(self._embed_batch_size):
                pass
        return count

    @property
    def background_embeddings(self) -> bool:
        """Whether a worker thread computes embeddings after ``add`` returns."""
        return self._worker is not None

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every stored memory has a vector.

        In background mode this waits for the worker (at most ``timeout`` seconds) and
        raises :class:`~htm_core.errors.EmbeddingError` on timeout or when the embedder
        keeps failing (the memories stay stored and pending). Otherwise it embeds any
        memories left without a vector (by a crashed background run) right here.

        >>> with HTM(database_url=":memory:", embedder="hashing",
        ...          background_embeddings=True) as htm:
        ...     _ = htm.add("User prefers Vim keybindings")
        ...     htm.flush(timeout=30)
        ...     htm.stats().pending_embeddings
        0
        """
        if self._embedder_mismatch:
            raise EmbedderMismatchError(
                f"the store's vectors are from another embedder than {self._embedder_name!r}; "
                "call reembed() to rebuild them")
        if self._worker is not None:
            self._worker.flush(timeout)
            return
        while self._fill_pending(self._embed_batch_size):
            pass

    def reembed(self, *, batch_size: int = 256, progress: bool = True,
                force: bool = False) -> int:
        """Rebuild the store's vectors with this instance's embedder; return how many.

        When the store's vectors come from another embedder (open it with
        ``allow_embedder_mismatch=True``), every vector is dropped first and then each
        visible memory is embedded again, ``batch_size`` at a time, with a tqdm progress
        bar when tqdm is installed and ``progress`` is True. It is resumable: if it is
        interrupted, calling it again continues with the memories still missing a
        vector. ``force=True`` starts over even when the store already carries this
        embedder's name (e.g. the model behind an Ollama name changed). Every vector is
        computed anew (no cache is used); memories whose text the embedder rejects are
        marked and skipped, and not counted.

        >>> with HTM(database_url=":memory:", embedder="hashing") as htm:
        ...     _ = htm.add("User prefers Vim keybindings")
        ...     htm.reembed(progress=False, force=True)
        1
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidBudgetError(f"batch_size must be a positive integer, got {batch_size!r}")
        with self._fill_lock:
            info = self._store.embedding_info()
            if info is not None and (force or info[0] != self._embedder_name):
                logger.info("re-embedding %s: dropping vectors from %s", self._store.url, info[0])
                self._store.reset_embeddings()
            self._embedder_mismatch = False
            with self._embed_lock:  # vectors cached under this name may be from an old model
                self._embed_cache.clear()
        total = self._store.counts(self.robot).missing_embeddings
        bar: Any = None
        if progress:
            try:
                from tqdm import tqdm
            except ImportError:
                logger.info("re-embedding %d memories (pip install tqdm for a progress bar)",
                            total)
            else:
                bar = tqdm(total=total, desc=f"re-embedding with {self._embedder_name}",
                           unit="memory")
        done = 0
        try:
            while True:
                embedded, failed = self._fill_once(batch_size, fresh=True)
                if not embedded + failed:
                    break
                done += embedded
                if bar is not None:
                    bar.update(embedded + failed)
        finally:
            if bar is not None:
                bar.close()
        return done

    # -- adding ----------------------------------------------------------------------

    def _record(self, content: Any, *, importance: Any = None, key: Any = None,
                tags: Iterable[str] | str | None = (), metadata: Any = None,
                created_at: Any = None) -> NewMemory:
        content = check_content(content)
        importance = (self._enrichment.importance_for(content) if importance is None
                      else check_importance(importance))
        explicit = key is not None
        key = check_key(key) if explicit else generated_key(self.robot, content)
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, Mapping):
            raise ValidationError(f"metadata must be a dict, got {type(metadata).__name__}")
        try:
            json.dumps(metadata, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"metadata must be JSON-serialisable: {exc}") from None
        if created_at is None:
            when = self._clock()
        elif isinstance(created_at, datetime):
            when = to_aware(created_at, self._clock().tzinfo)
        else:
            raise ValidationError(f"created_at must be a datetime, got {created_at!r}")
        return NewMemory(
            key=key, content=content, robot=self.robot, importance=importance,
            token_count=self._counter.count(content),
            created_at=when.astimezone(timezone.utc),
            tags=self._enrichment.tags_for(content, check_tags(tags)),
            metadata=dict(metadata), explicit_key=explicit,
        )

    def add(
        self,
        content: str,
        *,
        importance: float | None = None,
        key: str | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> Memory:
        """Remember ``content``: durable in the long-term store, then in working memory.

        Args:
            content: the text; not empty, no NUL characters.
            importance: 0 to 10; drives eviction and the ``important`` / ``balanced``
                contexts. When omitted: 1.0, or the ``importance_scorer``'s score (a
                rule-based scorer inline, a model-backed one later in the background).
            key: a unique key (any robot); default a stable key from robot + content, so
                the same content added again by this robot touches the existing memory.
            tags: hierarchical tags such as ``"user:preferences:editor"``.
            metadata: any JSON-serialisable dict.
            created_at: when it happened (to import history); default now.

        Returns:
            The stored :class:`~htm_core.models.Memory`; ``in_working_memory`` is False
            when it is larger than the whole working-memory budget (it is stored long-term
            only and a warning is logged).

        >>> with HTM(database_url=":memory:", embedder="hashing") as htm:
        ...     htm.add("User prefers Vim keybindings", importance=9.0, key="pref-vim").key
        'pref-vim'
        """
        return self.add_many([{"content": content, "importance": importance, "key": key,
                               "tags": tags, "metadata": metadata, "created_at": created_at}])[0]

    @instrumented("add", count=len)
    def add_many(self, items: Iterable[str | Mapping[str, Any]], *,
                 working_memory: bool = True) -> list[Memory]:
        """Add a batch in one transaction, embedding in one call: all or nothing.

        Each item is a string or a dict of :meth:`add`'s keyword arguments (with
        ``content``). Every item is validated before anything is written. With
        ``working_memory=False`` the memories are stored long-term only (bulk imports,
        documents, summaries).
        """
        return self._add_items(items, working_memory=working_memory)

    def _add_items(self, items: Iterable[str | Mapping[str, Any]], *, working_memory: bool = True,
                   embed_texts: Sequence[str] | None = None) -> list[Memory]:
        records = []
        importance_given: list[bool] = []
        for i, item in enumerate(items):
            if isinstance(item, str):
                item = {"content": item}
            if not isinstance(item, Mapping) or "content" not in item:
                raise InvalidContentError(
                    f"item {i} must be a string or a dict with 'content', got {item!r:.80}")
            unknown = set(item) - {"content", "importance", "key", "tags", "metadata",
                                   "created_at"}
            if unknown:
                raise ValidationError(f"item {i} has unknown fields {sorted(unknown)}")
            importance_given.append(item.get("importance") is not None)
            records.append(self._record(**{k: v for k, v in item.items()
                                           if v is not None or k == "content"}))
        if not records:
            return []
        contents: dict[str, str] = {}
        for i, record in enumerate(records):
            if contents.setdefault(record.key, record.content) != record.content:
                raise DuplicateKeyError(
                    f"item {i} reuses key {record.key!r} for different content within this batch; "
                    "give each memory its own key (nothing was stored)")
        if self._worker is None and not self._embedder_mismatch:
            vectors = self._embed_documents(list(embed_texts) if embed_texts is not None
                                            else [embed_text(r.content, r.metadata)
                                                  for r in records])
            records = [NewMemory(**{**r.__dict__, "embedding": v,
                                    "embedder": self._embedder_name})
                       for r, v in zip(records, vectors, strict=True)]
        records = [r if given else replace(r, importance_given=False)
                   for r, given in zip(records, importance_given, strict=True)]
        with self._lock:
            if working_memory:
                self._sync()
                try:
                    results, applied = self._store.add_and_enter(
                        records, expected_version=self._resident.version,
                        working=lambda rs: self._resident.stage_enter([r.memory for r in rs]))
                except BaseException:
                    self._resident.rollback()
                    raise
                self._after_change(applied)
            else:
                results = self._store.add_many(records)
            memories = [r.memory for r in results]
        created = [(r.memory, given) for r, given in zip(results, importance_given, strict=True)
                   if r.created]
        self._enrichment.added([m for m, _ in created], [g for _, g in created])
        if self._worker is not None:
            self._worker.wake()
        return memories

    # -- working memory --------------------------------------------------------------

    def _sync(self) -> None:
        """Bring working memory up to date with the store (one cheap read when nothing moved)."""
        evicted = self._resident.sync()
        if evicted:
            self.metrics.evicted(len(evicted))
            self._enrichment.evicted(evicted)

    def _write_change(self, change: WorkingChange) -> WorkingResult | None:
        """Write a staged working-memory change; undo it in the process if that fails."""
        try:
            if change.put or change.evict:
                result = self._store.apply_working(change,
                                                   expected_version=self._resident.version)
            else:
                self._store.touch(change.touch, at=change.at)
                result = None
        except BaseException:
            self._resident.rollback()
            raise
        self._after_change(result)
        return result

    def _after_change(self, result: WorkingResult | None) -> None:
        evicted = self._resident.commit(result)
        self.metrics.evicted(len(evicted))
        self._enrichment.evicted(evicted)

    def clear_working_memory(self) -> int:
        """Empty this robot's working memory. Long-term memory is untouched (never-forget)."""
        with self._lock:
            return self._resident.clear()

    # -- enrichment and documents ----------------------------------------------------

    def _add_summary(self, key: str, text: str, source_keys: list[str], robot: str) -> None:
        item = {"content": text, "key": key, "tags": [SUMMARY_TAG],
                "metadata": {"source_keys": source_keys}}
        if robot == self.robot:
            self.add_many([item], working_memory=False)
            return
        # Another robot's job done by this runner: the summary is that robot's memory.
        record = replace(self._record(**item), robot=robot)
        if self._worker is None and not self._embedder_mismatch:
            record = replace(record, embedding=self._embed_documents([record.content])[0],
                             embedder=self._embedder_name)
        self._store.add_many([record])
        if self._worker is not None:
            self._worker.wake()

    def _refresh_importance(self, key: str, importance: float) -> None:
        with self._lock:
            item = self._wm.peek(key)
            memory = self._wm_memories.get(key)
            if item is None or memory is None:
                return
            memory.importance = importance
            self._wm.remove(key)  # re-entered with the new importance, nothing else changed
            self._wm.add(key, item.content, tokens=item.token_count, importance=importance,
                         created_at=item.created_at, last_accessed=item.last_accessed,
                         access_count=item.access_count, seq=item.seq,
                         access_seq=item.access_seq)

    def flush_enrichment(self, timeout: float | None = None) -> bool:
        """Wait until queued enrichment (tags, importance, summaries) is applied."""
        return self._enrichment.flush(timeout)

    def add_document(self, text: str, *, source: str, chunk_tokens: int = 400,
                     overlap: int = 40, tags: Iterable[str] = (),
                     importance: float | None = None) -> list[Memory]:
        """Store a (Markdown) document as chunks that keep their heading path.

        Chunks are stored long-term only (not in working memory), keyed by source and
        content, with ``source``, ``heading`` and ``heading_path`` in their metadata; each
        is embedded with its heading path in front so a question about a section finds it.
        Adding the same ``source`` again writes only the chunks that changed and forgets
        the ones no longer in the document (recoverable with ``restore`` until a purge).
        Returns the memories of every chunk of the current version, in order.
        """
        plan = plan_document(check_content(text), source=source, chunk_tokens=chunk_tokens,
                             overlap=overlap, count=self._counter.count)
        stored = self._store.keys_with_prefix(plan.prefix)
        diff = diff_document(plan, stored)
        extra = check_tags(tags)
        if diff.add:
            self._add_items([{"content": c.content, "key": c.key, "metadata": c.metadata,
                              "tags": extra, "importance": importance} for c in diff.add],
                            working_memory=False, embed_texts=[c.embed_text for c in diff.add])
        for key in diff.forget:
            self.forget(key, confirm=True)
        return [m for m in (self._store.get(k) for k in plan.keys) if m is not None]

    # -- recall ----------------------------------------------------------------------

    @instrumented("recall")
    def recall(
        self,
        query: str,
        *,
        timeframe: Any = None,
        limit: int = 10,
        strategy: str = "hybrid",
        tags: Iterable[str] | str | None = None,
        robot: str | None = None,
        neighbors: int | None = None,
    ) -> list[Hit]:
        """Find the memories most relevant to ``query``; they enter working memory.

        Args:
            query: plain text; any characters are safe (they are never parsed as a query
                language).
            timeframe: ``None``, a phrase (``"last 7 days"`` rolling, ending now;
                ``"last week"`` the previous calendar week; ``"May 2023"``,
                ``"2023-05-01..2023-06-01"``), a ``timedelta`` or a (start, end) pair; see
                :mod:`htm_core.timeframe`.
            limit: how many hits at most (1 to 10,000).
            strategy: ``"hybrid"`` (default), ``"vector"`` or ``"fulltext"``.
            tags: only memories carrying one of these tags or a tag below one.
            robot: only memories written by this robot (default: every robot).
            neighbors: hybrid only: how many memories stored next to a hit (same robot,
                close in time, e.g. the turns around it in a conversation) share its
                relevance; 0 turns this off. Default: the ``RetrievalConfig``'s (1).

        Returns:
            :class:`~htm_core.models.Hit` objects, best first.
        """
        filters, strategy, limit = self._recall_args(query, timeframe, limit, strategy, tags,
                                                     robot)
        if self._embedder_mismatch:
            if strategy == "vector":
                raise EmbedderMismatchError(
                    f"vector recall needs the store re-embedded with {self._embedder_name!r}; "
                    "call reembed() first, or recall with strategy='fulltext'")
            strategy = "fulltext"
        config = self._retrieval
        if neighbors is not None:
            if isinstance(neighbors, bool) or not isinstance(neighbors, int) \
                    or not 0 <= neighbors <= 20:
                raise ValidationError(
                    f"neighbors must be an integer from 0 to 20, got {neighbors!r}")
            config = config.with_options(neighbors=neighbors)
        ranked = search(self._store, query=query, query_vector=lambda: self._embed_query(query),
                        strategy=strategy, limit=limit, filters=filters, config=config,
                        now=self._clock())
        memories = self._store.get_many([r.id for r in ranked])
        now = self._clock()
        by_id = {m.id: m for m in memories}
        refused: frozenset[str] = frozenset()
        with self._lock:
            self._sync()
            for m in memories:
                m.access_count += 1
                m.last_accessed = now.astimezone(timezone.utc)
            if memories:
                # Least relevant first, so a later (better) hit never evicts an earlier one.
                result = self._write_change(self._resident.stage_enter(
                    memories[::-1], accessed=now, touch=list(by_id)))
                refused = result.refused if result is not None else refused
        # A hit forgotten since it was read is not returned (nor entered: the store refused it).
        return [Hit(memory=by_id[r.id], score=r.score, ranks=dict(r.ranks))
                for r in ranked if r.id in by_id and by_id[r.id].key not in refused]

    def _recall_args(self, query: Any, timeframe: Any, limit: Any, strategy: Any, tags: Any,
                     robot: Any) -> tuple[SearchFilters, str, int]:
        if not isinstance(query, str) or not query.strip():
            raise InvalidContentError("query is empty; give some text to recall by")
        check_content(query)
        strategy = check_recall_strategy(strategy)
        limit = check_limit(limit)
        start, end = parse_timeframe(timeframe, clock=self._clock)
        if robot is not None:
            check_key(robot)
        return SearchFilters(start=start, end=end, robot=robot, tags=check_tags(tags)), \
            strategy, limit

    def retrieve(self, key: str) -> Memory | None:
        """The memory under ``key`` (exact lookup), or None; counts as an access."""
        memory = self._store.get(check_key(key))
        with self._lock:
            self._sync()
            if memory is not None:
                now = self._clock()
                memory.access_count += 1
                memory.last_accessed = now.astimezone(timezone.utc)
                self._write_change(self._resident.stage_touch([memory.key], at=now,
                                                              touch=[memory.id]))
        return memory

    # -- context ---------------------------------------------------------------------

    def create_context(self, strategy: str = "balanced", max_tokens: int | None = None, *,
                       include_summaries: int = 0, query: str | None = None,
                       recall_limit: int = 10, recall_strategy: str = "hybrid",
                       tags: Iterable[str] | str | None = None,
                       robot: str | None = None, scope_working: bool = False) -> Context:
        """Assemble working memory into prompt text within ``max_tokens``.

        ``strategy`` is ``"balanced"`` (importance × recency, default), ``"recent"`` or
        ``"important"``. ``max_tokens`` defaults to the working-memory budget; the text
        stays within it less the safety margin, counted by this instance's token
        counter. Deterministic for the same state.

        What leads the context, before working memory in strategy order:
        ``include_summaries`` newest summaries of evicted memories (written by a
        ``summariser`` in this process), then, with ``query``, what :meth:`recall` finds for
        it (``recall_limit``, ``recall_strategy``, ``tags``, ``robot``), most relevant first.

        With ``scope_working=True``, ``tags`` also scopes the working-memory part (and the
        summaries): only memories carrying one of the tags (or a tag below one) are candidates,
        taken in strategy order within the same budget (one user's context, say, out of a
        working memory that several users' turns share).
        """
        check_strategy(strategy)
        limit = self._wm.max_tokens if max_tokens is None else check_max_tokens(max_tokens)
        budget = self._wm.budget_for(limit)
        scope = check_tags(tags) if scope_working else ()
        if scope_working and not scope:
            raise ValidationError("scope_working=True scopes the context by tags; give tags=[...] "
                                  "(or leave scope_working False for the whole working memory)")
        in_scope = tag_filter(scope)
        if isinstance(include_summaries, bool) or not isinstance(include_summaries, int) \
                or not 0 <= include_summaries <= 50:
            raise InvalidBudgetError(
                f"include_summaries must be an integer from 0 to 50, got {include_summaries!r}")
        summaries: list[Memory] = []
        if include_summaries:
            newest = list(self._enrichment.summaries)[-include_summaries:][::-1]
            summaries = [m for m in (self._store.get(k) for k in newest) if m is not None
                         and (not scope or in_scope(m.tags))]
        recalled: list[Memory] = []
        if query is not None:
            recalled = [hit.memory for hit in self.recall(
                query, limit=recall_limit, strategy=recall_strategy, tags=tags, robot=robot)]
        with self._lock:
            self._sync()
            # scoped: every resident item in strategy order (a limit whose budget holds them
            # all), filtered by the tags; _fit then applies the context's own budget
            whole = math.ceil(self._wm.tokens / (1 - self._wm.safety_margin)) + 1
            items = self._wm.select(strategy, whole if scope else limit)
            resident = [m for m in (self._wm_memories.get(i.key) for i in items)
                        if m is not None and (not scope or in_scope(m.tags))]
        memories, text, tokens = self._fit([*summaries, *recalled, *resident], budget)
        return Context(text=text, memories=tuple(memories), tokens=tokens, strategy=strategy,
                       max_tokens=limit, budget=budget)

    def _fit(self, candidates: Sequence[Memory], budget: int) -> tuple[list[Memory], str, int]:
        """Take candidates in order (each key once) while their stored token counts fit,
        then recount the joined text with the counter and drop from the end until it fits
        (separators and token merges can make the text a little longer than the sum)."""
        chosen: list[Memory] = []
        seen: set[str] = set()
        used = 0
        for memory in candidates:
            cost = memory.token_count + (self._separator_tokens if chosen else 0)
            if memory.key not in seen and used + cost <= budget:
                chosen.append(memory)
                seen.add(memory.key)
                used += cost
        text = SEPARATOR.join(m.content for m in chosen)
        tokens = self._counter.count(text) if text else 0
        while chosen and tokens > budget:
            chosen.pop()
            text = SEPARATOR.join(m.content for m in chosen)
            tokens = self._counter.count(text) if text else 0
        return chosen, text, tokens

    # -- never forget ----------------------------------------------------------------

    @instrumented("forget")
    def forget(self, key: str, *, confirm: bool = False) -> Memory:
        """Hide a memory from recall, recoverably (``restore``), until ``purge``.

        Raises :class:`~htm_core.errors.ConfirmationRequiredError` unless ``confirm=True``
        and :class:`~htm_core.errors.NotFoundError` for an unknown or purged key (the memory
        is then out of this robot's working memory too). Every working memory holding the
        memory, in any process, drops it from its next call on.
        """
        key = check_key(key)
        if confirm is not True:
            raise ConfirmationRequiredError(
                f"forget({key!r}) hides the memory from recall; call forget({key!r}, "
                "confirm=True) to do it (it stays recoverable with restore until purge)")
        with self._lock:
            try:
                memory = self._store.forget(key, robot=self.robot, at=self._clock())
            finally:  # also when the key is gone (purged by another robot): out of here too
                self._resident.forget(key)
        return memory

    @instrumented("restore")
    def restore(self, key: str) -> Memory:
        """Bring back a forgotten memory. Raises ``NotFoundError`` for an unknown key."""
        return self._store.restore(check_key(key), robot=self.robot)

    def purge(self, *, confirm: bool = False, key: str | None = None) -> int:
        """Delete forgotten memories for good (all of them, or only ``key``).

        Only memories already forgotten are purged; returns how many were removed.
        """
        if confirm is not True:
            raise ConfirmationRequiredError(
                "purge() deletes forgotten memories permanently; call purge(confirm=True)")
        return self._store.purge(robot=self.robot, key=check_key(key) if key else None)

    # -- introspection ---------------------------------------------------------------

    def stats(self) -> Stats:
        """Working-memory and long-term figures for this robot and the whole store."""
        with self._lock:
            self._sync()
        counts = self._store.counts(self.robot)
        info = self._store.embedding_info()
        return Stats(
            robot=self.robot, backend=self._store.backend, database=self._store.url,
            working_memory_count=len(self._wm), working_memory_tokens=self._wm.tokens,
            working_memory_max_tokens=self._wm.max_tokens, eviction_policy=self._wm.policy,
            long_term_total=counts.total, long_term_robot=counts.robot,
            forgotten=counts.forgotten, robots=counts.robots,
            embedder=self._embedder_name, embedding_dim=info[1] if info else None,
            embedder_choice=self._embedder_choice, token_counter=self._counter.name,
            pending_embeddings=counts.missing_embeddings,
            failed_embeddings=counts.failed_embeddings,
            embedding_calls=self._embedding_calls, embedding_cache_hits=self._cache_hits,
            evictions=self._wm.evictions, schema_version=self._store.schema_version(),
            extra={"metrics": self.metrics.snapshot(),
                   "embed_batch_size": self._embed_batch_size,
                   "background_embeddings": self._worker is not None,
                   "failed_embedding_passes": self._worker.failures if self._worker else 0,
                   "enrichment": self._enrichment.stats(),
                   "embedder_mismatch": self._embedder_mismatch,
                   "embedding_failures": [
                       {"key": f.key, "error": f.error} for f in
                       (self._store.embedding_failures(limit=10)
                        if counts.failed_embeddings else [])]},
        )

    def robots(self) -> list[Robot]:
        """Every robot on the store."""
        return self._store.robots()

    def tags(self) -> dict[str, int]:
        """Every tag with its count of visible memories."""
        return self._store.tags()

    def operations(self, *, limit: int = 100, op: str | None = None,
                   robot: str | None = None) -> list[Operation]:
        """The operations log, newest first (add, touch, evict, forget, restore, purge...)."""
        return self._store.operations(limit=check_limit(limit), robot=robot, op=op)

    # -- async twins -----------------------------------------------------------------

    async def aadd(self, content: str, **kwargs: Any) -> Memory:
        """Async :meth:`add` (runs in a worker thread)."""
        return await asyncio.to_thread(self.add, content, **kwargs)

    async def aadd_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[Memory]:
        """Async :meth:`add_many`."""
        return await asyncio.to_thread(self.add_many, list(items))

    async def arecall(self, query: str, **kwargs: Any) -> list[Hit]:
        """Async :meth:`recall`."""
        return await asyncio.to_thread(self.recall, query, **kwargs)

    async def aretrieve(self, key: str) -> Memory | None:
        """Async :meth:`retrieve`."""
        return await asyncio.to_thread(self.retrieve, key)

    async def acreate_context(self, strategy: str = "balanced",
                              max_tokens: int | None = None, **kwargs: Any) -> Context:
        """Async :meth:`create_context` (same keywords)."""
        return await asyncio.to_thread(self.create_context, strategy, max_tokens, **kwargs)

    async def aforget(self, key: str, *, confirm: bool = False) -> Memory:
        """Async :meth:`forget`."""
        return await asyncio.to_thread(self.forget, key, confirm=confirm)

    async def aflush(self, timeout: float | None = None) -> None:
        """Async :meth:`flush`."""
        await asyncio.to_thread(self.flush, timeout)

