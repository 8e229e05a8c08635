"""Every error a user of htm can get.

One tree, rooted at :class:`HTMError`; catch that to catch them all. Every class is
importable from ``htm_core``; the enrichers' own are defined in :mod:`htm_core.enrich.errors`.
Backend exceptions (sqlite3, psycopg, httpx) are mapped at the boundary with
``raise ... from exc``, so the original is always in ``__cause__``. The whole tree, drawn
with a line on each error: docs/api.md ("Errors").
"""

from __future__ import annotations

__all__ = [
    "ClosedError",
    "ConfirmationRequiredError",
    "ConflictError",
    "DatabaseCorruptError",
    "DatabaseUnavailableError",
    "DimensionMismatchError",
    "DiskFullError",
    "DuplicateKeyError",
    "EmbedderMismatchError",
    "EmbeddingError",
    "HTMError",
    "IncompleteExportError",
    "InvalidBudgetError",
    "InvalidContentError",
    "InvalidImportanceError",
    "InvalidKeyError",
    "InvalidMetadataError",
    "InvalidTagError",
    "InvalidTimeError",
    "InvalidTokensError",
    "JobQueueError",
    "MemoryTooLargeError",
    "MissingDependencyError",
    "NotFoundError",
    "ReadOnlyError",
    "SchemaError",
    "StoreError",
    "TimeframeError",
    "UnknownJobKindError",
    "UnknownPolicyError",
    "UnknownStrategyError",
    "UnsupportedError",
    "UnsupportedFilterError",
    "ValidationError",
]


class HTMError(Exception):
    """Root of every error raised by htm."""


class ValidationError(HTMError, ValueError):
    """The input was rejected before anything was written."""


class InvalidContentError(ValidationError):
    """Content is empty, whitespace-only, too long, or holds characters no store can keep."""


class InvalidImportanceError(ValidationError):
    """Importance must be a finite number from 0 to 10."""


class InvalidTokensError(ValidationError):
    """A token count must be a non-negative integer."""


class InvalidBudgetError(ValidationError):
    """A budget or limit (``max_tokens``, ``limit``, margins) is out of range."""


class InvalidKeyError(ValidationError):
    """A key must be a non-empty string of at most 255 characters."""


class InvalidTagError(ValidationError):
    """A tag must be colon-separated segments of letters, digits, ``_``, ``-`` or ``.``."""


class InvalidMetadataError(ValidationError):
    """Metadata holds a value that cannot round-trip through every store and the export format."""


class InvalidTimeError(ValidationError):
    """``created_at`` is not a datetime htm can store (see ``htm_core._values``)."""


class IncompleteExportError(ValidationError):
    """An export file is truncated, altered or damaged; nothing was imported from it."""


class UnknownStrategyError(ValidationError):
    """The recall or context strategy is not one htm knows."""


class UnknownPolicyError(ValidationError):
    """The eviction policy is not one htm knows."""


class UnsupportedFilterError(ValidationError):
    """A filter (for instance an adapter's metadata filter) htm cannot apply inside its search."""


class TimeframeError(ValidationError):
    """The timeframe could not be understood."""


class UnknownJobKindError(ValidationError):
    """A job was queued (or claimed) with a kind no handler is registered for."""


class ConfirmationRequiredError(HTMError):
    """A destructive call (``forget``, ``purge``) was made without ``confirm=True``."""


class MemoryTooLargeError(HTMError):
    """The item is larger than the whole working-memory budget."""


