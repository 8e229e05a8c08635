"""A small in-memory long-term store for tests: every role of the store protocol.

It keeps memories in dicts and searches by brute force (cosine for vectors, shared words
for full text). It is not a backend to keep memories in: nothing survives ``close``, and
it is for one process. It shows that the role protocols in ``htm_core.store.base`` are all
a consumer needs, and it passes :class:`~htm_core.testing.StoreConformance`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from ..errors import (
    ConfirmationRequiredError,
    DimensionMismatchError,
    DuplicateKeyError,
    NotFoundError,
)
from ..jobs import InMemoryJobQueue, JobQueue
from ..models import Memory, Operation, Robot
from ..store.base import (
    SCHEMA_VERSION,
    UPDATE_FIELDS,
    AddResult,
    ArmQuery,
    Brief,
    EmbeddingFailure,
    NewMemory,
    SearchFilters,
    StoreCounts,
    WorkingChange,
    WorkingResult,
    WorkingRow,
    WorkingState,
    rare_terms,
)
from ..store.merging import merge_update, update_fields


def _words(text: str) -> set[str]:
    return {w for w in "".join(c.lower() if c.isalnum() else " " for c in text).split()}


class InMemoryStore:
    """Every ``LongTermStore`` role over plain Python objects (one process, no threads)."""

    backend = "memory"
    url = "memory://"

    def __init__(self) -> None:
        self._memories: dict[int, Memory] = {}
        self._robots: dict[str, Robot] = {}
        self._log: list[Operation] = []
        self._working: dict[str, dict[int, WorkingState]] = {}
        self._versions: dict[str, int] = {}
        self._history: dict[int, list[Memory]] = {}
        self._marks: dict[tuple[int, int], int] = {}  # (id, version) superseded: its mark
        self._failures: dict[int, EmbeddingFailure] = {}
        self._embedder: tuple[str, int] | None = None
        #: Window vectors by memory id, with the content hash they were made of (a window
        #: of another content, or of a memory without a vector, is gone).
        self._windows: dict[int, tuple[str, list[list[float]]]] = {}
        self._next_id = 1  # ids are never reused, also after a purge

    # -- Lifecycle ---------------------------------------------------------------------
    def schema_version(self) -> int:
        return SCHEMA_VERSION

    def migrate(self) -> int:
        return SCHEMA_VERSION

    def close(self) -> None:
        self._memories.clear()

    def open_job_queue(self) -> JobQueue:
        return InMemoryJobQueue()

    # -- Records -----------------------------------------------------------------------
    def _record(self, op: str, robot: str | None, key: str | None, **detail: Any) -> None:
        self._log.append(Operation(id=len(self._log) + 1, at=datetime.now(timezone.utc), op=op,
                                   robot=robot, key=key, detail=detail))

    def _visible(self, memory: Memory, filters: SearchFilters | None = None) -> bool:
        if memory.forgotten_at is not None:
            return False
        if filters is None:
            return True
        return ((filters.start is None or memory.created_at >= filters.start)
                and (filters.end is None or memory.created_at < filters.end)
                and (filters.robot is None or memory.robot == filters.robot)
                and filters.admits(memory.kind, memory.source, memory.confidence)
                and (not filters.tags or any(t == f or t.startswith(f + ":")
                                             for t in memory.tags for f in filters.tags)))

    def _changed(self, memory: Memory, **changes: Any) -> Memory:
        """Keep a copy of ``memory`` with ``changes`` in its place (one a caller holds stays
        as it was) and return it."""
        new = self._memories[memory.id] = replace(memory, **changes)
        return new

    def _by_key(self, key: str) -> Memory | None:
        return next((m for m in self._memories.values() if m.key == key), None)

    def ensure_robot(self, name: str, *, working_memory_tokens: int | None = None) -> Robot:
        if name not in self._robots:
            self._robots[name] = Robot(id=len(self._robots) + 1, name=name,
                                       created_at=datetime.now(timezone.utc))
        if working_memory_tokens is not None:
            self._robots[name] = replace(self._robots[name],
                                         working_memory_tokens=working_memory_tokens)
        return self._robots[name]

    def robots(self, *, tags: Sequence[str] | None = None) -> list[Robot]:
        counted = {r.name: sum(m.robot == r.name for m in self._memories.values()
                               if self._visible(m, SearchFilters(tags=tuple(tags or ()))))
                   for r in self._robots.values()}
        return sorted((replace(r, memory_count=counted[r.name]) for r in self._robots.values()
                       if not tags or counted[r.name]), key=lambda r: r.name)

    def add_many(self, records: Sequence[NewMemory]) -> list[AddResult]:
        self._check_batch(records)
        results = []
        for record in records:
            old = self._by_key(record.key)
            if old is not None:
                self._record("restore" if old.forgotten_at else "touch", record.robot, old.key)
                touched = self._changed(old, forgotten_at=None, access_count=old.access_count + 1)
                results.append(AddResult(touched, False))
                continue
            self.ensure_robot(record.robot)
            memory = Memory(
                id=self._next_id, key=record.key, content=record.content,
                robot=record.robot, importance=record.importance, token_count=record.token_count,
                created_at=record.created_at, last_accessed=record.last_accessed or record.created_at,
                access_count=record.access_count, forgotten_at=record.forgotten_at,
                tags=record.tags, metadata=dict(record.metadata),
                content_hash=record.content_hash, embedder=record.embedder,
                embedding=None if record.embedding is None else list(record.embedding),
                kind=record.kind, source=record.source, confidence=record.confidence)
            self._next_id += 1
            if memory.embedding is not None:
                self._embedder = self._embedder or (str(record.embedder), len(memory.embedding))
            self._memories[memory.id] = memory
            self._record("add", record.robot, record.key)
            results.append(AddResult(memory, True))
        return results

    def _check_batch(self, records: Sequence[NewMemory]) -> None:
        """Refuse the whole batch (nothing written) for a key holding other content or a
        vector of another dimension than the store's."""
        dims = {len(r.embedding) for r in records if r.embedding is not None}
        if self._embedder is not None:
            dims.add(self._embedder[1])
        if len(dims) > 1:
            raise DimensionMismatchError(f"vectors of dimension {sorted(dims)} in one store")
        for record in records:
            old = self._by_key(record.key)
            if old is not None and old.content != record.content:
                raise DuplicateKeyError(f"key {record.key!r} holds different content")

    def touch(self, ids: Sequence[int], *, at: datetime) -> None:
        for mid in ids:
            memory = self._memories[mid]
            self._changed(memory, last_accessed=at, access_count=memory.access_count + 1)

    def _existing(self, key: str) -> Memory:
        memory = self._by_key(key)
        if memory is None or memory.forgotten_at is not None:
            raise NotFoundError(f"no memory with key {key!r}")
        return memory

    def add_tags(self, key: str, tags: Sequence[str], *, robot: str) -> Memory:
        memory = self._existing(key)
        memory = self._changed(memory, tags=tuple(sorted({*memory.tags, *tags})))
        self._record("tag", robot, key, tags=sorted(set(tags)))
        return memory

    def set_importance(self, key: str, importance: float, *, robot: str) -> Memory:
        memory = self._changed(self._existing(key), importance=importance)
        self._record("importance", robot, key, importance=importance)
        return memory

    def get(self, key: str, *, include_forgotten: bool = False,
            include_embedding: bool = False) -> Memory | None:
        memory = self._by_key(key)
        if memory is None or (memory.forgotten_at is not None and not include_forgotten):
            return None
        return memory

    def get_many(self, ids: Sequence[int], *, include_embedding: bool = False,
                 include_forgotten: bool = False) -> list[Memory]:
        return [self._memories[i] for i in ids if i in self._memories
                and (include_forgotten or self._visible(self._memories[i]))]

    def keys_with_prefix(self, prefix: str, *, include_forgotten: bool = False) -> list[str]:
        return sorted(m.key for m in self._memories.values() if m.key.startswith(prefix)
                      and (include_forgotten or self._visible(m)))

    def list_memories(self, filters: SearchFilters, *, key_prefix: str | None = None,
                      include_forgotten: bool = False, order: str = "created_at",
                      descending: bool = False, limit: int = 100,
                      after: tuple[Any, int] | None = None,
                      as_of: int | None = None) -> list[Memory]:
        def matches(m: Memory) -> bool:
            shown = replace(m, forgotten_at=None) if include_forgotten else m
            return self._visible(shown, filters) and m.key.startswith(key_prefix or "")

        def place(m: Memory) -> tuple[Any, int]:
            if order == "importance" and as_of is not None:
                later = [v for v in self._history.get(m.id, []) if self._marks[(v.id, v.version)] > as_of]
                return (later[0] if later else m).importance, m.id
            return getattr(m, order), m.id

        rows = sorted((m for m in self._memories.values() if matches(m)), key=place,
                      reverse=descending)
        if after is not None:
            held = self._memories.get(after[1])
            mark = after if held is None else place(held)
            rows = [m for m in rows if (place(m) < mark if descending else place(m) > mark)]
        return rows[:limit]

    def tags(self) -> dict[str, int]:
        counted: dict[str, int] = {}
        for memory in self._memories.values():
            if self._visible(memory):
                for tag in memory.tags:
                    counted[tag] = counted.get(tag, 0) + 1
        return counted

    def counts(self, robot: str, *, tags: Sequence[str] | None = None) -> StoreCounts:
        within = SearchFilters(tags=tuple(tags or ()))
        held = [m for m in self._memories.values()
                if self._visible(replace(m, forgotten_at=None), within)]
        visible = [m for m in held if m.forgotten_at is None]
        return StoreCounts(
            total=len(visible), robot=sum(m.robot == robot for m in visible),
            forgotten=len(held) - len(visible),
            robots=len({m.robot for m in visible}) if tags else len(self._robots),
            missing_embeddings=sum(m.embedding is None for m in self._memories.values()
                                   if self._visible(m)))

    # -- Search ------------------------------------------------------------------------
    def _window_vectors(self, m: Memory) -> list[list[float]] | None:
        """The memory's windows (empty: it needs none); None when it has none yet."""
        held = self._windows.get(m.id)
        if held is None or held[0] != m.content_hash or m.embedding is None:
            return None
        return held[1]

    def _vector_hits(self, vector: Sequence[float], *, limit: int,
                     filters: SearchFilters, windows: bool = True) -> list[tuple[int, float]]:
        if self._embedder is not None and len(vector) != self._embedder[1]:
            raise DimensionMismatchError(f"a query of dimension {len(vector)}; the store's "
                                         f"vectors have dimension {self._embedder[1]}")
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0

        def cosine(other: Sequence[float]) -> float:
            size = math.sqrt(sum(x * x for x in other)) or 1.0
            return sum(a * b for a, b in zip(vector, other, strict=True)) / norm / size

        scored = []
        for m in self._memories.values():
            if m.embedding is not None and self._visible(m, filters):
                parts = [m.embedding, *((self._window_vectors(m) or []) if windows else [])]
                scored.append((m.id, max(cosine(v) for v in parts)))
        return sorted(scored, key=lambda hit: (-hit[1], hit[0]))[:limit]

    def _text_hits(self, query: str, *, limit: int,
                   filters: SearchFilters) -> list[tuple[int, float]]:
        terms = _words(query)
        scored = [(m.id, float(len(terms & _words(m.content)))) for m in self._memories.values()
                  if self._visible(m, filters)]
        return sorted([hit for hit in scored if hit[1] > 0], key=lambda hit: -hit[1])[:limit]

    def search_arms(self, arms: Sequence[ArmQuery]) -> list[list[tuple[int, float]]]:
        return [self._vector_hits(arm.vector, limit=arm.limit, filters=arm.filters,
                                  windows=arm.windows)
                if arm.vector is not None else
                self._text_hits(arm.text or "", limit=arm.limit, filters=arm.filters)
                for arm in arms]

    def briefs(self, ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        return {i: Brief(i, m.content, m.robot, m.created_at) for i in ids
                if (m := self._memories.get(i)) is not None and self._visible(m, filters)}

    def rare_terms(self, terms: Sequence[str], filters: SearchFilters) -> list[str]:
        held = [_words(m.content) for m in self._memories.values() if self._visible(m, filters)]
        return rare_terms(terms, len(held), lambda term, _cap: sum(
            set(term.split()) <= words for words in held))

    def vector_centroid(self) -> list[float] | None:
        vectors = [m.embedding for m in self._memories.values()
                   if m.embedding is not None and self._visible(m)]
        if not vectors:
            return None
        units = [[x / (math.sqrt(sum(y * y for y in v)) or 1.0) for x in v] for v in vectors]
        mean = [sum(column) / len(units) for column in zip(*units, strict=True)]
        norm = math.sqrt(sum(x * x for x in mean)) or 1.0
        return [x / norm for x in mean]

    # -- Forgetting --------------------------------------------------------------------
    def forget(self, key: str, *, robot: str, at: datetime) -> Memory:
        memory = self._changed(self._existing(key), forgotten_at=at)
        for states in self._working.values():
            states.pop(memory.id, None)
        self._record("forget", robot, key)
        return memory

    def restore(self, key: str, *, robot: str) -> Memory:
        memory = self._by_key(key)
        if memory is None:
            raise NotFoundError(f"no memory with key {key!r}")
        memory = self._changed(memory, forgotten_at=None)
        self._record("restore", robot, key)
        return memory

    def purge(self, *, robot: str, key: str | None = None) -> int:
        live = None if key is None else self._by_key(key)
        if live is not None and live.forgotten_at is None:
            raise ConfirmationRequiredError(f"memory {key!r} is not forgotten; forget it first")
        gone = [i for i, m in self._memories.items()
                if m.forgotten_at is not None and (key is None or m.key == key)]
        for i in gone:
            self._record("purge", robot, self._memories.pop(i).key)
            self._history.pop(i, None)
        return len(gone)

    # -- WorkingSet --------------------------------------------------------------------
    def _rows(self, robot: str) -> list[tuple[Memory, WorkingState]]:
        states = self._working.get(robot, {})
        return sorted(((self._memories[i], s) for i, s in states.items()
                       if i in self._memories and self._visible(self._memories[i])),
                      key=lambda row: row[1].seq)

    def working_rows(self, robot: str) -> tuple[int, list[WorkingRow]]:
        return self.working_version(robot), [WorkingRow(memory=m, state=s)
                                             for m, s in self._rows(robot)]

    def working_states(self, robot: str) -> tuple[int, dict[int, WorkingState]]:
        return self.working_version(robot), {
            m.id: replace(s, content_hash=m.content_hash, version=m.version)
            for m, s in self._rows(robot)}

    def working_version(self, robot: str) -> int:
        return self._versions.get(robot, 0)

    def recall_check(self, robot: str, ids: Sequence[int]) -> tuple[int, frozenset[int]]:
        visible = {m.id for m in self.get_many(list(ids))}
        return self.working_version(robot), frozenset(int(i) for i in ids if int(i) not in visible)

    def apply_working(self, change: WorkingChange, *,
                      expected_version: int | None = None) -> WorkingResult:
        in_step = expected_version is None or expected_version == self.working_version(change.robot)
        states = self._working.setdefault(change.robot, {})
        refused = set()
        for state in change.put:
            memory = self._by_key(state.key)
            if memory is None or not self._visible(memory):
                refused.add(state.key)
            else:
                states[memory.id] = state
        for key, named in change.evictions():  # one log line each, as the SQL stores write
            memory = self._memories.get(named) if named else self._by_key(key)
            if memory is not None:
                states.pop(memory.id, None)
            self._record("evict", change.robot, key)
        self.touch(change.touch, at=change.at)
        self._versions[change.robot] = self.working_version(change.robot) + 1
        return WorkingResult(self._versions[change.robot], in_step, frozenset(refused))

    def clear_working(self, robot: str) -> int:
        dropped = len(self._working.pop(robot, {}))
        self._versions[robot] = self.working_version(robot) + 1
        return dropped

    def add_and_enter(self, records: Sequence[NewMemory], *,
                      working: Callable[[list[AddResult]], WorkingChange | None],
                      expected_version: int | None = None,
                      ) -> tuple[list[AddResult], WorkingResult | None]:
        results = self.add_many(records)
        change = working(results)
        return results, (None if change is None
                         else self.apply_working(change, expected_version=expected_version))

    # -- OperationsLog -----------------------------------------------------------------
    def operations(self, *, limit: int = 100, robot: str | None = None,
                   op: str | None = None) -> list[Operation]:
        return [o for o in reversed(self._log)
                if (robot is None or o.robot == robot) and (op is None or o.op == op)][:limit]

    # -- Embeddings --------------------------------------------------------------------
    def embedding_info(self) -> tuple[str, int] | None:
        return self._embedder

    def set_embeddings(self, items: Sequence[tuple[int, Sequence[float]]], embedder: str) -> None:
        for mid, vector in items:
            self._embedder = self._embedder or (embedder, len(vector))
            self._changed(self._memories[mid], embedding=list(vector), embedder=embedder)
            self._failures.pop(mid, None)

    def reset_embeddings(self) -> None:
        self._embedder = None
        self._windows.clear()
        for memory in list(self._memories.values()):
            self._changed(memory, embedding=None, embedder=None)

    def find_embeddings(self, content_hashes: Sequence[str], embedder: str
                        ) -> dict[str, list[float]]:
        wanted = set(content_hashes)
        return {m.content_hash: m.embedding for m in self._memories.values()
                if m.content_hash in wanted and m.embedder == embedder and m.embedding is not None}

    def missing_embeddings(self, *, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        return [(m.id, m.content, m.metadata) for m in self._memories.values()
                if self._visible(m) and m.embedding is None and m.id not in self._failures][:limit]

    def mark_embedding_failures(self, failures: Sequence[tuple[int, str]], embedder: str) -> None:
        for mid, reason in failures:
            self._failures[mid] = EmbeddingFailure(key=self._memories[mid].key, embedder=embedder,
                                                   error=reason, failed_at=datetime.now(timezone.utc))

    def embedding_failures(self, *, limit: int = 100) -> list[EmbeddingFailure]:
        return list(self._failures.values())[:limit]

    def retry_embedding_failures(self) -> int:
        cleared = len(self._failures)
        self._failures.clear()
        return cleared

    # -- Windows -----------------------------------------------------------------------
    def set_windows(self, items: Sequence[tuple[int, str, Sequence[Sequence[float]]]]) -> int:
        done = 0
        for mid, digest, vectors in items:
            m = self._memories.get(mid)
            if m is not None and m.content_hash == digest and m.embedding is not None:
                self._windows[mid] = (digest, [list(v) for v in vectors])
                done += 1
        return done

    def missing_windows(self, *, window_words: int, limit: int
                        ) -> list[tuple[int, str, str, dict[str, Any]]]:
        return [(m.id, m.content_hash, m.content, m.metadata) for m in self._memories.values()
                if self._visible(m) and m.embedding is not None
                and m.content.count(" ") >= window_words
                and self._window_vectors(m) is None][:limit]

    def window_count(self) -> int:
        return sum(len(self._window_vectors(m) or []) for m in self._memories.values())

    # -- BulkLoad ----------------------------------------------------------------------
    def iter_memories(self, *, batch_size: int = 1000, include_forgotten: bool = True,
                      include_embedding: bool = False, after_id: int = 0) -> Iterator[list[Memory]]:
        chosen = [m for i, m in sorted(self._memories.items())
                  if i > after_id and (include_forgotten or self._visible(m))]
        for start in range(0, len(chosen), batch_size):
            yield chosen[start:start + batch_size]

    def bulk_load(self) -> AbstractContextManager[object]:
        return nullcontext(self)

    # -- Versions ----------------------------------------------------------------------
    def update_memory(self, record: NewMemory, *, robot: str, at: datetime,
                      read_version: int | None = None,
                      fields: Collection[str] = UPDATE_FIELDS,
                      strict: bool = False) -> Memory:
        old = self._existing(record.key)
        seen = [v for v in self._history.get(old.id, []) if v.version == read_version]
        base = seen[0] if seen else (old if read_version in (None, old.version) else None)
        changes = merge_update(record.key, record, fields, now=update_fields(old),
                               base=None if base is None else update_fields(base),
                               versions=(read_version, old.version), strict=strict)
        if not changes:
            return old
        changed = "content" in changes
        superseded = replace(old, superseded_at=at)
        self._history.setdefault(old.id, []).append(superseded)
        self._marks[(old.id, old.version)] = self.history_mark()
        new = replace(old, version=old.version + 1)
        if changed:
            new = replace(new, content=record.content, content_hash=record.content_hash,
                          token_count=record.token_count, embedder=record.embedder,
                          embedding=None if record.embedding is None else list(record.embedding))
        if "importance" in changes:
            new = replace(new, importance=record.importance)
        if "tags" in changes:
            new = replace(new, tags=tuple(sorted(set(record.tags))))
        if "metadata" in changes:
            new = replace(new, metadata=dict(record.metadata))
        new = replace(new, **{f: getattr(record, f) for f in ("kind", "source", "confidence")
                              if f in changes})
        self._memories[old.id] = new
        for name in {*self._working, *(r.name for r in self.robots())}:
            self._versions[name] = self._versions.get(name, 0) + 1  # every robot, as the stores
        self._record("update", robot, record.key, version=new.version, superseded=old.version)
        return new

    def history_mark(self) -> int:
        return sum(len(old) for old in self._history.values())

    def versions(self, key: str) -> list[Memory]:
        memory = self._by_key(key)
        return [] if memory is None else [*self._history.get(memory.id, []), memory]

    def search_history(self, arm: ArmQuery) -> list[tuple[Memory, float]]:
        scored = []
        for mid, old in self._history.items():
            if not self._visible(self._memories[mid], arm.filters):
                continue
            for version in old:
                if arm.vector is not None:
                    if version.embedding is None:
                        continue
                    norm = math.sqrt(sum(x * x for x in arm.vector)) or 1.0
                    other = math.sqrt(sum(x * x for x in version.embedding)) or 1.0
                    score = sum(a * b for a, b in zip(arm.vector, version.embedding,
                                                      strict=True)) / norm / other
                else:
                    score = float(len(_words(arm.text or "") & _words(version.content)))
                    if score <= 0:
                        continue
                scored.append((version, score))
        return sorted(scored, key=lambda hit: -hit[1])[:arm.limit]
