"""Turning user input into values the store takes: checks, ``created_at``, dedup keys.

:class:`Intake` makes :class:`~htm_core.store.NewMemory` values for one ``HTM`` (its robot,
clock, token counter and inline enrichers): every field checked (a specific
:class:`~htm_core.errors.HTMError` subclass saying what to do), a naive ``created_at``
read in the clock's time zone, the stable key from robot + content when none is given, and
each batch checked whole before anything is written. :func:`recall_args` checks what
``recall`` is given.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from ._provenance import provenance, provenance_filters
from ._values import check_created_at, check_metadata
from .clock import Clock, to_aware
from .consolidation.kinds import DEFAULT_KIND
from .enrich.attach import FacadeEnrichment
from .errors import (
    ConfirmationRequiredError,
    DuplicateKeyError,
    InvalidContentError,
    StoreError,
    ValidationError,
)
from .recall import check_recall_strategy
from .store import NewMemory, SearchFilters
from .store.base import content_hash, generated_key
from .store.values import checked_instance
from .timeframe import parse_timeframe
from .tokens import TokenCounter
from .validation import (
    check_content,
    check_importance,
    check_int,
    check_key,
    check_limit,
    check_name,
    check_tags,
)

__all__ = ["GC_PAUSE_MIN", "ITEM_FIELDS", "Intake", "after_commit", "check_include_summaries",
           "check_neighbors", "confirm_forget", "confirm_purge", "context_scope", "cycles_paused",
           "recall_args"]

logger = logging.getLogger(__name__)

#: The fields an ``add_many`` item (a dict) may have: ``add``'s arguments.
ITEM_FIELDS = frozenset({"content", "importance", "key", "tags", "metadata", "created_at",
                         "kind", "source", "confidence"})


class Intake:
    """Checks one robot's input and makes the memories to write."""

    def __init__(self, robot: str, *, clock: Clock, counter: TokenCounter,
                 enrichment: FacadeEnrichment) -> None:
        self._robot = robot
        self._clock = clock
        self._counter = counter
        self._enrichment = enrichment

    def record(self, content: Any, *, importance: Any = None, key: Any = None,
               tags: Iterable[str] | str | None = (), metadata: Any = None,
               created_at: Any = None, kind: Any = None, source: Any = None,
               confidence: Any = None) -> NewMemory:
        """One memory of this robot from ``add``'s arguments, every one checked."""
        record = self._record(content, importance=importance, key=key, tags=tags,
                              metadata=metadata, created_at=created_at, kind=kind,
                              source=source, confidence=confidence)
        return record if record.importance_given else replace(record, importance_given=True)

    def _record(self, content: Any, importance: Any = None, key: Any = None,
                tags: Iterable[str] | str | None = (), metadata: Any = None,
                created_at: Any = None, kind: Any = None, source: Any = None,
                confidence: Any = None) -> NewMemory:
        """:meth:`record`, with ``importance_given`` False when ``importance`` is None."""
        content = check_content(content)
        kind, source, confidence = provenance(content, kind, source, confidence)
        given = importance is not None
        if importance is None:
            importance = self._enrichment.importance_for(content)
        elif type(importance) is not float or not 0.0 <= importance <= 10.0:
            importance = check_importance(importance)  # a float in range is returned as is
        explicit = key is not None
        key = check_name(key) if explicit else generated_key(self._robot, content)
        metadata = {} if metadata is None else check_metadata(metadata)
        when = self._clock() if created_at is None else check_created_at(created_at, self._aware)
        tags = self._enrichment.tags_for(content, () if tags is None else check_tags(tags))
        record = _new_memory(
            key, content, self._robot, importance, self._counter.count(content),
            when.astimezone(timezone.utc), tags, metadata, explicit, given)
        if (kind, source, confidence) == (DEFAULT_KIND, None, None):
            return record
        return checked_instance(NewMemory, record, kind=kind, source=source,
                                confidence=confidence)

    def _aware(self, when: datetime) -> datetime:
        """A naive ``created_at`` in the clock's time zone."""
        return to_aware(when, self._clock().tzinfo)

    def batch(self, items: Iterable[str | Mapping[str, Any]]) -> list[NewMemory]:
        """The memories of an ``add_many`` batch, all checked before any is written.

        Each item is a string or a dict of :meth:`record`'s arguments; one key may not
        carry two different contents. ``importance_given`` is False where the caller left
        the importance out.
        """
        records = []
        make = self._record
        for i, item in enumerate(items):
            if isinstance(item, str):
                records.append(make(item))
                continue
            if not (type(item) is dict or isinstance(item, Mapping)) or "content" not in item:
                raise InvalidContentError(
                    f"item {i} must be a string or a dict with 'content', got {item!r:.80}")
            if not ITEM_FIELDS.issuperset(item):
                raise ValidationError(f"item {i} has unknown fields {sorted(set(item) - ITEM_FIELDS)}")
            get = item.get  # a field given as None is as if left out
            records.append(make(item["content"], get("importance"), get("key"), get("tags"),
                                get("metadata"), get("created_at"), get("kind"),
                                get("source"), get("confidence")))
        contents: dict[str, str] = {}
        for i, record in enumerate(records):
            if contents.setdefault(record.key, record.content) != record.content:
                raise DuplicateKeyError(
                    f"item {i} reuses key {record.key!r} for different content within this batch; "
                    "give each memory its own key (nothing was stored)")
        return records


