"""Digests in the store: :class:`Consolidator` writes, lists and rebuilds them.

A digest is an ordinary memory: one per scope (the whole store, a user, a session) and
period (a day, an ISO week, a month in a time zone), under a stable key, made from the
scope's memories of the day, or from the lower digests (a week from its days', a month
from its weeks'). Re-running with the same sources writes nothing; new sources make a new
version (``HTM.update``). When a source is forgotten, every digest built on it, up the
tree, is deleted with its history and written again without it. The rules and examples:
docs/consolidation.md ("Consolidating").
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

from ..clock import Clock
from ..enrich.attach import SUMMARY_TAG
from ..errors import (
    ConflictError,
    DuplicateKeyError,
    HTMError,
    NotFoundError,
    TimeframeError,
    ValidationError,
)
from ..jobs import Job, JobRunner, TokenBucket
from ..models import Memory
from ..scope import ROOT, ChatScope
from ..store import LongTermStore, SearchFilters
from ..store.base import EnrichmentStore, capability
from ..validation import check_int
from .base import DigestStrategy, SourceItem, check_target
from .kinds import KINDS
from .periods import PERIOD_KINDS, Period, children, parent, parse_period, period_of, zone_of
from .summarisers import strategy_named

__all__ = ["CONSOLIDATE", "DEFAULT_TARGETS", "DIGEST_TAG", "SOURCE_KINDS", "Consolidator",
           "DigestScope", "Plan", "Writers", "digest_fields", "is_digest"]

logger = logging.getLogger(__name__)

#: The tag every digest carries (beside its scope's tags).
DIGEST_TAG = "digest"
#: The job kind of a queued consolidation.
CONSOLIDATE = "consolidate"
#: The token target of a digest when none is given, by period kind.
DEFAULT_TARGETS = {"day": 300, "week": 500, "month": 800}
#: How far back of a memory's time a day digest built on it starts (a day lasts at most 25
#: hours, in any zone); a week or month digest built on a digest, at most six weeks back.
_DAY_REACH = timedelta(hours=26)
_REACH = timedelta(days=45)
_PAGE = 1000


#: The kinds of memory a day's digest is made of: all but digests and summaries.
SOURCE_KINDS = tuple(k for k in KINDS if k not in ("digest", "summary"))


def digest_fields() -> dict[str, Any]:
    """The fields of ``add`` that mark a memory as a digest, beyond its metadata."""
    return {"kind": "digest"}


def is_digest(memory: Memory) -> bool:
    """Whether ``memory`` is a digest written here: of kind ``digest``, with its
    ``metadata["digest"]``."""
    return memory.kind == "digest" and isinstance(memory.metadata.get("digest"), dict)


def _is_source(memory: Memory) -> bool:
    """Whether a memory may go into a day's digest: neither a digest nor a summary."""
    return memory.kind in SOURCE_KINDS and SUMMARY_TAG not in memory.tags


@dataclass(frozen=True)
class DigestScope:
    """Whose digest: the whole store (``chat`` None) or a conversation scope."""

    chat: ChatScope | None = None

    @classmethod
    def of(cls, scope: Any = None, *, user_id: str | None = None,
           session_id: str | None = None) -> DigestScope:
        """The scope of ``scope=`` (a :class:`~htm_core.scope.ChatScope` or None) or of the
        ids (checked as every surface checks them); not both."""
        if scope is not None and (user_id is not None or session_id is not None):
            raise ValidationError("give scope= or user_id=/session_id=, not both")
        if scope is not None and not isinstance(scope, ChatScope):
            raise ValidationError(f"scope must be a ChatScope (ChatScope.of(user_id=...)) or "
                                  f"None for the whole store, got {type(scope).__name__}")
        if user_id is None and session_id is None:
            return cls(scope)
        return cls(ChatScope.of(user_id=user_id, session_id=session_id))

    @classmethod
    def from_tag(cls, tag: str) -> DigestScope:
        """The scope a digest's ``metadata["digest"]["scope"]`` names."""
        if tag == "robot":
            return cls(None)
        parts = tag.split(":")
        named = dict(zip(parts[1::2], parts[2::2], strict=False))
        if parts[0] != ROOT or len(parts) not in (3, 5) or set(named) - {"user", "session"}:
            raise ValidationError(f"{tag!r} is not a digest scope")
        return cls(ChatScope(user=named.get("user"), session=named.get("session")))

    @property
    def tag(self) -> str:
        """``"robot"`` or the conversation scope's tag (``chat:user:ada``)."""
        return "robot" if self.chat is None else self.chat.tag

    @property
    def prefix(self) -> str:
        """How the keys of this scope's digests begin."""
        return "digest:" if self.chat is None else f"{self.chat.tag}:digest:"

    def key(self, period: Period) -> str:
        """The digest key of ``period`` in this scope."""
        return self.prefix + period.key

    @property
    def filter_tags(self) -> tuple[str, ...]:
        """The tag filter of this scope's memories (none: the whole store)."""
        return () if self.chat is None else (self.chat.tag,)

    @property
    def stored_tags(self) -> list[str]:
        """The tags a digest of this scope carries."""
        return [DIGEST_TAG] if self.chat is None else [*self.chat.stored_tags(None), DIGEST_TAG]


