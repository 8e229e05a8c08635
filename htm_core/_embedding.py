"""Filling missing vectors so that one bad text never blocks the rest.

:func:`fill_once` is one pass of the filling that ``HTM`` runs in its background worker, in
``flush`` and in ``reembed``: embed a batch of memories without a vector (each one's
:func:`~htm_core.enrich.documents.embed_text`), try each memory alone when the embedder
rejects the batch, mark one that fails alone, and tell a rejected text from an embedder that
is down with a probe. :class:`EmbeddingService` is the embedding side of one ``HTM``: checks,
the vector cache, batches, the worker, ``flush``, ``reembed`` and the retry of failed
embeddings. See docs/embeddings.md ("Background embeddings", "The cache").
"""

from __future__ import annotations

import logging
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from ._native import SharedLock, off_loop
from ._windows import DEFAULT_WINDOW_WORDS, Span, fill_windows_once, is_long, window_plan, windows_for
from .background import EmbeddingWorker
from .embeddings import HashingEmbedder, embedder_name, resolve_embedder, store_embedder_hint
from .enrich.documents import embed_text
from .errors import EmbedderMismatchError, EmbeddingError, HTMError, StoreError
from .models import Memory
from .observability import Metrics
from .store.base import EmbeddingRepair, LongTermStore, NewMemory, Windows, capability, content_hash
from .store.values import checked_instance
from .tokens import TokenCounter
from .validation import check_int

__all__ = ["PROBE_TEXT", "EmbeddingService", "check_batch_size", "embed_isolating",
           "failure_reason", "fill_once"]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

#: What the embedder is asked to embed to find out whether it works at all.
PROBE_TEXT = "htm embedder check"

#: How many vectors the in-process cache keeps (least recently used go first).
EMBED_CACHE_SIZE = 10_000

#: A checked vector: a float32 numpy row (a ``Sequence[float]`` to every consumer).
Vector = Any

Embed = Callable[[list[str]], list[Vector]]


def failure_reason(exc: BaseException) -> str:
    """The reason recorded for a rejected text: the embedder's own error when wrapped."""
    cause = exc.__cause__ if isinstance(exc, EmbeddingError) and exc.__cause__ else exc
    return f"{type(cause).__name__}: {cause}"


def embed_isolating(embed: Embed, texts: Sequence[str], *, probe: Callable[[], Any]
                    ) -> tuple[dict[int, list[float]], dict[int, str]]:
    """Vectors by position, and reasons by position for the texts that fail on their own.

    ``embed`` is tried with the whole batch, then text by text if that fails. ``probe``
    checks the embedder with a known-good text; it runs when the first text fails alone
    before any has worked, and its failure (the embedder is down) is raised as the batch's.
    Only :class:`~htm_core.errors.EmbeddingError` counts as a rejection; anything else (a
    store error while looking up cached vectors) is raised as it is.
    """
    try:
        vectors = embed(list(texts))
    except EmbeddingError as exc:
        first = exc
    else:
        return dict(enumerate(vectors)), {}
    done: dict[int, list[float]] = {}
    failed: dict[int, str] = {}
    for i, text in enumerate(texts):
        try:
            done[i] = embed([text])[0]
        except EmbeddingError as exc:
            failed[i] = failure_reason(exc)
            if not done and len(failed) == 1:
                try:
                    probe()
                except Exception:
                    raise first from None  # the embedder is down: mark nothing, back off
    return done, failed


def fill_once(store: LongTermStore, embed: Embed, embedder: str, limit: int, *,
              probe: Callable[[], Any]) -> tuple[int, int]:
    """Embed up to ``limit`` memories missing a vector; return (embedded, marked failing)."""
    batch = store.missing_embeddings(limit=limit)
    if not batch:
        return 0, 0
    texts = [embed_text(content, metadata) for _, content, metadata in batch]
    done, failed = embed_isolating(embed, texts, probe=probe)
    if done:
        store.set_embeddings([(batch[i][0], vector) for i, vector in sorted(done.items())],
                             embedder)
    if failed:
        for i, reason in sorted(failed.items()):
            logger.warning("memory %s cannot be embedded by %s, skipped until retried: %s",
                           batch[i][0], embedder, reason)
        store.mark_embedding_failures([(batch[i][0], reason) for i, reason in sorted(failed.items())],
                                      embedder)
    return len(done), len(failed)