def _new_memory(key: str, content: str, robot: str, importance: float, token_count: int,
                created_at: datetime, tags: tuple[str, ...], metadata: dict[str, Any],
                explicit_key: bool, importance_given: bool) -> NewMemory:
    """``NewMemory(...)`` of checked values without the frozen dataclass's per-field
    ``object.__setattr__`` (a good part of an item's intake in a large ``add_many``), its
    content hash worked out now (every write needs it: the embedding cache and the store)
    rather than through the ``cached_property``, which takes a lock on each first read."""
    return checked_instance(NewMemory, key=key, content=content, robot=robot,
                            importance=importance, token_count=token_count,
                            created_at=created_at, tags=tags, metadata=metadata,
                            explicit_key=explicit_key, importance_given=importance_given,
                            content_hash=content_hash(content))


#: A batch of at least this many memories holds Python's cyclic garbage collection off while
#: it is written (see :func:`cycles_paused`).
GC_PAUSE_MIN = 256


@contextmanager
def cycles_paused(size: int) -> Iterator[None]:
    """Hold the cyclic garbage collector off while a batch of ``size`` memories is checked
    or written (``HTM.add_many`` lets it run while the embedder runs: that is user code).

    A large ``add_many`` allocates thousands of objects (records, memories, working-memory
    items) that live for the whole batch, so they outlive the young collections and count
    towards a full collection, which walks every object of the process: with 100,000
    memories in the caller's own lists that was about a tenth of the add path's time.
    Reference counting still frees everything at once; only cycles wait until the batch
    is written. Small batches, and a process that has switched the collector off itself,
    are left as they are; the collector is switched back on even when the batch fails.
    """
    if size < GC_PAUSE_MIN or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def after_commit(count: int, what: str, step: Callable[[], None]) -> None:
    """Run ``step``, a follow-up of a batch of ``count`` memories whose transaction has
    committed (queueing their enrichment, say).

    An error from ``add`` or ``add_many`` means nothing was written, so a store error here
    (a disk that filled up just after the commit) is logged as what it is, a follow-up not
    done for memories that are stored, and not raised.
    """
    try:
        step()
    except StoreError as exc:
        logger.warning("%d memories were stored, but %s failed: %s", count, what, exc)


def recall_args(query: Any, timeframe: Any, limit: Any, strategy: Any, tags: Any,
                robot: Any, *, clock: Clock, kinds: Any = None, sources: Any = None,
                min_confidence: Any = None) -> tuple[SearchFilters, str, int]:
    """``recall``'s arguments checked: the filters, the strategy and the limit."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidContentError("query is empty; give some text to recall by")
    check_content(query)
    strategy = check_recall_strategy(strategy)
    limit = check_limit(limit)
    start, end = parse_timeframe(timeframe, clock=clock)
    if robot is not None:
        check_key(robot)
    return SearchFilters(start=start, end=end, robot=robot, tags=check_tags(tags),
                         **provenance_filters(kinds, sources, min_confidence)), strategy, limit


def check_neighbors(neighbors: Any) -> int:
    """``recall``'s ``neighbors``: an integer from 0 to 20."""
    return check_int("neighbors", neighbors, 0, 20, error=ValidationError)


def check_include_summaries(value: Any) -> int:
    """``create_context``'s ``include_summaries``: an integer from 0 to 50."""
    return check_int("include_summaries", value, 0, 50)
    return value


def context_scope(tags: Iterable[str] | str | None, scope_working: bool) -> tuple[str, ...]:
    """The tags that scope a context's working-memory part (none unless ``scope_working``)."""
    scope = check_tags(tags) if scope_working else ()
    if scope_working and not scope:
        raise ValidationError("scope_working=True scopes the context by tags; give tags=[...] "
                              "(or leave scope_working False for the whole working memory)")
    return scope


def confirm_forget(key: Any, confirm: Any) -> str:
    """``forget``'s key checked, once ``confirm`` is True."""
    checked: str = check_key(key)
    if confirm is not True:
        raise ConfirmationRequiredError(
            f"forget({checked!r}) hides the memory from recall; call forget({checked!r}, "
            "confirm=True) to do it (it stays recoverable with restore until purge)")
    return checked


def confirm_purge(confirm: Any, key: Any) -> str | None:
    """``purge``'s optional key checked, once ``confirm`` is True."""
    if confirm is not True:
        raise ConfirmationRequiredError(
            "purge() deletes forgotten memories permanently; call purge(confirm=True)")
    return check_key(key) if key else None
