"""Errors of the enrichment subsystem, all under :class:`~htm_core.errors.HTMError`::

    HTMError
    ├── EnrichmentError                    an enricher could not produce a result
    │   ├── ModelCallError                 the chat model raised (network, server, timeout)
    │   └── InvalidModelOutputError        the model's answers stayed malformed after retries

The job queue's errors (``UnknownJobKindError``, ``JobQueueError``) are core errors
(:mod:`htm_core.errors`), importable from here too.
"""

from __future__ import annotations

from ..errors import HTMError, JobQueueError, UnknownJobKindError

__all__ = [
    "EnrichmentError",
    "InvalidModelOutputError",
    "JobQueueError",
    "ModelCallError",
    "UnknownJobKindError",
]


class EnrichmentError(HTMError):
    """An enricher (tagger, scorer, summariser) could not produce a result."""


class ModelCallError(EnrichmentError):
    """The chat model raised; the original exception is in ``__cause__``."""


class InvalidModelOutputError(EnrichmentError):
    """The chat model kept answering in a form that fails validation; nothing was stored.

    ``outputs`` holds the rejected answers (each cut to 200 characters), for the log.
    """

    def __init__(self, message: str, outputs: list[str] | None = None) -> None:
        super().__init__(message)
        self.outputs = list(outputs or [])