def _with_vector(record: NewMemory, vector: Vector, embedder: str) -> NewMemory:
    """``replace(record, embedding=vector, embedder=embedder)`` without ``replace``'s
    per-field work (a copy of the frozen instance's fields: this runs for every memory of
    every ``add_many``; ``NewMemory`` has no ``__post_init__`` to skip)."""
    return checked_instance(NewMemory, record, embedding=vector, embedder=embedder)


def float32_rows(vectors: Sequence[Any]) -> np.ndarray | None:
    """``vectors`` as one writable float32 matrix when they are lists of Python floats (or
    ints) of one length, as a cached LangChain embedder returns them; else None.

    Each row is packed by :mod:`struct` (a C cast per value: the rounding of numpy's
    float64 to float32 cast): about a third of ``np.asarray``'s time on lists, which
    takes each value through the generic sequence path. Anything else (arrays, tuples,
    ragged rows, a value that is not a number or too large for float32) gives None, and
    the caller's numpy path decides as before.
    """
    if not isinstance(vectors, list) or not vectors:
        return None
    width = len(vectors[0]) if type(vectors[0]) is list else 0
    if not width or any(type(v) is not list or len(v) != width for v in vectors):
        return None
    pack = struct.Struct(f"{width}f").pack
    try:
        packed = bytearray().join([pack(*v) for v in vectors])
    except (struct.error, OverflowError, TypeError):
        return None
    return np.frombuffer(packed, dtype=np.float32).reshape(len(vectors), width)


def check_batch_size(value: Any, *, name: str = "embed_batch_size") -> int:
    """``value`` if it is a positive integer, else :class:`~htm_core.errors.InvalidBudgetError`."""
    return check_int(name, value)


