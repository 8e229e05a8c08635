"""Filling missing vectors so that one bad text never blocks the rest.

:func:`fill_once` is one pass of the filling that ``HTM`` runs in its background worker,
in :meth:`~htm_core.HTM.flush` and in :meth:`~htm_core.HTM.reembed`: take a batch of
memories without a vector (``store.missing_embeddings``: memories marked as failing are
left out), embed each one's *embed text* (:func:`~htm_core.enrich.documents.embed_text`:
a document chunk's heading path, then its text; everything else as it is), store the
vectors.

When the embedder rejects the batch, each memory is tried alone. A memory that fails on
its own is marked in the store with the reason (``store.mark_embedding_failures``): the
filling skips it from then on, in every process, until the marks are cleared
(``HTM.retry_failed_embeddings()``, ``htm reembed --retry-failed``), while every other
memory of the batch gets its vector. When the first memory fails on its own too, a short
probe text tells a rejected text from an embedder that is down: if the probe fails as
well, nothing is marked and the error is raised, so the caller backs off and tries again
later (an outage never marks memories).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from .enrich.documents import embed_text
from .errors import EmbeddingError
from .store.base import LongTermStore

__all__ = ["PROBE_TEXT", "embed_isolating", "failure_reason", "fill_once"]

logger = logging.getLogger(__name__)

#: What the embedder is asked to embed to find out whether it works at all.
PROBE_TEXT = "htm embedder check"

Embed = Callable[[list[str]], list[list[float]]]


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