class NotFoundError(HTMError, KeyError):
    """No memory has that key."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DuplicateKeyError(HTMError):
    """The key is already used by a memory with different content."""


class ConflictError(HTMError):
    """An ``update`` was refused: the memory moved on from the version it was based on.

    Raised when ``expected_version`` is no longer the memory's version, and when a
    concurrent update changed a field this one changes too (to another value). Nothing
    was written. ``key``, ``expected_version`` (the version the update was based on),
    ``current_version`` and ``fields`` (the fields both changed; empty when
    ``expected_version`` alone refused it) say what happened.
    """

    def __init__(self, key: str, expected_version: int, current_version: int,
                 fields: tuple[str, ...] = ()) -> None:
        self.key = key
        self.expected_version = expected_version
        self.current_version = current_version
        self.fields = tuple(fields)
        both = (f" and changed {', '.join(self.fields)}, which this update changes too"
                if self.fields else "")
        super().__init__(
            f"memory {key!r} changed since version {expected_version}: it is now at version "
            f"{current_version}{both}; nothing was written. Read it again (get({key!r})), "
            "then update from what it now holds")

    def __reduce__(self) -> tuple[type[ConflictError], tuple[str, int, int, tuple[str, ...]]]:
        return (type(self), (self.key, self.expected_version, self.current_version,
                             self.fields))


class ClosedError(HTMError):
    """The ``HTM`` was closed; every call but ``close()`` raises this. Open a new ``HTM``
    on the same store to go on."""


class StoreError(HTMError):
    """The long-term store failed."""


class DatabaseUnavailableError(StoreError):
    """The database cannot be reached or opened."""


class SchemaError(StoreError):
    """The database schema is missing, too new, or not migrated."""


class DimensionMismatchError(StoreError):
    """An embedding's dimension differs from the one fixed for the store."""


class ReadOnlyError(StoreError):
    """The store was opened read-only, or its file or medium cannot be written."""


class DiskFullError(StoreError):
    """The disk (or the database's size limit) is full; the write did not happen."""


class DatabaseCorruptError(StoreError):
    """The database file is damaged; run ``htm check`` and restore from an export."""


class JobQueueError(StoreError):
    """The durable job queue's database failed; the original error is in ``__cause__``."""


class UnsupportedError(StoreError):
    """The store backend does not offer a capability this call needs (a third-party
    backend may leave out versions, windows, bulk loads, embedding repair or enrichment;
    see ``htm_core.store.base.CAPABILITIES``)."""


class EmbeddingError(HTMError):
    """The embedder failed or could not be reached."""


class EmbedderMismatchError(EmbeddingError):
    """The store's vectors were made by a different embedder than the one configured."""


class MissingDependencyError(HTMError, ImportError):
    """An optional extra is needed; the message names the ``pip install`` that adds it."""


#: The name htm is published under on PyPI (the import packages stay ``htm_core`` and
#: ``htm_integrations``); every install hint is built from it.
DISTRIBUTION = "htm-memory"

#: Whether :data:`DISTRIBUTION` can be installed from PyPI yet. Until it is, every install
#: hint gives the commands that work from a clone of the repository and from a built wheel,
#: next to the index name (docs/releasing.md says when to turn this on).
ON_PYPI = False


def install_hint(extra: str, *, upgrade: bool = False) -> str:
    """The ``pip install`` command(s) that add *extra* (``-U`` with ``upgrade``).

    Before the first release on PyPI the hint names the clone and the wheel forms first:

    >>> install_hint("local")  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    'pip install -e ".[local]" from the root of a clone of the repository, or pip install
    "dist/htm_memory-...-py3-none-any.whl[local]" with a wheel built there
    (pip install "htm-memory[local]" once htm-memory is published on PyPI)'
    """
    pip = "pip install -U" if upgrade else "pip install"
    published = f'{pip} "{DISTRIBUTION}[{extra}]"'
    if ON_PYPI:
        return published
    wheel = f"dist/{_wheel_stem()}-py3-none-any.whl"
    return (f'{pip} -e ".[{extra}]" from the root of a clone of the repository, or '
            f'{pip} "{wheel}[{extra}]" with a wheel built there '
            f"({published} once {DISTRIBUTION} is published on PyPI)")


def _wheel_stem() -> str:
    """``htm_memory-<version>``: the start of the wheel's file name for the installed version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version(DISTRIBUTION)
    except PackageNotFoundError:  # a source tree that is not installed
        installed = "<version>"
    return f"{DISTRIBUTION.replace('-', '_')}-{installed}"


def missing_extra(module: str, extra: str) -> MissingDependencyError:
    """Build the error for an optional dependency that is not installed."""
    return MissingDependencyError(f"{module} is not installed; install it with: {install_hint(extra)}")