class EmbeddingService:
    """One ``HTM``'s embedder with its cache, batches, worker, re-embedding and retries.

    Thread-safe: the facade calls it from its own methods, the background worker and the
    enrichment runner at once.
    """

    def __init__(self, store: LongTermStore, spec: Any, *, counter: TokenCounter,
                 metrics: Metrics, batch_size: int,
                 window_words: int | None = DEFAULT_WINDOW_WORDS) -> None:
        self.batch_size = check_batch_size(batch_size)
        #: Where window vectors go: the store, when it offers the ``windows`` capability.
        self._windows: Windows | None = store if isinstance(store, Windows) else None
        #: Long memories get window vectors (``htm_core._windows``); None: none are made.
        self.window_words = window_words if self._windows is not None else None
        self._windows_checked = False
        # An existing store's own embedder wins over "auto" (see resolve_embedder).
        info = store.embedding_info()
        self.embedder, self.choice = resolve_embedder(
            spec, store_embedder=info[0] if info else None)
        self.name = embedder_name(self.embedder)
        #: The store's vectors are from another embedder (opened with the mismatch
        #: allowed): no vectors are made and recall is full-text only until reembed.
        self.mismatch = False
        self.calls = 0
        self.cache_hits = 0
        self._store = store
        self._counter = counter
        self._metrics = metrics
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        #: Window vectors made with their text's vector (an embedder with
        #: ``embed_windows``), by the text's hash, until the windows are written.
        self._windowed: OrderedDict[str, list[Vector]] = OrderedDict()
        self._lock = threading.Lock()
        self._fill_lock = SharedLock()
        self.worker: EmbeddingWorker | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def check_store(self, *, allow_mismatch: bool = False) -> None:
        """Raise :class:`~htm_core.errors.EmbedderMismatchError` when the store's vectors
        are from another embedder (or note the mismatch when ``allow_mismatch``)."""
        info = self._store.embedding_info()
        if info is None:
            return
        name, dim = info
        if name != self.name:
            if allow_mismatch:
                self.mismatch = True
                logger.warning("store vectors are from %s, embedder is %s: recall is full-text "
                               "only until reembed()", name, self.name)
                return
            raise EmbedderMismatchError(
                f"this store's vectors were made by {name!r} ({dim} dimensions) but the "
                f"embedder is {self.name!r}; pass embedder matching the store"
                f"{store_embedder_hint(name)}, or open it with HTM(..., "
                "allow_embedder_mismatch=True) and call .reembed() (`htm reembed`) to "
                "rebuild every vector with the new one"
            )

    def start_worker(self, robot: str) -> None:
        """Fill vectors in a background thread from now on (``add`` then stores none)."""
        self.worker = EmbeddingWorker(lambda: self.fill_pending(self.batch_size),
                                      name=f"htm-embedder-{robot}")
        self.worker.start()

    def stop(self) -> None:
        """Stop the background worker, if any."""
        if self.worker is not None:
            self.worker.stop()

    def wake(self) -> None:
        """Tell the background worker (if any) that memories without a vector were stored."""
        if self.worker is not None:
            self.worker.wake()

    def recall_strategy(self, strategy: str) -> str:
        """``strategy``, or ``"fulltext"`` while the store's vectors are from another
        embedder (then ``"vector"`` raises :class:`~htm_core.errors.EmbedderMismatchError`)."""
        if not self.mismatch:
            return strategy
        if strategy == "vector":
            raise EmbedderMismatchError(
                f"vector recall needs the store re-embedded with {self.name!r}; "
                "call reembed() first, or recall with strategy='fulltext'")
        return "fulltext"

    def worker_figures(self) -> dict[str, Any]:
        """Batch size and background worker figures for ``stats().extra``."""
        return {"embed_batch_size": self.batch_size,
                "background_embeddings": self.worker is not None,
                "failed_embedding_passes": self.worker.failures if self.worker else 0}

    def failure_figures(self, failed: int) -> dict[str, Any]:
        """The mismatch flag and up to 10 failing memories (when ``failed``) for
        ``stats().extra``."""
        return {"embedder_mismatch": self.mismatch,
                "embedding_failures": [
                    {"key": f.key, "error": f.error}
                    for f in (self._store.embedding_failures(limit=10)
                              if failed and isinstance(self._store, EmbeddingRepair) else [])]}

    @property
    def inline(self) -> bool:
        """Whether new memories get their vectors before they are written."""
        return self.worker is None and not self.mismatch

    # -- embedding ---------------------------------------------------------------------

    def call(self, texts: list[str], tokens: Sequence[int | None] | None = None
             ) -> list[Vector]:
        """One embedder call for ``texts``; every vector checked (all at once, in numpy).

        ``tokens`` are the texts' token counts where the caller already has them (the
        metrics count the rest), so no text is counted twice.
        """
        vectors = self._model_call(lambda: self.embedder.embed_documents(texts), texts, tokens)
        return self._checked_rows(vectors)

    def _off_loop(self, run: Callable[[], _T]) -> _T:
        """``run()``, a call of the model: in a worker thread during a native async call
        (:func:`~htm_core._native.off_loop`) unless the model is the hashing embedder,
        whose microseconds are cheaper than the hand-off."""
        if isinstance(self.embedder, HashingEmbedder):
            return run()
        return off_loop(run)

    def _model_call(self, run: Callable[[], _T], texts: list[str],
                    tokens: Sequence[int | None] | None) -> _T:
        """``run()``, one call of the model for ``texts``: its failure an
        :class:`EmbeddingError`, its success counted (calls, and the texts' tokens in the
        metrics, counting only those ``tokens`` does not give)."""
        try:
            out = self._off_loop(run)
        except HTMError:
            raise
        except Exception as exc:
            raise EmbeddingError(
                f"embedder {self.name} failed: {exc}; check it is reachable and "
                "configured, nothing was stored") from exc
        with self._lock:
            self.calls += 1
        known = tokens if tokens is not None else [None] * len(texts)
        self._metrics.embedded(tokens=sum(self._counter.count(t) if n is None else n
                                          for t, n in zip(texts, known, strict=False)))
        return out

    def _checked_rows(self, vectors: Sequence[Sequence[float]]) -> list[Vector]:
        """``vectors`` as float32 rows, checked in one pass: non-empty, one length, finite."""
        matrix = float32_rows(vectors)
        if matrix is None:
            try:
                matrix = np.asarray(vectors, dtype=np.float32)
            except (TypeError, ValueError):  # ragged or not numbers: check one by one
                return [self._checked(v) for v in vectors]
        if matrix.ndim != 2:
            if matrix.ndim == 1 and len(matrix) == 0:
                return []
            return [self._checked(v) for v in vectors]
        if matrix.shape[1] == 0 or not np.isfinite(matrix).all():
            raise EmbeddingError(
                f"embedder {self.name} returned an empty vector or one with NaN/inf")
        return list(matrix)

    def _checked(self, vector: Sequence[float]) -> Vector:
        try:
            values = np.asarray(vector, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbeddingError(
                f"embedder {self.name} returned something that is not a vector: {exc}") from None
        if values.ndim != 1 or not len(values) or not np.isfinite(values).all():
            raise EmbeddingError(
                f"embedder {self.name} returned an empty vector or one with NaN/inf")
        return values

    def documents(self, texts: Sequence[str], *, fresh: bool = False,
                  tokens: Sequence[int | None] | None = None,
                  hashes: Sequence[str] | None = None) -> list[Vector]:
        """Vectors for ``texts``: from the LRU cache, the store, then the embedder.

        Each distinct text is embedded at most once, in calls of ``batch_size``.
        ``fresh`` skips both caches (re-embedding computes every vector anew). ``tokens``:
        the texts' token counts where known (see :meth:`call`); ``hashes``: their content
        hashes, when the caller has them.
        """
        out: dict[str, Vector] = {}
        todo: dict[str, str] = {}
        counted: dict[str, int | None] = {}
        if hashes is None:
            hashes = [content_hash(t) for t in texts]
        known = tokens if tokens is not None else [None] * len(texts)
        cache = {} if fresh else self._cache
        with self._lock:  # once for the batch: this runs for every item of every add_many
            for text, h, n in zip(texts, hashes, known, strict=True):
                if h in out or h in todo:
                    continue
                counted[h] = n
                cached = cache.get(h)
                if cached is not None:
                    out[h] = cached
                    self.cache_hits += 1
                else:
                    todo[h] = text
        if todo and not fresh:  # one store lookup for the whole batch
            for h, vec in self._store.find_embeddings(list(todo), self.name).items():
                out[h] = vec
                del todo[h]
                with self._lock:
                    self.cache_hits += 1
                    self._remember(h, vec)
        pending = list(todo.items())
        size = self.batch_size
        for start in range(0, len(pending), size):
            part = pending[start:start + size]
            vectors = self._embed_part(part, [counted[h] for h, _ in part])
            if len(vectors) != len(part):
                raise EmbeddingError(
                    f"embedder {self.name} returned {len(vectors)} vectors for "
                    f"{len(part)} texts; nothing was stored")
            with self._lock:
                for (h, _), vec in zip(part, vectors, strict=True):
                    out[h] = vec
                    self._remember(h, vec)
        return [out[h] for h in hashes]

    @property
    def pools_windows(self) -> bool:
        """Whether window vectors come from the embedder's pass over the whole text
        (it has ``embed_windows``: :class:`~htm_core.embeddings.WindowEmbedder`, and
        does not set ``pool_windows = False``)."""
        return (self.window_words is not None
                and callable(getattr(self.embedder, "embed_windows", None))
                and getattr(self.embedder, "pool_windows", True) is not False)

    def _embed_part(self, part: Sequence[tuple[str, str]], tokens: Sequence[int | None]
                    ) -> list[Vector]:
        """Vectors for ``(hash, text)`` pairs: one call; the long texts' through
        ``embed_windows`` when the embedder has it, their windows kept for
        :meth:`window_vectors`."""
        texts = [text for _, text in part]
        spans = ([window_plan(t, self.window_words)[1] for t in texts]
                 if self.pools_windows and self.window_words is not None else [])
        long = [i for i, s in enumerate(spans) if s]
        if not long:
            return self.call(texts, tokens)
        short = [i for i in range(len(part)) if not spans[i]]
        out: list[Vector] = [None] * len(part)
        if short:
            for i, v in zip(short, self.call([texts[i] for i in short],
                                             [tokens[i] for i in short]), strict=True):
                out[i] = v
        whole, windows = self.call_windows([texts[i] for i in long], [spans[i] for i in long],
                                           [tokens[i] for i in long])
        with self._lock:
            for i, v, w in zip(long, whole, windows, strict=True):
                out[i] = v
                self._windowed[part[i][0]] = w
                self._windowed.move_to_end(part[i][0])
            while len(self._windowed) > EMBED_CACHE_SIZE:
                self._windowed.popitem(last=False)
        return out

    def call_windows(self, texts: list[str], spans: list[list[Span]],
                     tokens: Sequence[int | None] | None = None
                     ) -> tuple[list[Vector], list[list[Vector]]]:
        """One ``embed_windows`` call: each text's vector and its windows', checked."""
        whole, windows = self._model_call(
            lambda: self.embedder.embed_windows(texts, spans), texts, tokens)
        if len(whole) != len(texts) or len(windows) != len(texts) or any(
                len(w) != len(s) for w, s in zip(windows, spans, strict=True)):
            raise EmbeddingError(
                f"embedder {self.name} returned vectors that do not match the "
                f"{len(texts)} texts and their windows; nothing was stored")
        return self._checked_rows(whole), [self._checked_rows(w) for w in windows]

    def window_vectors(self, texts: list[str], spans: list[list[Span]]) -> list[list[Vector]]:
        """The window vectors of ``texts`` (``spans``: their windows' character offsets):
        those made with the text's vector, else from ``embed_windows`` now."""
        out: list[list[Vector] | None] = []
        with self._lock:
            for text in texts:
                out.append(self._windowed.pop(content_hash(text), None))
        todo = [i for i, got in enumerate(out) if got is None]
        for start in range(0, len(todo), self.batch_size):
            part = todo[start:start + self.batch_size]
            _, windows = self.call_windows([texts[i] for i in part], [spans[i] for i in part])
            for i, w in zip(part, windows, strict=True):
                out[i] = w
        return [w if w is not None else [] for w in out]

    def _remember(self, h: str, vec: Vector) -> None:
        """Put a vector in the LRU cache (call with ``_lock`` held)."""
        self._cache[h] = vec
        self._cache.move_to_end(h)
        while len(self._cache) > EMBED_CACHE_SIZE:
            self._cache.popitem(last=False)

    def query(self, text: str) -> Vector:
        """The query vector for ``text`` (never cached)."""
        try:
            vector = self._off_loop(lambda: self.embedder.embed_query(text))
        except Exception as exc:
            raise EmbeddingError(f"embedder {self.name} failed on the query: {exc}") from exc
        with self._lock:
            self.calls += 1
        self._metrics.embedded(tokens=self._counter.count(text))
        return self._checked(vector)

    def with_vectors(self, records: Sequence[NewMemory], texts: Sequence[str] | None = None,
                     *, in_place: bool = False) -> list[NewMemory]:
        """``records`` with their vectors when they are made inline (of ``texts``, default
        each record's embed text); as they are in background or mismatch mode.

        ``in_place``: the records were made for this write alone (``HTM``'s intake), so
        the vectors are set on them instead of on copies.
        """
        if not self.inline:
            return list(records)
        if texts is None:
            texts = [embed_text(r.content, r.metadata) for r in records]
        # A record embedded as its own content was counted by the intake already, and
        # its content hash is the record's (worked out once, for the writer too).
        tokens: list[int | None] = []
        hashes: list[str] = []
        for r, t in zip(records, texts, strict=True):
            own = t == r.content
            tokens.append(r.token_count if own else None)
            hashes.append(r.content_hash if own else content_hash(t))
        vectors = self.documents(list(texts), tokens=tokens, hashes=hashes)
        name = self.name
        if in_place:
            for r, v in zip(records, vectors, strict=True):
                r.__dict__.update(embedding=v, embedder=name)
            return list(records)
        return [_with_vector(r, v, name) for r, v in zip(records, vectors, strict=True)]

    # -- filling, flushing, re-embedding -----------------------------------------------

    def fill_pending(self, limit: int) -> int:
        """Embed up to ``limit`` stored memories that have no vector (then give long ones
        their windows); return how many were done (embedded, marked as failing, windowed)."""
        return sum(self._fill_once(limit)) or self._fill_windows(limit)

    def _fill_once(self, limit: int, *, fresh: bool = False) -> tuple[int, int]:
        with self._fill_lock:
            if self.mismatch:
                return 0, 0
            done = fill_once(self._store, lambda texts: self.documents(texts, fresh=fresh),
                             self.name, limit, probe=lambda: self.call([PROBE_TEXT]))
            if done[0]:
                self._windows_checked = False  # new vectors: their memories need windows
            return done

    def _fill_windows(self, limit: int) -> int:
        """Give up to ``limit`` long memories with a vector and no windows their windows
        (the catch-up: background embedding, a store made before windows, an import);
        skipped once a pass found none, until new vectors are made."""
        with self._fill_lock:
            if (self.mismatch or self._windows is None or self.window_words is None
                    or self._windows_checked):
                return 0
            done = fill_windows_once(self._windows, self.documents, self.window_words, limit,
                                     probe=lambda: self.call([PROBE_TEXT]),
                                     pooled=self.window_vectors if self.pools_windows else None)
            self._windows_checked = done == 0
            return done

    def add_windows(self, memories: Sequence[Memory]) -> None:
        """Give the long ones of ``memories``, just written with their vectors, their
        windows (inline mode; in background mode the catch-up does it)."""
        words = self.window_words
        if words is None or self._windows is None or not self.inline:
            return
        long = [(m.id, m.content_hash, m.content, m.metadata) for m in memories
                if is_long(m.content, words)]
        if not long:
            return
        try:
            self._windows.set_windows(windows_for(
                long, self.documents, words, probe=lambda: self.call([PROBE_TEXT]),
                pooled=self.window_vectors if self.pools_windows else None))
        except (EmbeddingError, StoreError) as exc:  # the memories are stored already
            logger.warning("windows of %d new memories not made now (the catch-up makes "
                           "them): %s", len(long), exc)
            self._windows_checked = False

    def retry_failed(self) -> int:
        """Clear the failure marks and embed those memories again; return how many."""
        count = capability(self._store, EmbeddingRepair,
                           "retrying failed embeddings").retry_embedding_failures()
        if count:
            logger.info("retrying %d memories whose embedding failed", count)
        if self.worker is not None:
            self.worker.wake()
        elif not self.mismatch:
            while self.fill_pending(self.batch_size):
                pass
        return count

    def flush(self, timeout: float | None = None) -> None:
        """Wait for the worker, or embed what is missing here (see ``HTM.flush``)."""
        if self.mismatch:
            raise EmbedderMismatchError(
                f"the store's vectors are from another embedder than {self.name!r}; "
                "call reembed() to rebuild them")
        if self.worker is not None:
            self.worker.flush(timeout)
            return
        while self.fill_pending(self.batch_size):
            pass

    def reembed(self, robot: str, *, batch_size: int, progress: bool, force: bool) -> int:
        """Rebuild the store's vectors (see ``HTM.reembed``); return how many were made."""
        check_batch_size(batch_size, name="batch_size")
        with self._fill_lock:
            info = self._store.embedding_info()
            if info is not None and (force or info[0] != self.name):
                logger.info("re-embedding %s: dropping vectors from %s", self._store.url, info[0])
                capability(self._store, EmbeddingRepair, "re-embedding").reset_embeddings()
            self.mismatch = False
            with self._lock:  # vectors cached under this name may be from an old model
                self._cache.clear()
                self._windowed.clear()
        total = self._store.counts(robot).missing_embeddings
        bar: Any = None
        if progress:
            try:
                from tqdm import tqdm
            except ImportError:
                logger.info("re-embedding %d memories (pip install tqdm for a progress bar)",
                            total)
            else:
                bar = tqdm(total=total, desc=f"re-embedding with {self.name}", unit="memory")
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
        self._windows_checked = False
        while self._fill_windows(batch_size):
            pass
        return done