@dataclass(frozen=True)
class Plan:
    """A consolidation, checked: whose digests (``scope``), of which ``period``, made with
    which ``strategy``, at most how long (``target``; None: :data:`DEFAULT_TARGETS`)."""

    scope: DigestScope
    period: Period
    strategy: DigestStrategy
    target: int | None

    def target_of(self, period: Period) -> int:
        return self.target if self.target is not None else DEFAULT_TARGETS[period.kind]


@dataclass(frozen=True, kw_only=True)
class Writers:
    """The facade's writes a :class:`Consolidator` uses: ``add(items)`` (long-term only,
    embedded), ``update(key, content, metadata=, expected_version=)``, and ``forget`` /
    ``purge`` of one key without the consolidator's own hook."""

    add: Callable[[list[dict[str, Any]]], list[Memory]]
    update: Callable[..., Memory]
    forget: Callable[[str], Any]
    purge: Callable[[str], Any]


def _signature(items: Iterable[Memory]) -> str:
    raw = ",".join(f"{m.id}.{m.version}" for m in items)
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _item(memory: Memory) -> SourceItem:
    return SourceItem(text=memory.content, id=memory.id, key=memory.key,
                      embedding=tuple(memory.embedding) if memory.embedding else None,
                      created_at=memory.created_at)


def _utc_iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat()


