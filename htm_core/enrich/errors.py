"""Errors of the enrichment subsystem, all under :class:`~htm_core.errors.HTMError`.

::

    HTMError
    ├── EnrichmentError                    an enricher could not produce a result
    │   ├── ModelCallError                 the chat model raised (network, server, timeout)
    │   └── InvalidModelOutputError        the model's answers stayed malformed after retries
    ├── ValidationError
    │   └── UnknownJobKindError            a job kind no handler is registered for
    └── StoreError
        └── JobQueueError                  the durable job queue's database failed
"""

from __future__ import annotations

from ..errors import HTMError, StoreError, ValidationError

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


class UnknownJobKindError(ValidationError):
    """A job was queued (or claimed) with a kind no handler is registered for."""


class JobQueueError(StoreError):
    """The durable job queue's database failed; the original error is in ``__cause__``."""
