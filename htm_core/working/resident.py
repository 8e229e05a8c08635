"""The coherent resident set: one robot's working memory as a view of the store.

Working memory lives in the process, but the store is the truth. :class:`ResidentSet` keeps
the membership persisted exactly (a restart rebuilds the same working memory), checks the
robot's working-set version at each read (:meth:`~ResidentSet.sync`) and reloads when it
moved, stages every change and writes it in one transaction or rolls it back, and writes a
recall's changes behind (:meth:`~ResidentSet.flush`, after :data:`FLUSH_AFTER_READS` reads or
:data:`FLUSH_AFTER_SECONDS`), naming memory ids and versions, never keys. The guarantees:
docs/reliability.md ("Coherence", "Reads written behind"); the design: docs/decisions.md.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timezone

from ..clock import Clock, to_timestamp, utc_from_timestamp
from ..errors import MemoryTooLargeError
from ..models import Memory
from ..store.base import (
    AddResult,
    LongTermStore,
    NewMemory,
    WorkingChange,
    WorkingResult,
    WorkingRow,
    WorkingState,
)
from ..store.values import checked_instance
from .eviction import WorkingItem
from .memory import WorkingMemory

__all__ = ["ResidentSet"]

logger = logging.getLogger(__name__)

_Undo = list[tuple[str, WorkingItem | None, Memory | None]]
Evicted = Callable[[list[tuple[str, str]]], None]

#: A version no store reaches: the view is behind and catches up on the next sync.
_BEHIND = -1

#: Reads (recalls, reads by key) whose working-memory change may wait to be written.
FLUSH_AFTER_READS = 64

#: Seconds the oldest pending read may wait: checked on each read, and the delay the owner's
#: timer is armed with when a read starts a pending change (``on_pending``).
FLUSH_AFTER_SECONDS = 1.0


class _Pending:
    """What reads changed in working memory and the store does not have yet."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.reads = 0
        self.at: datetime | None = None
        self.touch: list[int] = []
        self.evict: list[tuple[str, int]] = []
        self.put: dict[str, None] = {}

    def add(self, at: datetime, touch: Sequence[int], evict: Sequence[tuple[str, int]],
            put: Iterable[str]) -> None:
        self.reads += 1
        self.at = at
        self.touch.extend(touch)
        self.evict.extend(evict)
        self.put.update(dict.fromkeys(put))


