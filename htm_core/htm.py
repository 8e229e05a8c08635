"""``HTM``: the facade over working memory and long-term memory.

::

    with HTM(robot="assistant") as htm:
        htm.add("User prefers Vim keybindings", importance=9.0, key="pref-vim")
        hits = htm.recall("editor preferences", timeframe="last 7 days")

``HTM`` only wires its services together; see docs/architecture.md ("The facade") and, for
what every write guarantees, docs/reliability.md ("Coherence").
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import _intake
from ._async import twin
from ._embedding import EmbeddingService, check_batch_size
from ._forgetting import Forgetter
from ._intake import Intake
from ._introspection import Introspection
from ._listing import Lister
from ._native import SharedLock
from ._provenance import source_if_valid
from ._recalling import ContextMaker, Recaller
from ._versions import Versions, write_readding
from .background import FlushTimer
from .clock import Clock, local_now
from .config import Settings
from .consolidation.base import DigestStrategy
from .consolidation.service import Consolidator, Writers
from .enrich.attach import SUMMARY_TAG, FacadeEnrichment
from .enrich.base import ImportanceScorer, SummaryWriter, Tagger
from .enrich.documents import diff_document, plan_document
from .errors import ClosedError
from .models import Context, Hit, Memory, Operation, Page, Robot, Stats
from .observability import Metrics, instrumented
from .options import EmbeddingOptions, EnrichmentOptions, Observability, WorkingMemoryOptions, group
from .recall import RetrievalConfig
from .scope import ChatScope
from .store import LongTermStore, open_store
from .tokens import TokenCounter, resolve_counter
from .validation import check_content, check_max_tokens, check_name, check_tags
from .working import WorkingMemory
from .working.resident import ResidentSet

__all__ = ["HTM"]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def _open(method: Callable[Concatenate[HTM, P], R]) -> Callable[Concatenate[HTM, P], R]:
    """``method``, raising :class:`~htm_core.errors.ClosedError` once the ``HTM`` is closed."""

    @functools.wraps(method)
    def call(self: HTM, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._closed:
            raise ClosedError(
                f"HTM(robot={self.robot!r}) is closed; open a new HTM(...) on the store to go "
                "on (only close() may be called again)")
        return method(self, *args, **kwargs)

    return call


class HTM:
    """A two-tier memory for one robot over a (possibly shared) long-term store.

    Async: every public method that does I/O has a twin named ``a<name>`` (``aadd``,
    ``arecall``, ``acreate_context``, ``aclose``...) with exactly its signature, which runs
    the method without the event loop waiting on the database or the embedder: natively
    on PostgreSQL (see ``native_async``), else in a worker thread (``asyncio.to_thread``).
    A new public method gets its twin declared beside it
    (``a<name> = twin(<name>)``, :mod:`htm_core._async`; a test checks every pair).

    After :meth:`close`, every method but ``close`` raises
    :class:`~htm_core.errors.ClosedError`.

    Args:
        robot: this instance's name. Robots on one store share long-term memory and each
            has its own working memory. Default ``HTM_ROBOT`` or ``"default"``.
        database_url: a SQLite path / ``sqlite:///`` URL / ``":memory:"``, or a
            ``postgresql://`` URL. Default ``HTM_DATABASE_URL``, else a SQLite file in
            the user data directory.
        read_database_url: a streaming replica of a PostgreSQL ``database_url``: recalls'
            searches and lists read there once it has replayed this process's writes
            (docs/postgres.md, "Read replicas"). Default ``HTM_READ_DATABASE_URL``.
        working_memory_tokens: the working-memory budget (default 128,000). A budget given
            here is recorded on the robot (``Robot.working_memory_tokens``), so that tools
            looking at the store, such as ``htm ui``, know what the robot runs with.
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
        working / embedding / enrichment / observability: the settings below in groups
            (:class:`~htm_core.options.WorkingMemoryOptions`, ``EmbeddingOptions``,
            ``EnrichmentOptions``, ``Observability``), to build once and share between
            ``HTM`` objects. Each keyword below is a shortcut for one field of a group;
            giving a group and one of its keywords is a ``ValidationError``.
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
        native_async: run the async methods (``arecall``, ``aadd``, ...) natively on a
            store that can (PostgreSQL): the sync method runs in a greenlet on the event
            loop's thread and waits for the database on the loop (psycopg's async driver),
            so one loop serves any number of calls at once. False, or another store: each
            runs in a worker thread (:func:`asyncio.to_thread`). See docs/postgres.md,
            "Async".
        read_only: open the (SQLite) store for reading only: recall, retrieve,
            create_context and export work, access statistics and membership are not saved
            (one warning), writes raise :class:`~htm_core.errors.ReadOnlyError`. A file that
            cannot be written is opened this way anyway, with a warning.
    """

    def __init__(
        self,
        robot: str | None = None,
        *,
        database_url: str | Path | None = None,
        store: LongTermStore | None = None,
        read_only: bool = False,
        read_database_url: str | None = None,
        native_async: bool = True,
        clock: Clock | None = None,
        retrieval: RetrievalConfig | None = None,
        working: WorkingMemoryOptions | None = None,
        embedding: EmbeddingOptions | None = None,
        enrichment: EnrichmentOptions | None = None,
        observability: Observability | None = None,
        working_memory_tokens: int | None = None,
        eviction: str | None = None,
        context_margin: float | None = None,
        token_counter: TokenCounter | Any = None,
        embedder: Any = None,
        embed_batch_size: int | None = None,
        background_embeddings: bool | None = None,
        allow_embedder_mismatch: bool | None = None,
        importance_scorer: ImportanceScorer | None = None,
        tagger: Tagger | None = None,
        summariser: SummaryWriter | None = None,
        enrichment_options: Mapping[str, Any] | None = None,
        telemetry: bool | None = None,
        meter_provider: Any = None,
        tracer_provider: Any = None,
    ) -> None:
        working = group(WorkingMemoryOptions, working, "working", {
            "working_memory_tokens": ("tokens", working_memory_tokens),
            "eviction": ("eviction", eviction), "context_margin": ("context_margin", context_margin),
            "token_counter": ("token_counter", token_counter)})
        embedding = group(EmbeddingOptions, embedding, "embedding", {
            "embedder": ("embedder", embedder), "embed_batch_size": ("batch_size", embed_batch_size),
            "background_embeddings": ("background", background_embeddings),
            "allow_embedder_mismatch": ("allow_mismatch", allow_embedder_mismatch)})
        enrichment = group(EnrichmentOptions, enrichment, "enrichment", {
            "importance_scorer": ("importance_scorer", importance_scorer),
            "tagger": ("tagger", tagger), "summariser": ("summariser", summariser),
            "enrichment_options": ("runner", enrichment_options)})
        observability = group(Observability, observability, "observability", {
            "telemetry": ("export", telemetry), "meter_provider": ("meter_provider", meter_provider),
            "tracer_provider": ("tracer_provider", tracer_provider)})
        self._connect(robot, database_url, store, read_only=read_only, clock=clock,
                   read_database_url=read_database_url,
                   retrieval=retrieval, working=working, embedding=embedding,
                   enrichment=enrichment, observability=observability)
        #: Whether the async methods run natively (see :mod:`htm_core._native`): asked
        #: for by ``native_async`` and possible with the store (PostgreSQL), else they
        #: run the sync method in a worker thread.
        self.native_async = native_async and bool(getattr(self._store, "native_async", False))

    def _connect(self, robot: str | None, database_url: str | Path | None,
              store: LongTermStore | None, *, read_only: bool, clock: Clock | None,
              read_database_url: str | None,
              retrieval: RetrievalConfig | None, working: WorkingMemoryOptions,
              embedding: EmbeddingOptions, enrichment: EnrichmentOptions,
              observability: Observability) -> None:
        """Resolve the settings, open the store and assemble the services over it."""
        chosen = embedding.embedder
        self.settings = settings = Settings.resolve(
            robot=robot, database_url=str(database_url) if database_url is not None else None,
            read_database_url=read_database_url,
            working_memory_tokens=working.tokens, eviction=working.eviction,
            context_margin=working.context_margin,
            embedder=chosen if isinstance(chosen, str) else None)
        self.robot = check_name(settings.robot, what="robot name")
        self.metrics = Metrics(robot=self.robot, telemetry=observability.export,
                               meter_provider=observability.meter_provider,
                               tracer_provider=observability.tracer_provider)
        self._clock: Clock = clock or local_now
        self._lock = SharedLock()
        self._retrieval = retrieval or RetrievalConfig()
        self._wm = WorkingMemory(
            check_max_tokens(settings.working_memory_tokens, name="working_memory_tokens"),
            settings.eviction, clock=self._clock, safety_margin=settings.context_margin)
        self._counter = resolve_counter(working.token_counter)
        check_batch_size(embedding.batch_size)
        self._owns_store = store is None
        self._store: LongTermStore = store if store is not None else open_store(
            settings.database_url, read_only=read_only,
            read_database_url=settings.read_database_url)
        try:
            self._assemble(chosen if chosen is not None and not isinstance(chosen, str)
                           else settings.embedder, embedding=embedding, enrichment=enrichment,
                           budget=self._wm.max_tokens if working.tokens is not None else None)
        except BaseException:
            if self._owns_store:
                self._store.close()
            raise
        self._start(embedding.background)

    def _assemble(self, embedder: Any, *, embedding: EmbeddingOptions,
                  enrichment: EnrichmentOptions, budget: int | None) -> None:
        """Make the services over the open store, each given only the parts it uses."""
        store, robot, clock, lock = self._store, self.robot, self._clock, self._lock
        self._embedding = EmbeddingService(
            store, embedder, counter=self._counter, metrics=self.metrics,
            batch_size=embedding.batch_size, window_words=self._retrieval.window_words)
        self._enrichment = FacadeEnrichment(
            store=store, robot=robot, importance_scorer=enrichment.importance_scorer,
            tagger=enrichment.tagger, summariser=enrichment.summariser,
            add_summary=self._add_summary, refresh_importance=self._refresh_importance,
            options=enrichment.runner)
        self._embedding.check_store(allow_mismatch=embedding.allow_mismatch)
        self._intake = Intake(robot, clock=clock, counter=self._counter,
                              enrichment=self._enrichment)
        # A budget the caller gave is recorded on the robot, for tools that look at the store.
        store.ensure_robot(robot, working_memory_tokens=budget)
        self._resident, self._write_behind = self._resident_set()
        self._lister = Lister(store, clock=clock)
        self._versions = Versions(store, robot, intake=self._intake, embedding=self._embedding,
                                  resident=self._resident, lock=lock, clock=clock)
        self._forgetter = Forgetter(store, robot, resident=self._resident, lock=lock,
                                    clock=clock)
        self._consolidator = Consolidator(store, Writers(
            add=lambda items: self._add_items(items, working_memory=False),
            update=self._versions.update,
            forget=lambda key: self._forgetter.forget(key, confirm=True),
            purge=lambda key: self._forgetter.purge(confirm=True, key=key)),
            clock=clock, token_counter=self._counter, runner_options=enrichment.runner)
        self._recaller = Recaller(store, embedding=self._embedding, resident=self._resident,
                                  lock=lock, clock=clock, retrieval=self._retrieval)
        self._contexts = ContextMaker(store, wm=self._wm, resident=self._resident, lock=lock,
                                      counter=self._counter, enrichment=self._enrichment,
                                      recall=self.recall, clock=clock)
        self._introspection = Introspection(
            store, robot, resident=self._resident, lock=lock, embedding=self._embedding,
            counter=self._counter, metrics=self.metrics, enrichment=self._enrichment)

    def _start(self, background_embeddings: bool) -> None:
        """Start the background threads: enrichment, and the embedding worker if asked."""
        self._closing = self._closed = False
        self._enrichment.start()
        if background_embeddings:
            self._embedding.start_worker(self.robot)
        logger.info("htm robot=%s store=%s embedder=%s counter=%s", self.robot, self._store.url,
                    self._embedding.name, self._counter.name)

    # -- lifecycle -------------------------------------------------------------------

    @_open
    def __enter__(self) -> HTM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _resident_set(self) -> tuple[ResidentSet, FlushTimer]:
        """The store's view of this robot's working memory, loaded, with the timer that
        writes its recalls behind. Neither holds this object: an ``HTM`` dropped without
        ``close()`` is collected, and its pending writes are still made."""
        resident = ResidentSet(self._wm, self._store, self.robot, clock=self._clock,
                               on_evicted=_weakly(self._evicted))
        timer = FlushTimer(resident.flush, self._lock)
        resident.on_pending = timer.arm
        resident.refresh()
        return resident, timer

    def close(self) -> None:
        """Write what recent recalls left pending, stop the background threads and close
        the store (if this instance opened it).

        Every ``add``, ``update``, ``forget``, ``restore`` and ``purge`` was durable when it
        returned. A recall's part (access statistics, working-memory membership, eviction
        log lines) is written behind: here, or at the latest
        ``htm_core.working.resident.FLUSH_AFTER_SECONDS`` after the recall by a timer
        thread, or when the interpreter exits normally (see docs/reliability.md, "Reads
        written behind"); a SIGKILL or power loss before then loses that part only. A
        failure to write it here is logged, not raised.
        """
        if getattr(self, "_closing", True):
            return
        self._closing = True
        try:
            self._consolidator.stop()  # a job running until here writes through the services
            with self._lock:
                self._resident.close()
                self._write_behind.close()
            self._embedding.stop()
            self._enrichment.stop()  # a job running until here may still add its summary
        finally:
            self._closed = True
        if self._owns_store:
            self._store.close()

    aclose = twin(close, native=False)

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
        return self._embedding.embedder

    @property
    def token_counter(self) -> TokenCounter:
        """The token counter in use."""
        return self._counter

    @property
    def clock(self) -> Clock:
        """Where this instance reads the time (the ``clock`` it was given, else the local
        clock): companions that keep time beside it (an ``HTMStore``'s expiry, the
        inspector) read the same one."""
        return self._clock

    @_open
    def migrate(self) -> int:
        """Create or upgrade the store's schema; return the version now in place."""
        return self._store.migrate()

    amigrate = twin(migrate, native=False)

    # -- embeddings ------------------------------------------------------------------

    @_open
    def retry_failed_embeddings(self) -> int:
        """Give the memories whose embedding failed another try; return how many.

        Their failure marks are cleared (for every process on the store) and they are
        embedded again: by the worker in background mode (:meth:`flush` waits for it), here
        otherwise. One that fails again is marked again with the new reason.
        """
        return self._embedding.retry_failed()

    aretry_failed_embeddings = twin(retry_failed_embeddings, native=False)

    @property
    def background_embeddings(self) -> bool:
        """Whether a worker thread computes embeddings after ``add`` returns."""
        return self._embedding.worker is not None

    @_open
    def flush(self, timeout: float | None = None) -> None:
        """Write what recent recalls changed in working memory (access statistics,
        membership, eviction lines: written behind, see docs/reliability.md), then wait
        until every stored memory has a vector.

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
        with self._lock:
            self._resident.flush()
        self._embedding.flush(timeout)

    aflush = twin(flush, native=False)

    @_open
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
        return self._embedding.reembed(self.robot, batch_size=batch_size, progress=progress,
                                       force=force)

    areembed = twin(reembed, native=False)

    # -- adding ----------------------------------------------------------------------

    @_open
    def add(
        self,
        content: str,
        *,
        importance: float | None = None,
        key: str | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
        kind: str | None = None,
        source: str | None = None,
        confidence: float | None = None,
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
            kind: what the memory is, one of :data:`htm_core.consolidation.KINDS`. When
                omitted, rules recognise plain first-person statements ("my name is",
                "I prefer", "remember that") and set their kind and confidence; anything
                else is ``episodic``. See docs/consolidation.md ("Kinds").
            source: where it came from, free text (``"user"``, ``"import:notes.md"``).
            confidence: how sure the kind and content are, 0 to 1.

        Returns:
            The stored :class:`~htm_core.models.Memory`; ``in_working_memory`` is False
            when it is larger than the whole working-memory budget (it is stored long-term
            only and a warning is logged).

        >>> with HTM(database_url=":memory:", embedder="hashing") as htm:
        ...     htm.add("User prefers Vim keybindings", importance=9.0, key="pref-vim").key
        'pref-vim'
        """
        return self.add_many([{"content": content, "importance": importance, "key": key,
                               "tags": tags, "metadata": metadata, "created_at": created_at,
                               "kind": kind, "source": source, "confidence": confidence}])[0]

    aadd = twin(add)

    @_open
    @instrumented("add", count=len)
    def add_many(self, items: Iterable[str | Mapping[str, Any]], *,
                 working_memory: bool = True) -> list[Memory]:
        """Add a batch in one transaction, embedding in one call: all or nothing.

        Each item is a string or a dict of :meth:`add`'s keyword arguments (with
        ``content``). Every item is validated before anything is written. With
        ``working_memory=False`` the memories are stored long-term only (bulk imports,
        documents, summaries). A batch of 256 or more holds Python's cyclic garbage
        collector off while it is checked and while it is written, not while the embedder
        runs (:func:`htm_core._intake.cycles_paused`).
        """
        return self._add_items(items, working_memory=working_memory)

    aadd_many = twin(add_many, listed="items")

    def _add_items(self, items: Iterable[str | Mapping[str, Any]], *, working_memory: bool = True,
                   embed_texts: Sequence[str] | None = None) -> list[Memory]:
        items = items if isinstance(items, Sequence) else list(items)
        with _intake.cycles_paused(len(items)):  # not while the embedder (user code) runs
            records = self._intake.batch(items)
        if not records:
            return []
        records = self._embedding.with_vectors(records, embed_texts, in_place=True)
        # A text an update replaced may be re-added under a new key (write_readding).
        with _intake.cycles_paused(len(records)), self._lock:
            results, records = write_readding(
                self._store, records, self._resident.add_and_enter if working_memory
                else self._store.add_many)
            memories = [r.memory for r in results]
        created = [(r.memory, n.importance_given) for r, n in zip(results, records, strict=True)
                   if r.created]
        self._embedding.add_windows([m for m, _ in created])
        _intake.after_commit(len(memories), "queueing their enrichment", lambda: (
            self._enrichment.added([m for m, _ in created], [g for _, g in created])))
        self._embedding.wake()
        return memories

    # -- working memory --------------------------------------------------------------

    def _evicted(self, pairs: list[tuple[str, str]]) -> None:
        self.metrics.evicted(len(pairs))
        self._enrichment.evicted(pairs)

    @_open
    def clear_working_memory(self) -> int:
        """Empty this robot's working memory. Long-term memory is untouched (never-forget)."""
        with self._lock:
            return self._resident.clear()

    aclear_working_memory = twin(clear_working_memory)

    # -- enrichment and documents ----------------------------------------------------

    def _add_summary(self, key: str, text: str, source_keys: list[str], robot: str) -> None:
        item = {"content": text, "key": key, "tags": [SUMMARY_TAG], "kind": "summary",
                "metadata": {"source_keys": source_keys}}
        if robot == self.robot:
            self.add_many([item], working_memory=False)
            return
        # Another robot's job done by this runner: the summary is that robot's memory.
        record = replace(self._intake.record(**item), robot=robot)
        self._store.add_many(self._embedding.with_vectors([record], [record.content]))
        self._embedding.wake()

    def _refresh_importance(self, key: str, importance: float) -> None:
        with self._lock:
            self._resident.reimportance(key, importance)

    @_open
    def flush_enrichment(self, timeout: float | None = None) -> bool:
        """Wait until queued enrichment (tags, importance, summaries) is applied."""
        return self._enrichment.flush(timeout)

    aflush_enrichment = twin(flush_enrichment, native=False)

    @_open
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
                              "tags": extra, "importance": importance, "kind": "document",
                              "source": source_if_valid(source)} for c in diff.add],
                            working_memory=False, embed_texts=[c.embed_text for c in diff.add])
        for key in diff.forget:
            self.forget(key, confirm=True)
        return [m for m in (self._store.get(k) for k in plan.keys) if m is not None]

    aadd_document = twin(add_document)

    # -- recall ----------------------------------------------------------------------

    @_open
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
        include_history: bool = False,
        min_score: float | None = None,
        rerank: Any = None,
        kinds: str | Iterable[str] | None = None,
        sources: str | Iterable[str] | None = None,
        min_confidence: float | None = None,
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
            include_history: also rank superseded versions of memories (see
                :meth:`update`); such a hit has ``hit.memory.superseded`` True and does not
                enter working memory.
            min_score: drop hits scoring below this (0 to 1, :mod:`htm_core.scoring`).
            rerank: a ``(query, texts) -> scores`` callable or a document compressor.
            kinds: only memories of this kind or these kinds (``"fact"``,
                ``["fact", "preference"]``); applied inside each search, so up to
                ``limit`` hits of those kinds come back. Default: every kind but
                ``digest`` (``strategy="tiered"`` reads digests on its way down).
            sources: only memories whose ``source`` is this one or one of these, exactly
                (``"user"`` is neither ``"User"`` nor ``"user:chat"``); applied inside each
                search like ``kinds``. Default: any source, or none.
            min_confidence: only memories whose ``confidence`` is at least this (0 to 1);
                a memory without a confidence never passes. Applied inside each search.

        Returns:
            :class:`~htm_core.models.Hit` objects, best first, scores never increasing.
        """
        return self._recaller.recall(query, timeframe=timeframe, limit=limit, strategy=strategy,
                                     tags=tags, robot=robot, neighbors=neighbors,
                                     include_history=include_history, min_score=min_score,
                                     rerank=rerank, kinds=kinds, sources=sources,
                                     min_confidence=min_confidence)

    arecall = twin(recall)

    @_open
    def retrieve(self, key: str) -> Memory | None:
        """The memory under ``key`` (exact lookup), or None; counts as an access."""
        return self._recaller.retrieve(key)

    aretrieve = twin(retrieve)

    # -- context ---------------------------------------------------------------------

    @_open
    def create_context(self, strategy: str = "balanced", max_tokens: int | None = None, *,
                       include_summaries: int = 0, query: str | None = None,
                       recall_limit: int = 10, recall_strategy: str = "hybrid",
                       tags: Iterable[str] | str | None = None,
                       robot: str | None = None, scope_working: bool = False,
                       recall_kinds: str | Iterable[str] | None = None) -> Context:
        """Assemble working memory into prompt text within ``max_tokens``.

        ``strategy`` is ``"balanced"`` (importance × recency, default), ``"recent"`` or
        ``"important"``. ``max_tokens`` defaults to the working-memory budget; the text
        stays within it less the safety margin, counted by this instance's token
        counter. Deterministic for the same state.

        What leads the context, before working memory in strategy order:
        ``include_summaries`` newest summaries of evicted memories (written by a
        ``summariser`` in this process), then, with ``query``, what :meth:`recall` finds for
        it (``recall_limit``, ``recall_strategy``, ``tags``, ``robot``; ``recall_kinds`` as
        :meth:`recall`'s ``kinds``), most relevant first.

        With ``scope_working=True``, ``tags`` also scopes the working-memory part (and the
        summaries): only memories carrying one of the tags (or a tag below one) are candidates,
        taken in strategy order within the same budget (one user's context, say, out of a
        working memory that several users' turns share).
        """
        return self._contexts.create_context(
            strategy, max_tokens, include_summaries=include_summaries, query=query,
            recall_limit=recall_limit, recall_strategy=recall_strategy, tags=tags, robot=robot,
            scope_working=scope_working, recall_kinds=recall_kinds)

    acreate_context = twin(create_context)

    # -- versions --------------------------------------------------------------------

    @_open
    def update(self, key: str, content: str, *, importance: float | None = None,
               tags: Iterable[str] | str | None = None,
               metadata: Mapping[str, Any] | None = None,
               expected_version: int | None = None, kind: str | None = None,
               source: str | None = None, confidence: float | None = None) -> Memory:
        """Replace the memory under ``key`` with a new version; the old one is kept.

        The memory keeps its key, id and creation time and stays in every working memory
        that holds it (each shows the new text from its next call on). Its previous
        version is kept as history (:meth:`versions`, ``get(key, version=n)``,
        ``recall(..., include_history=True)``). The new text is embedded as :meth:`add`
        embeds. Compare-and-set: only the fields that differ from the version read are
        written, compared again under the row's lock; a concurrent update of other fields
        is kept, one of the same fields to another value is a ``ConflictError`` (see
        docs/api.md, "Compare-and-set updates").

        Args:
            key: the memory's key.
            content: the new text (the current one to change only other fields).
            importance, tags, metadata, kind, source, confidence: the new values (tags
                and metadata replace the old ones); default: unchanged (an update is not
                classified by the kind rules).
            expected_version: the version the caller read; when the memory is no longer
                at it, ``ConflictError`` and nothing is written.

        Returns:
            The memory as it now is. When nothing differs, no version is made.

        Raises:
            NotFoundError: an unknown or purged key, or a forgotten memory (``restore``
                it first). ConflictError: see above. Bad input raises as for :meth:`add`.

        >>> from htm_core import HTM
        >>> with HTM(database_url=":memory:", embedder="hashing") as htm:
        ...     _ = htm.add("User prefers Vim", key="editor")
        ...     htm.update("editor", "User switched to Helix").version
        ...     [v.content for v in htm.versions("editor")]
        2
        ['User prefers Vim', 'User switched to Helix']
        """
        return self._versions.update(key, content, importance=importance, tags=tags,
                                     metadata=metadata, expected_version=expected_version,
                                     kind=kind, source=source, confidence=confidence)

    aupdate = twin(update)

    @_open
    def versions(self, key: str) -> list[Memory]:
        """Every version of the memory under ``key``, oldest first; the last is the current
        one, the others have ``superseded_at`` set. Counts no access.

        To bring an old text back, update to it: ``htm.update(key, old.content)`` (a new
        version; the history keeps every step). ``NotFoundError`` for an unknown key.
        """
        return self._versions.versions(key)

    aversions = twin(versions)

    # -- never forget ----------------------------------------------------------------

    @_open
    @instrumented("forget")
    def forget(self, key: str, *, confirm: bool = False) -> Memory:
        """Hide a memory from recall, recoverably (``restore``), until ``purge``.

        Raises :class:`~htm_core.errors.ConfirmationRequiredError` unless ``confirm=True``
        and :class:`~htm_core.errors.NotFoundError` for an unknown or purged key (the memory
        is then out of this robot's working memory too). Every working memory holding the
        memory, in any process, drops it from its next call on. Every digest built on it
        (:meth:`consolidate`) is rebuilt without it, its history deleted.
        """
        memory = self._forgetter.forget(key, confirm=confirm)
        self._consolidator.forgotten(memory)
        return memory

    aforget = twin(forget)

    @_open
    @instrumented("restore")
    def restore(self, key: str) -> Memory:
        """Bring back a forgotten memory. Raises ``NotFoundError`` for an unknown key."""
        return self._forgetter.restore(key)

    arestore = twin(restore)

    @_open
    def purge(self, *, confirm: bool = False, key: str | None = None) -> int:
        """Delete forgotten memories for good (all of them, or only ``key``).

        Only memories already forgotten are purged; returns how many were removed.
        """
        checked = _intake.confirm_purge(confirm, key)
        gone = self._store.get(checked, include_forgotten=True) if checked else None
        count = self._forgetter.purge(confirm=confirm, key=key)
        if gone is not None:
            self._consolidator.forgotten(gone)
        return count

    apurge = twin(purge)

    # -- digests ---------------------------------------------------------------------

    @_open
    def consolidate(self, period: str = "day", *, at: Any = None, user_id: str | None = None,
                    session_id: str | None = None, scope: ChatScope | None = None,
                    strategy: str | DigestStrategy = "extractive",
                    target_tokens: int | None = None, tz: Any = None,
                    chat_model: Any = None) -> list[Memory]:
        """Write the digest of a day, ISO week or month, and the lower ones it is made of.

        A digest is a memory (tag ``digest``, ``metadata["digest"]`` naming its period,
        scope, strategy and sources) under one key per scope and period
        (``digest:week:2026-W48``; ``chat:user:ada:digest:day:2026-11-28`` for a user),
        created at the period's start. A day's digest is made from the scope's memories of
        that day (digests and summaries aside); a week's from its day digests, a month's
        from its week digests, each made first. Running it again with the same sources
        writes nothing; new sources give the digest a new version (:meth:`update`).
        Sources are never changed. Forgetting a source rebuilds every digest built on it,
        without its history (see docs/consolidation.md, "Consolidating").

        Args:
            period: ``"day"``, ``"week"`` or ``"month"``.
            at: a datetime, a date, an ISO string or a label of the period (``"2026-W48"``):
                the period holding it. Default: the last complete period (yesterday, last
                week, last month) by this instance's clock.
            user_id, session_id, scope: whose digest (a
                :class:`~htm_core.scope.ChatScope`, or ids that make one); default the
                whole store.
            strategy: ``"extractive"`` (no model), ``"simple"``, ``"hierarchical"``,
                ``"map-reduce"`` (with ``chat_model``), or a strategy object.
            target_tokens: the digest's length at most (default 300 for a day, 500 for a
                week, 800 for a month).
            tz: the time zone of the periods (default: the clock's).
            chat_model: the model of a model strategy named in ``strategy``.

        Returns:
            the digests, lowest period first and the one asked for last; empty when the
            period holds no memories.
        """
        plan = self._consolidator.plan(period, at=at, tz=tz, scope=scope, user_id=user_id,
                                       session_id=session_id, strategy=strategy,
                                       target_tokens=target_tokens, chat_model=chat_model)
        return self._consolidator.consolidate(plan)

    aconsolidate = twin(consolidate, native=False)

    @_open
    def schedule_consolidation(self, period: str = "day", *, at: Any = None,
                               user_id: str | None = None, session_id: str | None = None,
                               scope: ChatScope | None = None,
                               strategy: str | DigestStrategy = "extractive",
                               target_tokens: int | None = None, tz: Any = None,
                               chat_model: Any = None) -> int:
        """Queue :meth:`consolidate` (same arguments, checked now) as a ``consolidate`` job
        on the store's durable job queue, done by this instance's background worker
        (started on the first call; :meth:`flush_consolidation` waits for it). Returns the
        job's id; a job of the same scope and period still pending is replaced."""
        plan = self._consolidator.plan(period, at=at, tz=tz, scope=scope, user_id=user_id,
                                       session_id=session_id, strategy=strategy,
                                       target_tokens=target_tokens, chat_model=chat_model)
        return self._consolidator.schedule(plan)

    aschedule_consolidation = twin(schedule_consolidation, native=False)

    @_open
    def flush_consolidation(self, timeout: float | None = None) -> bool:
        """Wait until the queued consolidations are done; False on timeout."""
        return self._consolidator.flush(timeout)

    aflush_consolidation = twin(flush_consolidation, native=False)

    @_open
    def digests(self, period: str | None = None, *, user_id: str | None = None,
                session_id: str | None = None, scope: ChatScope | None = None,
                limit: int = 100) -> list[Memory]:
        """The digests of one scope (default the whole store), of one period kind
        (``"day"``, ``"week"``, ``"month"``) or all, the newest period first; counts no
        access."""
        return self._consolidator.digests(period, scope=scope, user_id=user_id,
                                          session_id=session_id, limit=limit)

    adigests = twin(digests)

    # -- introspection ---------------------------------------------------------------

    @_open
    def stats(self, *, tags: Sequence[str] | None = None) -> Stats:
        """Working-memory and long-term figures for this robot and the whole store.

        With ``tags`` (a user's scope tags, say), the counts of memories, forgotten ones,
        robots and resident items are taken among the memories carrying one of them (or a
        tag below one), in the database.
        """
        return self._introspection.stats(check_tags(tags) if tags is not None else None)

    astats = twin(stats)

    @_open
    def robots(self, *, tags: Sequence[str] | None = None) -> list[Robot]:
        """Every robot on the store; with ``tags``, the robots that wrote a visible memory
        carrying one of them (or a tag below one), each counting only those."""
        return self._introspection.robots(check_tags(tags) if tags is not None else None)

    arobots = twin(robots)

    @_open
    def tags(self) -> dict[str, int]:
        """Every tag with its count of visible memories."""
        return self._introspection.tags()

    atags = twin(tags)

    @_open
    def operations(self, *, limit: int = 100, op: str | None = None,
                   robot: str | None = None) -> list[Operation]:
        """The operations log, newest first (add, touch, evict, forget, restore, purge...),
        with what this instance's recent reads evicted written first."""
        return self._introspection.operations(limit=limit, op=op, robot=robot)

    aoperations = twin(operations)

    # -- reading without access (``list`` last: its name shadows the builtin below it) --

    @_open
    def get(self, key: str, include_forgotten: bool = False, *,
            version: int | None = None) -> Memory | None:
        """The memory under ``key`` (exact lookup), or None (a forgotten one only with
        ``include_forgotten``). Unlike :meth:`retrieve` it counts no access and leaves
        working memory alone. With ``version`` (1 for the first text), that version of
        the memory (a superseded one has ``superseded_at`` set), or None when it has no
        such version; see :meth:`update`."""
        return self._lister.get(key, include_forgotten, version=version)

    aget = twin(get)

    @_open
    def list(self, *, robot: str | None = None, tags: Iterable[str] | str | None = None,
             timeframe: Any = None, key_prefix: str | None = None,
             include_forgotten: bool = False, order: str = "created_at",
             descending: bool = False, limit: int = 100, cursor: str | None = None,
             kinds: str | Iterable[str] | None = None,
             sources: str | Iterable[str] | None = None,
             min_confidence: float | None = None) -> Page:
        """One page of memories, filtered and ordered in the store; counts no access.

        Args:
            robot, tags, timeframe, kinds, sources, min_confidence: as for :meth:`recall`
                (a tag matches the tags below it; a source matches only itself).
            key_prefix: only keys starting with this (``"doc:"``, a chat session's prefix).
            include_forgotten: list forgotten memories too.
            order: ``"created_at"`` (default), ``"key"`` or ``"importance"``; ties by id.
            descending: the order reversed.
            limit: memories per page, 1 to 10,000.
            cursor: ``None`` for the first page, then the ``next_cursor`` of the page
                before (with the same other arguments).

        Returns:
            a :class:`~htm_core.models.Page`; ``next_cursor`` is ``None`` on the last page.

        A walk (the first page, then each ``next_cursor``) lists every memory that matches
        throughout and existed before its first page exactly once, in order, while other
        writers add, update and forget: no memory is repeated, none whose sort key did not
        change is skipped. Creation time and key never change. In ``importance`` order
        each memory is placed by its importance as it was when the walk began, so one that
        :meth:`update` changed since is listed once, at its old place (showing what it now
        holds); an importance set in place by an enricher or a re-``add`` moves the memory
        (it may then be listed again, or missed). A memory added during the walk is listed
        when its place is still ahead.
        """
        return self._lister.list(robot=robot, tags=tags, timeframe=timeframe,
                                 key_prefix=key_prefix, include_forgotten=include_forgotten,
                                 order=order, descending=descending, limit=limit, cursor=cursor,
                                 kinds=kinds, sources=sources,
                                 min_confidence=min_confidence)

    alist = twin(list)


def _weakly(method: Callable[[list[tuple[str, str]]], None]
            ) -> Callable[[list[tuple[str, str]]], None]:
    """``method`` called through a weak reference to its object (a no-op once collected)."""
    ref = weakref.WeakMethod(method)

    def call(pairs: list[tuple[str, str]]) -> None:
        target = ref()
        if target is not None:
            target(pairs)

    return call