class Consolidator:
    """Makes, lists and rebuilds digests over one store (see the module docstring).

    Args:
        store: the long-term store (read for sources and digests).
        writers: the facade's writes (:class:`Writers`).
        clock: the facade's clock (the default time zone and "now").
        token_counter: what the strategies count with.
        runner_options: the enrichment job options (``requests_per_second`` ...), used by
            the consolidation worker and, as a rate limit, by model strategies named here.
    """

    def __init__(self, store: LongTermStore, writers: Writers, *, clock: Clock,
                 token_counter: Any = None,
                 runner_options: Mapping[str, Any] | None = None) -> None:
        self._store = store
        self._writers = writers
        self._clock = clock
        self._counter = token_counter
        self._options = dict(runner_options or {})
        self._limiter: TokenBucket | None = None
        self._worker: JobRunner | None = None
        self._strategies: dict[str, DigestStrategy] = {}
        self._lock = threading.Lock()

    # -- asking ----------------------------------------------------------------------

    def strategy(self, strategy: Any, chat_model: Any = None) -> DigestStrategy:
        """``strategy`` as a strategy object: one given, or one named (a model strategy
        needs ``chat_model``)."""
        if isinstance(strategy, str):
            options: dict[str, Any] = {}
            if strategy.strip().lower() != "extractive" and chat_model is not None:
                options["limiter"] = self._rate_limit()
            return strategy_named(strategy, chat_model=chat_model,
                                  token_counter=self._counter, **options)
        if callable(getattr(strategy, "summarise", None)) and isinstance(
                getattr(strategy, "name", None), str):
            return strategy  # type: ignore[no-any-return]
        raise ValidationError(f"strategy must be a name ('extractive', 'simple', "
                              f"'hierarchical', 'map-reduce') or a digest strategy object, got "
                              f"{strategy!r}")

    def _rate_limit(self) -> TokenBucket | None:
        """The bucket every model request of a strategy named here waits on: the jobs'
        ``requests_per_second`` (and ``burst``), shared by every such strategy."""
        rate = self._options.get("requests_per_second")
        with self._lock:
            if self._limiter is None and rate is not None:
                self._limiter = TokenBucket(rate, self._options.get("burst", 1.0))
            return self._limiter

    def period(self, kind: Any, at: Any = None, tz: Any = None) -> Period:
        """The period of ``kind`` holding ``at`` in ``tz`` (default: the clock's zone);
        without ``at``, the last complete one."""
        if kind not in PERIOD_KINDS:
            raise TimeframeError(f"period must be one of {', '.join(PERIOD_KINDS)}, got "
                                 f"{kind!r}")
        zone = tz if tz is not None else self._clock().tzinfo
        name = zone_of(zone)[0]
        if at is None:
            current = period_of(self._clock(), kind, name)
            return period_of(current.start - timedelta(microseconds=1), kind, name)
        return period_of(_moment(at, kind, name), kind, name)

    def plan(self, kind: Any, *, at: Any = None, tz: Any = None, scope: Any = None,
             user_id: str | None = None, session_id: str | None = None,
             strategy: Any = "extractive", target_tokens: Any = None,
             chat_model: Any = None) -> Plan:
        """Every argument of a consolidation checked, before anything is written."""
        period = self.period(kind, at, tz)
        where = DigestScope.of(scope, user_id=user_id, session_id=session_id)
        target = None if target_tokens is None else check_target(target_tokens)
        return Plan(where, period, self.strategy(strategy, chat_model), target)

    # -- consolidating ----------------------------------------------------------------

    def consolidate(self, plan: Plan) -> list[Memory]:
        """The digests of ``plan.period`` and of the lower periods it is made from, lowest
        first, the period's own last (those with nothing to digest are left out)."""
        return self._tree(plan, plan.period)

    def _tree(self, plan: Plan, period: Period) -> list[Memory]:
        made: list[Memory] = []
        now = self._clock()
        for child in children(period):
            if child.start <= now:
                made.extend(self._tree(plan, child))
        own = self._make(plan, period)
        return [*made, own] if own is not None else made

    def _make(self, plan: Plan, period: Period) -> Memory | None:
        """Write (or leave as it is) the digest of ``period`` in ``plan.scope``."""
        key = plan.scope.key(period)
        existing = self._current(key)
        sources = self._sources(plan.scope, period)
        signature = _signature(sources)
        if existing is not None and _unchanged(existing, signature, plan, period):
            return existing
        if not sources:
            if existing is not None:  # its sources left the scope: nothing to digest now
                self._drop(existing)
            return None
        target = plan.target_of(period)
        digest = plan.strategy.summarise([_item(m) for m in sources], target)
        if not digest.text.strip():  # nothing worth a sentence (emoji, punctuation)
            if existing is not None:
                self._drop(existing)
            return None
        self._strategies[plan.strategy.name] = plan.strategy
        below = [m.key for m in sources] if period.kind != "day" else []
        metadata = {"digest": _metadata(plan, period, digest.sources, signature, target, below)}
        return self._write(key, digest.text, metadata, period, plan.scope, existing)

    def _current(self, key: str) -> Memory | None:
        """The digest under ``key`` that may be kept or updated; one that is forgotten, or
        built on a source no longer there (forgotten, purged or rebuilt), is deleted with
        its history first (its text may hold a forgotten one)."""
        existing = self._store.get(key, include_forgotten=True)
        if existing is None:
            return None
        if not is_digest(existing):
            raise DuplicateKeyError(f"key {key!r}, where this digest belongs, holds a memory "
                                    "that is not a digest; forget and purge that memory (add "
                                    "it again under another key to keep it), then "
                                    "consolidate again")
        if existing.forgotten_at is None and not self._tainted(existing):
            return existing
        self._drop(existing)
        return None

    def _tainted(self, digest: Memory) -> bool:
        ids = [int(s["id"]) for s in digest.metadata["digest"].get("sources", [])]
        return len(self._store.get_many(ids)) != len(set(ids))

    def _drop(self, digest: Memory) -> None:
        """Delete ``digest`` and every version of it (done already by another writer: fine)."""
        try:
            if digest.forgotten_at is None:
                self._writers.forget(digest.key)
            self._writers.purge(digest.key)
        except NotFoundError:
            pass

    def _sources(self, scope: DigestScope, period: Period) -> list[Memory]:
        """What the digest of ``period`` is made of: the scope's memories of the day, or
        the digests of its days (a week) or weeks (a month), in order."""
        if period.kind != "day":
            found = [self._store.get(scope.key(c)) for c in children(period)]
            return [m for m in found if m is not None and is_digest(m)]
        filters = SearchFilters(start=period.start, end=period.end, tags=scope.filter_tags,
                                kinds=SOURCE_KINDS)
        out = [m for m in self._every(filters) if _is_source(m)]
        by_id = {m.id: m for m in self._store.get_many([m.id for m in out],
                                                        include_embedding=True)}
        return [by_id.get(m.id, m) for m in out]

    def _every(self, filters: SearchFilters) -> Iterator[Memory]:
        """Every visible memory passing ``filters``, in creation order, a page at a time."""
        after: tuple[Any, int] | None = None
        while True:
            page = self._store.list_memories(filters, limit=_PAGE, after=after)
            yield from page
            if len(page) < _PAGE:
                return
            after = (page[-1].created_at, page[-1].id)

    def _write(self, key: str, text: str, metadata: dict[str, Any], period: Period,
               scope: DigestScope, existing: Memory | None) -> Memory:
        if existing is not None:
            try:
                return self._writers.update(key, text, metadata=metadata,
                                            expected_version=existing.version)
            except (ConflictError, NotFoundError):
                existing = self._current(key)  # another writer got there first: once more
                if existing is not None:
                    return self._writers.update(key, text, metadata=metadata)
        item = {"content": text, "key": key, "tags": scope.stored_tags, "metadata": metadata,
                "created_at": period.start, **digest_fields()}
        try:
            return self._writers.add([item])[0]
        except DuplicateKeyError:
            existing = self._current(key)  # written meanwhile by another process
            if existing is None:
                raise
            return self._writers.update(key, text, metadata=metadata)

    # -- listing ---------------------------------------------------------------------

    def digests(self, kind: Any = None, *, scope: Any = None, user_id: str | None = None,
                session_id: str | None = None, limit: int = 100) -> list[Memory]:
        """The scope's digests (of one period kind, or all), newest period first."""
        if kind is not None and kind not in PERIOD_KINDS:
            raise TimeframeError(f"period must be one of {', '.join(PERIOD_KINDS)} or None, "
                                 f"got {kind!r}")
        check_int("limit", limit, 1, 10_000)
        where = DigestScope.of(scope, user_id=user_id, session_id=session_id)
        prefix = where.prefix + (f"{kind}:" if kind else "")
        page = self._store.list_memories(SearchFilters(kinds=("digest",)), key_prefix=prefix,
                                         descending=True, limit=limit)
        return [m for m in page if is_digest(m)]

    # -- forgetting ------------------------------------------------------------------

    def forgotten(self, memory: Memory) -> None:
        """``memory`` was forgotten (or purged): rebuild every digest built on it, up the
        tree; one that cannot be rebuilt here is deleted (the next consolidate writes it)."""
        reach = _REACH if memory.kind == "digest" else _DAY_REACH
        filters = SearchFilters(start=memory.created_at - reach,
                                end=memory.created_at + timedelta(microseconds=1),
                                kinds=("digest",))
        hit = [d for d in self._every(filters)
               if is_digest(d) and any(s.get("id") == memory.id
                                       for s in d.metadata["digest"].get("sources", []))]
        for digest in sorted(hit, key=lambda d: PERIOD_KINDS.index(
                d.metadata["digest"]["kind"])):
            self._rebuild(digest)

    def _rebuild(self, digest: Memory) -> None:
        """Make ``digest`` again from what is there now, then its parents, up the tree."""
        info = digest.metadata["digest"]
        scope = DigestScope.from_tag(info["scope"])
        period: Period | None = parse_period(info["period"])
        while period is not None:
            current = self._store.get(scope.key(period), include_forgotten=True)
            if current is None or not is_digest(current):
                return
            self._remake(scope, period, current)
            period = parent(period)

    def _remake(self, scope: DigestScope, period: Period, current: Memory) -> None:
        """Rebuild ``current`` with its own strategy and target; when that strategy is not
        at hand (a model this object was not given) or fails, delete it instead."""
        info = current.metadata["digest"]
        strategy = self._known(info.get("strategy"))
        if strategy is not None:
            try:
                self._make(Plan(scope, period, strategy, info.get("target_tokens")), period)
                return
            except HTMError as exc:
                logger.warning("digest %s could not be rebuilt; it is deleted until the next "
                               "consolidate: %s", current.key, exc)
        still = self._store.get(current.key, include_forgotten=True)
        if still is not None and still.id == current.id:
            self._drop(still)

    def _known(self, name: Any) -> DigestStrategy | None:
        """The strategy called ``name`` last used here, else one made by name (None when it
        needs a model)."""
        if not isinstance(name, str):
            return None
        if name in self._strategies:
            return self._strategies[name]
        try:
            return self.strategy(name)
        except HTMError:
            return None

    # -- background ------------------------------------------------------------------

    def schedule(self, plan: Plan) -> int:
        """Queue ``plan`` as a ``consolidate`` job for the worker (started here once)."""
        payload = {"period": plan.period.key, "scope": plan.scope.tag,
                   "strategy": plan.strategy.name, "target_tokens": plan.target}
        self._strategies[plan.strategy.name] = plan.strategy
        return self._runner().submit(CONSOLIDATE, plan.scope.key(plan.period), payload)

    def _runner(self) -> JobRunner:
        with self._lock:
            if self._worker is None:
                queue = capability(self._store, EnrichmentStore,
                                   "consolidating in the background").open_job_queue()
                self._worker = JobRunner(queue, {CONSOLIDATE: self._run_job},
                                         name="htm-consolidate", **self._options)
                self._worker.start()
            return self._worker

    def _run_job(self, job: Job) -> None:
        payload = job.payload
        period = parse_period(payload["period"])
        strategy = self._known(payload["strategy"])
        if strategy is None:
            raise ValidationError(f"the {payload['strategy']!r} strategy needs a chat model; "
                                  "this worker was not given one (schedule_consolidation("
                                  "..., chat_model=...) in this process)")
        plan = Plan(DigestScope.from_tag(payload["scope"]), period, strategy,
                     payload.get("target_tokens"))
        self.consolidate(plan)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until no queued consolidation is pending; False on timeout."""
        return True if self._worker is None else self._worker.flush(timeout)

    def stop(self) -> None:
        """Stop the worker (queued jobs stay for the next one)."""
        if self._worker is not None:
            self._worker.stop(timeout=10)


def _unchanged(existing: Memory, signature: str, plan: Plan, period: Period) -> bool:
    info = existing.metadata["digest"]
    return bool(info.get("inputs") == signature and info.get("strategy") == plan.strategy.name
            and info.get("target_tokens") == plan.target_of(period))


def _metadata(plan: Plan, period: Period, sources: Sequence[SourceItem], signature: str,
              target: int, child_keys: list[str]) -> dict[str, Any]:
    return {"period": period.key, "kind": period.kind, "label": period.label,
            "tz": period.tz, "start": _utc_iso(period.start), "end": _utc_iso(period.end),
            "scope": plan.scope.tag, "strategy": plan.strategy.name, "target_tokens": target,
            "sources": [{"id": s.id, "key": s.key} for s in sources],
            "children": child_keys, "inputs": signature}


def _moment(at: Any, kind: str, tz: str) -> datetime | date:
    """``at`` as a time: a ``datetime``, a ``date``, or a string (a date ``2026-11-28``,
    an ISO date-time, or a label of the period's own kind such as ``2026-W48``)."""
    if isinstance(at, (datetime, date)):
        return at
    if isinstance(at, str):
        text = at.strip()
        try:
            period = parse_period(text, tz)
        except TimeframeError:
            period = None
        if period is not None and period.kind in ("day", kind):
            return period.start
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    raise TimeframeError(f"at must be a datetime, a date, or a string such as '2026-11-28', "
                         f"'2026-11-28T15:00:00+00:00' or a {kind} label "
                         f"({'2026-W48' if kind == 'week' else '2026-11'} for a "
                         f"{'week' if kind == 'week' else 'month'}), got {at!r}")