class ResidentSet:
    """A robot's working memory kept coherent with the store (docs/reliability.md, "Coherence").

    Not thread-safe on its own: the caller (``HTM``) holds its lock around each use.
    """

    def __init__(self, wm: WorkingMemory, store: LongTermStore, robot: str, *,
                 clock: Clock, on_evicted: Evicted | None = None,
                 on_pending: Callable[[float], None] | None = None) -> None:
        self.wm = wm
        self.memories: dict[str, Memory] = {}
        #: The robot's working-set version this view reflects; None: never loaded (reload
        #: on the next sync); -1: known to be behind (catch up on the next sync).
        self.version: int | None = None
        self._store = store
        self._robot = robot
        self._clock = clock
        self._undo: _Undo | None = None
        self._evicted: list[tuple[str, str]] = []
        self._on_evicted: Evicted = on_evicted or (lambda pairs: None)
        self._pending: _Pending | None = None
        #: ``(key, id, version)`` of each memory too large for the budget, logged once
        self._told_too_large: set[tuple[str, int, int]] = set()
        #: Called with :data:`FLUSH_AFTER_SECONDS` when a read starts a pending change: the
        #: owner then calls :meth:`flush` at the latest that much later (a timer).
        self.on_pending: Callable[[float], None] = on_pending or (lambda delay: None)

    # -- the facade's steps --------------------------------------------------------------

    def refresh(self, *, flush: bool = True, version: int | None = None) -> None:
        """Bring working memory up to date with the store (one cheap read when nothing
        moved), reporting what catching up evicted; first write what reads left pending
        (unless ``flush`` is False: a read adds to it). ``version``: the store's working-set
        version, when the caller has just read it."""
        if flush:
            self.flush()
        evicted = self.sync(version)
        if evicted:
            self._on_evicted(evicted)

    def settle(self, result: WorkingResult | None) -> None:
        """Commit the written change and report its evictions."""
        self._on_evicted(self.commit(result))

    def add_and_enter(self, records: Sequence[NewMemory]) -> list[AddResult]:
        """Store ``records`` and put them into working memory in one transaction (which
        also writes what reads left pending); each result's memory says whether it
        entered (``in_working_memory``)."""
        self.refresh(flush=False)
        pending, self._pending = self._pending, None
        shown: list[Memory] = []

        def working(results: list[AddResult]) -> WorkingChange:
            change, shown[:] = self.stage_enter([r.memory for r in results])
            return self._with_pending(change, pending)

        try:
            results, applied = self._store.add_and_enter(
                records, expected_version=self.version, working=working)
        except BaseException:
            self.rollback()
            self._pending = pending
            raise
        self.settle(applied)
        return [AddResult(m, r.created) for r, m in zip(results, shown, strict=True)]

    def recalled(self, memories: Sequence[Memory], at: datetime) -> dict[int, Memory]:
        """Count an access to each recalled memory and enter them (least relevant first, so a
        later, better hit never evicts an earlier one); return each one's new copy (the
        access counted, ``in_working_memory`` set) by id, leaving out those forgotten since
        they were read. The write waits (see :meth:`flush`)."""
        if not memories:
            self.refresh(flush=False)
            return {}
        # The version and the hits' visibility in one read (one round trip on a server).
        version, hidden = self._store.recall_check(self._robot, [m.id for m in memories])
        self.refresh(flush=False, version=version)
        accessed = at.astimezone(timezone.utc)
        # Marked resident in the same copy: :meth:`_enter` keeps the mark on each one that
        # enters and takes it off one too large for the budget.
        touched = [checked_instance(Memory, m, access_count=m.access_count + 1,
                                    last_accessed=accessed, in_working_memory=True)
                   for m in memories if m.id not in hidden]
        if not touched:
            return {}
        entered, evicted, shown = self._enter(touched[::-1], accessed=at)
        # Written later: the pending change takes each key's state when it is written.
        self._defer_parts(at, [m.id for m in touched], evicted, entered)
        return {m.id: m for m in shown}

    def retrieved(self, memory: Memory | None, at: datetime) -> Memory | None:
        """Count an access to a memory read by key (its working-memory item too), written
        at once with whatever reads left pending (a read by key is rare and explicit);
        return its new copy with the access counted."""
        self.refresh(flush=False)
        if memory is None:
            return None
        self._defer(self.stage_touch([memory.key], at=at, touch=[memory.id]))
        self.flush()
        return checked_instance(Memory, memory, access_count=memory.access_count + 1,
                                last_accessed=at.astimezone(timezone.utc))

    def flush(self) -> None:
        """Write what reads left pending, in one transaction. If that fails, the pending
        change is dropped (at most access statistics and the reads' membership are lost)
        and the view reloads from the store on its next sync; the error is raised."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        change = self._pending_change(pending)
        try:
            if change.put or change.evict:
                result = self._store.apply_working(change, expected_version=self.version)
            else:  # only access statistics: membership (and its version) unchanged
                self._store.touch(change.touch, at=change.at)
                result = None
        except BaseException:
            self.version = None
            raise
        self.settle(result)

    def close(self) -> None:
        """Write what recalls left pending; a failure is logged (closing goes on, at most
        access statistics and those recalls' membership are lost)."""
        try:
            self.flush()
        except Exception as exc:
            logger.warning("robot %s: recent recalls' working-memory changes were not written "
                           "on close: %s", self._robot, exc)

    @property
    def pending_reads(self) -> int:
        """How many reads wait to be written (see :meth:`flush`)."""
        return self._pending.reads if self._pending is not None else 0

    def _defer(self, change: WorkingChange) -> None:
        """Keep a read's staged change (already applied in the process) to write later;
        write everything pending once there is enough of it or it is old enough."""
        self._defer_parts(change.at, change.touch, change.evictions(),
                          [s.key for s in change.put])

    def _defer_parts(self, at: datetime, touch: Sequence[int],
                     evict: Sequence[tuple[str, int]], put: Iterable[str]) -> None:
        """:meth:`_defer` of a change given by its parts (``evict``: key and memory id of
        each eviction; ``put``: the keys entered)."""
        self._on_evicted(self.commit(None))
        now = time.monotonic()
        if self._pending is None:
            self._pending = _Pending(now)
            self.on_pending(FLUSH_AFTER_SECONDS)
        self._pending.add(at, touch, evict, put)
        if self._pending.reads >= FLUSH_AFTER_READS or \
                now - self._pending.started >= FLUSH_AFTER_SECONDS:
            self.flush()

    def _pending_change(self, pending: _Pending) -> WorkingChange:
        """The one change that writes ``pending``: every access counted, every eviction
        logged, each key's membership as it is now."""
        return _change(self._robot, pending.at or self._clock(), pending.touch, pending.evict,
                       [self.state(k) for k in pending.put if k in self.wm])

    def _with_pending(self, change: WorkingChange, pending: _Pending | None) -> WorkingChange:
        """``change`` (staged now) with what reads left pending written in front of it."""
        if pending is None:
            return change
        staged = {s.key for s in change.put}
        return _change(
            change.robot, change.at, [*pending.touch, *change.touch],
            [*pending.evict, *change.evictions()],
            [*(self.state(k) for k in pending.put if k in self.wm and k not in staged),
             *change.put])

    def ordered(self, strategy: str, limit: int,
                keep: Callable[[Memory], bool] | None = None) -> list[Memory]:
        """Resident memories in ``strategy`` order within ``limit`` tokens; with ``keep``,
        every resident one in that order that ``keep`` accepts (the caller applies the
        budget)."""
        self.refresh()
        # scoped: every resident item in strategy order (a limit whose budget holds them all)
        whole = math.ceil(self.wm.tokens / (1 - self.wm.safety_margin)) + 1
        items = self.wm.select(strategy, whole if keep is not None else limit)
        return [m for m in (self.memories.get(i.key) for i in items)
                if m is not None and (keep is None or keep(m))]

    def reimportance(self, key: str, importance: float) -> None:
        """Give the resident memory ``key`` a new importance (an enricher's later score);
        nothing else about it changes."""
        item = self.wm.peek(key)
        memory = self.memories.get(key)
        if item is None or memory is None:
            return
        self.memories[key] = checked_instance(Memory, memory, importance=importance)
        self.wm.remove(key)
        self.wm.add(key, item.content, tokens=item.token_count, importance=importance,
                    created_at=item.created_at, last_accessed=item.last_accessed,
                    access_count=item.access_count, seq=item.seq, access_seq=item.access_seq)

    # -- reading ------------------------------------------------------------------------

    def sync(self, version: int | None = None) -> list[tuple[str, str]]:
        """Catch up with the store if the persisted working set changed since this view
        was made (writing what reads left pending first); return what catching up had to
        evict (key, content). ``version``: the store's, when the caller has just read it."""
        if self.version is None:
            self._pending = None  # reloading from the store: the reads' part is dropped
            return self.reload()
        if (self._store.working_version(self._robot) if version is None else version) \
                == self.version:
            return []
        if self._pending is not None:
            self.flush()  # out of step now: the view catches up below
            if self.version is None:
                return self.reload()
        return self._catch_up()

    def reload(self) -> list[tuple[str, str]]:
        """Rebuild from the persisted working set: same items, state and order.

        Items that no longer fit (a smaller budget than the last instance's, or two
        instances of the robot writing at once) are evicted by policy, and the eviction is
        written back; the evicted (key, content) pairs are returned.
        """
        version, rows = self._store.working_rows(self._robot)
        renumbered = _unique_numbers(rows)
        self.wm.clear()
        self.memories.clear()
        dropped = self._load(renumbered)
        result = self._write_back(version, dropped, fixed=renumbered is not rows)
        if self.memories:
            logger.info("restored %d memories into %s's working memory", len(self.memories),
                        self._robot)
        return result

    def _catch_up(self) -> list[tuple[str, str]]:
        """Apply the difference between the persisted entries and this view: drop what
        left, re-enter what changed, fetch only the memories that are new here."""
        version, states = self._store.working_states(self._robot)
        numbers = [s.seq for s in states.values()]
        access = [s.access_seq for s in states.values()]
        if len(set(numbers)) != len(numbers) or len(set(access)) != len(access):
            return self.reload()  # two writers numbered at once: renumber everything
        wanted = {s.key: (mid, s) for mid, s in states.items()}
        for key, (_mid, state) in wanted.items():  # updated meanwhile: fetched again below
            held = self.memories.get(key)
            if held is not None and (
                    (state.content_hash and held.content_hash != state.content_hash)
                    or (state.version and held.version != state.version)):
                self.wm.remove(key)
                self.memories.pop(key)
        for key in [k for k in self.memories if k not in wanted]:
            self.wm.remove(key)
            self.memories.pop(key)
        again: list[WorkingRow] = []
        for key, (_mid, state) in wanted.items():
            memory = self.memories.get(key)
            if memory is not None and self.state(key) != state:
                self.wm.remove(key)
                again.append(WorkingRow(memory=memory, state=state))
        new = [mid for key, (mid, _s) in wanted.items() if key not in self.memories]
        again.extend(WorkingRow(memory=m, state=states[m.id])
                     for m in self._store.get_many(new))
        for row in again:
            self.memories.pop(row.memory.key, None)
        again.sort(key=lambda r: (r.state.seq, r.memory.id))
        return self._write_back(version, self._load(again), fixed=False)

    def _load(self, rows: Sequence[WorkingRow]) -> list[tuple[str, str]]:
        """Enter persisted entries with their saved state; return what had to leave."""
        dropped: list[tuple[str, str]] = []
        for row in rows:
            m, state = row.memory, row.state
            try:
                gone = self.wm.add(
                    m.key, m.content, tokens=m.token_count, importance=m.importance,
                    created_at=to_timestamp(m.created_at),
                    last_accessed=to_timestamp(state.last_accessed),
                    access_count=state.access_count, seq=state.seq, access_seq=state.access_seq)
            except MemoryTooLargeError:
                dropped.append((m.key, m.content))
                continue
            self.memories[m.key] = m if m.in_working_memory else \
                checked_instance(Memory, m, in_working_memory=True)
            for item in gone:
                self.memories.pop(item.key, None)
                dropped.append((item.key, item.content))
        return dropped

    def _write_back(self, version: int, dropped: list[tuple[str, str]], *,
                    fixed: bool) -> list[tuple[str, str]]:
        """Persist what loading changed (evictions, renumbering); settle the version."""
        if dropped or fixed:
            result = self._store.apply_working(WorkingChange(
                robot=self._robot, at=self._clock(), evict=[k for k, _ in dropped],
                put=[self.state(k) for k in self.memories] if fixed else ()),
                expected_version=version)
            self.version = result.version if result.in_step else _BEHIND
        else:
            self.version = version
        return dropped

    def state(self, key: str) -> WorkingState:
        """The persisted form of the resident item ``key``."""
        item = self.wm.peek(key)
        assert item is not None
        memory = self.memories.get(key)
        return checked_instance(  # one for every memory an add leaves resident
            WorkingState, key=key, last_accessed=utc_from_timestamp(item.last_accessed),
            access_count=item.access_count, seq=item.seq, access_seq=item.access_seq,
            # the memory this process shows: written only while it is still that version
            memory_id=memory.id if memory is not None else 0,
            version=memory.version if memory is not None else 0)

    # -- staging changes ----------------------------------------------------------------

    def stage_enter(self, memories: Sequence[Memory], *, accessed: datetime | None = None,
                    touch: Sequence[int] = ()) -> tuple[WorkingChange, list[Memory]]:
        """Put ``memories`` into working memory (evicting by policy) in the process and
        return the change to write, and each memory's copy with ``in_working_memory`` set
        (whether it entered); :meth:`commit` or :meth:`rollback` follows."""
        entered, evicted, shown = self._enter(memories, accessed=accessed)
        return _change(self._robot, self._clock(), touch, evicted,
                       [self.state(k) for k in entered]), shown

    def _enter(self, memories: Sequence[Memory], *, accessed: datetime | None
               ) -> tuple[list[str], list[tuple[str, int]], list[Memory]]:
        """:meth:`stage_enter`'s work in the process: the keys entered (and still resident),
        those evicted, each with the id of the memory it took out, and each memory's copy
        with ``in_working_memory`` set."""
        self.rollback()  # a retried transaction stages again from the same start
        held, wm = self.memories, self.wm
        # What :meth:`rollback` puts back: each key's state before the batch (the first
        # record of a key wins), the batch's keys now and each victim as it leaves.
        undo: _Undo = [(k, wm.peek(k), held.get(k))
                       for k in dict.fromkeys(m.key for m in memories)]
        pairs: list[tuple[str, str]] = []
        self._undo, self._evicted = undo, pairs
        entered: dict[str, None] = {}
        evicted: list[tuple[str, int]] = []
        outcomes = wm.add_checked(
            [(m.key, m.content, m.token_count, m.importance,
              to_timestamp(m.created_at),
              m.access_count) for m in memories],
            last_accessed=to_timestamp(accessed) if accessed is not None else None)
        shown: list[Memory] = []
        for memory, gone in zip(memories, outcomes, strict=True):
            if isinstance(gone, MemoryTooLargeError):
                self._tell_too_large(memory, gone)
                shown.append(memory if not memory.in_working_memory else
                             checked_instance(Memory, memory, in_working_memory=False))
                continue
            memory = memory if memory.in_working_memory else \
                checked_instance(Memory, memory, in_working_memory=True)
            shown.append(memory)
            held[memory.key] = memory
            entered[memory.key] = None
            for item in gone:  # every eviction is logged, even of an item of this batch
                left = held.pop(item.key, None)
                undo.append((item.key, item, left))
                evicted.append((item.key, left.id if left is not None else 0))
                pairs.append((item.key, item.content))
        return [k for k in entered if k in wm], evicted, shown

    def _tell_too_large(self, memory: Memory, error: MemoryTooLargeError) -> None:
        """Log ``error`` the first time this memory (this version of it) does not fit."""
        told = (memory.key, memory.id, memory.version)
        if told not in self._told_too_large:
            self._told_too_large.add(told)
            logger.warning("%s", error)

    def stage_touch(self, keys: Sequence[str], *, at: datetime,
                    touch: Sequence[int] = ()) -> WorkingChange:
        """Record an access to the resident ones of ``keys``; return the change to write."""
        self.rollback()
        undo: _Undo = []
        self._undo, self._evicted = undo, []
        put = []
        for key in keys:
            item = self.wm.peek(key)
            if item is None:
                continue
            undo.append((key, replace(item), self.memories.get(key)))
            self.wm.touch(key, at=to_timestamp(at))
            put.append(self.state(key))
        return WorkingChange(robot=self._robot, at=at, touch=touch, put=put)

    def commit(self, result: WorkingResult | None) -> list[tuple[str, str]]:
        """Keep the staged change (it is written); return the evicted (key, content)."""
        self._undo = None
        evicted, self._evicted = self._evicted, []
        if result is None:
            return evicted
        for key in result.refused:  # hidden in the store meanwhile: out of here too
            self.wm.remove(key)
            self.memories.pop(key, None)
        for key in result.stale:  # updated meanwhile: the next sync fetches it again
            self.wm.remove(key)
            self.memories.pop(key, None)
        if self.version is not None:
            self.version = result.version if result.in_step and not result.stale else _BEHIND
        return evicted

    def rollback(self) -> None:
        """Undo the staged change in the process (its write failed)."""
        undo, self._undo = self._undo, None
        self._evicted = []
        if not undo:
            return
        for key, _item, _memory in undo:
            self.wm.remove(key)
            self.memories.pop(key, None)
        seen: set[str] = set()
        for key, item, memory in undo:  # the first record of a key is its state before
            if key in seen:
                continue
            seen.add(key)
            if item is not None:
                self.wm.add(key, item.content, tokens=item.token_count,
                            importance=item.importance, created_at=item.created_at,
                            last_accessed=item.last_accessed, access_count=item.access_count,
                            seq=item.seq, access_seq=item.access_seq)
            if memory is not None:
                self.memories[key] = memory

    def forget(self, key: str) -> None:
        """Drop ``key`` here; the store's forget already took it out of every working set
        (and bumped the versions, so other views reload)."""
        self.wm.remove(key)
        self.memories.pop(key, None)

    def clear(self) -> int:
        """Empty the working memory here and in the store; return how many left."""
        self.flush()
        gone = self.wm.clear()
        self.memories.clear()
        self._store.clear_working(self._robot)
        self.version = _BEHIND
        return len(gone)


def _change(robot: str, at: datetime, touch: Sequence[int], evict: Sequence[tuple[str, int]],
            put: Sequence[WorkingState]) -> WorkingChange:
    """A :class:`WorkingChange` whose evictions are given as (key, memory id) pairs."""
    return WorkingChange(robot=robot, at=at, touch=touch, put=put,
                         evict=[k for k, _ in evict], evict_ids=[i for _, i in evict])


def _unique_numbers(rows: list[WorkingRow]) -> list[WorkingRow]:
    """``rows`` (entry order), or a renumbered copy when order numbers repeat (two instances
    of one robot numbered items at once): relative order kept, ties broken by memory id."""
    seqs = [r.state.seq for r in rows]
    access = [r.state.access_seq for r in rows]
    if len(set(seqs)) == len(seqs) and len(set(access)) == len(access):
        return rows
    by_access = sorted(rows, key=lambda r: (r.state.access_seq, r.memory.id))
    access_rank = {r.memory.id: n for n, r in enumerate(by_access, 1)}
    return [WorkingRow(memory=r.memory, state=replace(
        r.state, seq=n, access_seq=access_rank[r.memory.id])) for n, r in enumerate(rows, 1)]
