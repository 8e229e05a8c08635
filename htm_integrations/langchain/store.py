"""``HTMStore``: htm as a LangGraph ``BaseStore`` (long-term memory for graphs and agents).

``graph = builder.compile(store=HTMStore(htm=htm))``: nodes get it as ``runtime.store``. A
namespace is a hierarchical tag (``("users", "alice")`` is ``lgstore:users:alice``) and the
scope of every operation; an item is a memory keyed ``lgstore:<namespace tag>|<key>``;
``search`` with a query is hybrid recall inside the namespace, without one a page of
``htm.list``; a ``put`` over an item is one ``htm.update``; ``delete`` and TTL expiry
forget, recoverably. The whole mapping: docs/langchain.md ("LangGraph store: ``HTMStore``").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import operator
import re
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import Any

from htm_core import run_async
from htm_core.clock import Clock
from htm_core.errors import (
    ConflictError,
    HTMError,
    InvalidBudgetError,
    NotFoundError,
    ValidationError,
    missing_extra,
)
from htm_core.identity import has_prefix
from htm_core.models import Memory
from htm_core.tags import carries_tag
from htm_core.validation import MAX_KEY_LENGTH, check_content, check_importance

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        validate_op_namespace,
    )
    from langgraph.store.base.embed import get_text_at_path
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langgraph", "langgraph") from None

__all__ = ["HTMStore", "decode_label", "encode_label", "namespace_tag"]

logger = logging.getLogger(__name__)

ROOT_TAG = "lgstore"
_OPTIONS = ("htm", "robot", "fields", "importance", "ttl", "clock")
_TTL_KEYS = ("default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired")
#: How often a put reads and writes again when another put landed in between.
_PUT_ATTEMPTS = 5
_PLAIN = re.compile(r"[A-Za-z0-9_\-]")
_ESCAPED = re.compile(r"((?:\.[0-9a-f]{2})+)")
#: LangGraph's filter operators; an order against a missing field is False.
_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "$eq": operator.eq, "$ne": operator.ne, "$gt": operator.gt, "$gte": operator.ge,
    "$lt": operator.lt, "$lte": operator.le}


def encode_label(label: str) -> str:
    """A namespace label as a tag segment (reversible; see docs/langchain.md, "Namespace → tag")."""
    return "".join(ch if _PLAIN.match(ch) else
                   "".join(f".{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
                   for ch in label)


def decode_label(segment: str) -> str:
    """Undo :func:`encode_label`."""
    return _ESCAPED.sub(
        lambda m: bytes.fromhex(m.group(1).replace(".", "")).decode("utf-8", "surrogatepass"),
        segment)


def namespace_tag(namespace: tuple[str, ...]) -> str:
    """The htm tag of a namespace (``lgstore`` for the empty prefix)."""
    return ":".join([ROOT_TAG, *(encode_label(label) for label in namespace)])


def _matches(value: dict[str, Any], conditions: dict[str, Any] | None) -> bool:
    """LangGraph's filter: exact values, or ``{"$op": x}`` with $eq/$ne/$gt/$gte/$lt/$lte."""
    for field, condition in (conditions or {}).items():
        actual = value.get(field)
        if isinstance(condition, dict) and condition and all(k.startswith("$") for k in condition):
            for op, expected in condition.items():
                if op not in _OPERATORS:
                    raise ValidationError(f"unknown filter operator {op!r}; use one of "
                                          f"{sorted(_OPERATORS)}")
                try:
                    if (actual is None and op not in ("$eq", "$ne")) \
                            or not _OPERATORS[op](actual, expected):
                        return False
                except TypeError:
                    return False
        elif actual != condition:
            return False
    return True


def _minutes(value: Any, what: str) -> float | None:
    """A TTL or interval in minutes: ``None`` or a positive finite number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value <= 0:
        raise ValidationError(f"{what} must be a positive number of minutes (None: no expiry), "
                              f"got {value!r}")
    return float(value)


def _ttl_config(ttl: Any) -> TTLConfig | None:
    """LangGraph's ``TTLConfig``, checked: known keys, minutes positive, flags booleans."""
    if ttl is None:
        return None
    if not isinstance(ttl, dict):
        raise ValidationError(f"ttl must be a TTLConfig dict such as {{'default_ttl': 60}}, got "
                              f"{type(ttl).__name__}")
    unknown = sorted(set(ttl) - set(_TTL_KEYS))
    if unknown:
        raise ValidationError(f"unknown ttl settings {unknown}; TTLConfig takes "
                              f"{', '.join(_TTL_KEYS)}")
    _minutes(ttl.get("default_ttl"), "default_ttl")
    _minutes(ttl.get("sweep_interval_minutes"), "sweep_interval_minutes")
    for flag in ("refresh_on_read", "omit_expired"):
        if not isinstance(ttl.get(flag, True), bool):
            raise ValidationError(f"ttl {flag} must be True or False, got {ttl[flag]!r}")
    return TTLConfig(**ttl)  # type: ignore[typeddict-item]


def _namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """LangGraph's prefix/suffix match, where ``"*"`` matches any one label."""
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    if not path:
        return True
    part = namespace[:len(path)] if condition.match_type == "prefix" else namespace[-len(path):]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


class HTMStore(BaseStore):
    """A LangGraph ``BaseStore`` over an :class:`htm_core.HTM`.

    Args:
        htm: the memory; items are written by its robot.
        robot: search only items written by this robot (default every robot).
        fields: JSON paths of the value to make the searchable text of each item (as
            LangGraph's ``index={"fields": [...]}``); default the whole value as JSON.
        importance: the importance of stored items (0 to 10, default 1.0).
        ttl: LangGraph's ``TTLConfig``: ``default_ttl`` (minutes, for puts that give no
            ``ttl``), ``refresh_on_read`` (default True), ``sweep_interval_minutes`` (for
            :meth:`start_ttl_sweeper`); expired items are always omitted (``omit_expired``).
        clock: where expiry reads the time (default the ``HTM``'s clock).

    Example:
        >>> from htm_core import HTM
        >>> store = HTMStore(htm=HTM(database_url=":memory:", embedder="hashing"))
        >>> store.put(("users", "ada"), "pref", {"text": "Ada prefers tea"})
        >>> store.search(("users",), query="tea")[0].value
        {'text': 'Ada prefers tea'}
    """

    supports_ttl = True

    def __init__(self, *, htm: Any, robot: str | None = None, fields: list[str] | None = None,
                 importance: float = 1.0, ttl: TTLConfig | None = None,
                 clock: Clock | None = None, **unknown: Any) -> None:
        if unknown:
            hint = " (give the fields to index as fields=[...])" if "index" in unknown else ""
            raise ValidationError(f"HTMStore got unknown options {sorted(unknown)}{hint}; it "
                                  f"takes {', '.join(_OPTIONS)}")
        self.htm = htm
        self.robot = robot
        self.fields = list(fields) if fields else None
        self.importance = check_importance(importance)
        self.ttl_config = _ttl_config(ttl)
        self.clock: Clock = clock or htm.clock
        self._sweeper: tuple[threading.Event, Future[None]] | None = None

    def __repr__(self) -> str:
        return f"HTMStore(robot={self.htm.robot!r}, store={self.htm.store.url!r})"

    # -- mapping ---------------------------------------------------------------------

    @staticmethod
    def memory_key(namespace: tuple[str, ...], key: str) -> str:
        """The htm key of the item ``key`` in ``namespace``."""
        full = f"{namespace_tag(namespace)}|{key}"
        if len(full) <= MAX_KEY_LENGTH and "\x00" not in full and full.isprintable():
            return full
        digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{ROOT_TAG}:h:{digest}"

    def _content(self, value: dict[str, Any], index: Any) -> str:
        fields = index if isinstance(index, list) else self.fields
        if fields and index is not False:
            texts = [text for path in fields for text in get_text_at_path(value, path)]
            joined = "\n".join(t for t in texts if t.strip())
            if joined:
                return joined
        return json.dumps(value, ensure_ascii=False, sort_keys=True)

    def _fields(self, memory: Memory) -> dict[str, Any]:
        data = memory.metadata["lgstore"]
        created = datetime.fromisoformat(data["created_at"]) if data.get("created_at") \
            else memory.created_at
        updated = memory.created_at
        if memory.version > 1:  # when the version before it was superseded
            previous = self.htm.get(memory.key, version=memory.version - 1)
            updated = previous.superseded_at if previous is not None else updated
        return {"value": data["value"], "key": data["key"],
                "namespace": tuple(data["namespace"]), "created_at": created,
                "updated_at": updated}

    @staticmethod
    def _is_item(memory: Memory, tag: str) -> bool:
        return isinstance(memory.metadata.get("lgstore"), dict) and carries_tag(memory.tags, [tag])

    # -- expiry ----------------------------------------------------------------------

    @staticmethod
    def _expired(memory: Memory, now: datetime) -> bool:
        """Whether the item's TTL ran out: ``ttl`` minutes after its last access."""
        minutes = memory.metadata["lgstore"].get("ttl")
        return minutes is not None and memory.last_accessed + timedelta(minutes=minutes) <= now

    def _unexpired(self, memories: Iterable[Memory], now: datetime) -> list[Memory]:
        """The items whose TTL has not run out; the others are forgotten (never purged)."""
        live = []
        for memory in memories:
            if not self._expired(memory, now):
                live.append(memory)
                continue
            with contextlib.suppress(NotFoundError):  # purged meanwhile
                self.htm.forget(memory.key, confirm=True)
        return live

    def _refresh(self, memories: Iterable[Memory], now: datetime) -> None:
        """A read of items with a TTL: their access time moves to ``now``."""
        ids = [m.id for m in memories if m.metadata["lgstore"].get("ttl") is not None]
        if ids:
            self.htm.store.touch(ids, at=now)

    def sweep_ttl(self) -> int:
        """Forget every expired item of this store's robot scope; return how many.

        Expired items are forgotten, never purged: ``htm.restore`` (or :meth:`restore`)
        brings one back until ``htm.purge``.
        """
        now, count, cursor = self.clock(), 0, None
        while True:
            page = self.htm.list(tags=[ROOT_TAG], robot=self.robot, order="created_at",
                                 limit=1_000, cursor=cursor)
            items = [m for m in page.memories if self._is_item(m, ROOT_TAG)]
            count += len(items) - len(self._unexpired(items, now))
            if page.next_cursor is None:
                return count
            cursor = page.next_cursor

    async def asweep_ttl(self) -> int:
        """Async :meth:`sweep_ttl` (see :func:`htm_core.run_async`)."""
        return await run_async(self.htm, self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Future[None]:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default the
        ``TTLConfig``'s, else 5) in a daemon thread until :meth:`stop_ttl_sweeper`. Without a
        ``ttl`` config nothing starts and the future is already done."""
        if self._sweeper is not None:
            return self._sweeper[1]
        done: Future[None] = Future()
        if self.ttl_config is None:
            done.set_result(None)
            return done
        minutes = _minutes(sweep_interval_minutes or self.ttl_config.get(
            "sweep_interval_minutes") or 5, "sweep_interval_minutes") or 5.0
        stop = threading.Event()

        def sweep() -> None:
            while not stop.wait(minutes * 60):
                try:
                    self.sweep_ttl()
                except HTMError:
                    logger.exception("TTL sweep failed; the next one is in %s minutes", minutes)
            done.set_result(None)

        self._sweeper = (stop, done)
        threading.Thread(target=sweep, name="htm-lgstore-ttl-sweeper", daemon=True).start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True when it has stopped within ``timeout`` seconds."""
        if self._sweeper is None:
            return True
        stop, done = self._sweeper
        stop.set()
        try:
            done.exception(timeout=timeout)
        except TimeoutError:
            return False
        self._sweeper = None
        return True

    def restore(self, namespace: tuple[str, ...], key: str) -> Item:
        """Bring back a deleted or expired item (``htm.restore``); its TTL starts again now.
        ``NotFoundError`` when there is no such item (never stored, or purged)."""
        memory = self.htm.restore(self.memory_key(namespace, key))
        self._refresh([memory], self.clock())
        return Item(**self._fields(memory))

    # -- operations ------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        memory = self.htm.get(self.memory_key(op.namespace, op.key))
        now = self.clock()
        if memory is None or not self._unexpired([memory], now):
            return None
        if op.refresh_ttl:
            self._refresh([memory], now)
        return Item(**self._fields(memory))

    def _put(self, op: PutOp) -> None:
        key = self.memory_key(op.namespace, op.key)
        if op.value is None:
            if self.htm.get(key) is not None:
                self.htm.forget(key, confirm=True)
            return
        ttl = _minutes(op.ttl, "ttl")
        if not isinstance(op.value, dict):
            raise ValidationError(f"a LangGraph store value must be a dict, got "
                                  f"{type(op.value).__name__}")
        try:
            json.dumps(op.value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"a LangGraph store value must be JSON-serialisable: {exc}"
                                  ) from None
        # checked before anything is written: a rejected put changes nothing
        content = check_content(self._content(op.value, op.index))
        for attempt in range(_PUT_ATTEMPTS):
            try:
                self._write(key, content, op, ttl)
                return
            except ConflictError:  # another put landed between the read and the write
                if attempt == _PUT_ATTEMPTS - 1:
                    raise

    def _write(self, key: str, content: str, op: PutOp, ttl: float | None) -> None:
        """Write ``op``'s value as the item's new version, over the version read here (a
        put replaces the value whole: the last put wins, as in LangGraph's own stores)."""
        existing = self.htm.get(key, include_forgotten=True)
        record: dict[str, Any] = {"namespace": list(op.namespace), "key": op.key,
                                  "value": op.value}
        if ttl is not None:
            record["ttl"] = ttl
        fields = {"importance": self.importance, "tags": [namespace_tag(op.namespace)]}
        if existing is None:
            self._refresh([self.htm.add(content, key=key, metadata={"lgstore": record},
                                        **fields)], self.clock())
            return
        previous = existing.metadata.get("lgstore") or {}
        if previous.get("created_at"):  # an item written before puts were updates
            record["created_at"] = previous["created_at"]
        if existing.forgotten_at is not None:
            self.htm.restore(key)
        elif existing.content == content and previous == record:
            self._refresh([existing], self.clock())  # a write: the TTL starts again
            return
        self._refresh([self.htm.update(key, content, metadata={"lgstore": record},
                                       expected_version=existing.version, **fields)],
                      self.clock())

    def _search(self, op: SearchOp) -> list[SearchItem]:
        for name, value in (("limit", op.limit), ("offset", op.offset)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidBudgetError(f"search {name} must be a non-negative integer, "
                                         f"got {value!r}")
        tag = namespace_tag(op.namespace_prefix)
        wanted, now = op.offset + op.limit, self.clock()
        matching: list[tuple[Memory, float | None]] = []
        if op.query:
            limit = min(10_000, wanted * (4 if op.filter else 1))
            hits = [h for h in self.htm.recall(op.query, tags=[tag], limit=limit, robot=self.robot)
                    if self._is_item(h.memory, tag)
                    and _matches(h.memory.metadata["lgstore"]["value"], op.filter)]
            live = {m.id for m in self._unexpired([h.memory for h in hits], now)}
            matching = [(h.memory, h.score) for h in hits if h.memory.id in live]
        else:  # pages of the namespace, newest first, until enough items match
            cursor: str | None = None
            size = min(10_000, wanted if not op.filter else max(wanted * 4, 100))
            while len(matching) < wanted:
                page = self.htm.list(tags=[tag], robot=self.robot, order="created_at",
                                     descending=True, limit=size, cursor=cursor)
                items = [m for m in page.memories if self._is_item(m, tag)
                         and _matches(m.metadata["lgstore"]["value"], op.filter)]
                matching += [(m, None) for m in self._unexpired(items, now)]
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
        found = matching[op.offset:wanted]
        if op.refresh_ttl:
            self._refresh([m for m, _ in found], now)
        return [SearchItem(**self._fields(m), score=s) for m, s in found]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix = ROOT_TAG + ":"
        namespaces: set[tuple[str, ...]] = set()
        for tag, count in self.htm.tags().items():
            if count <= 0 or not has_prefix(tag, prefix):
                continue
            namespace = tuple(decode_label(s) for s in tag[len(prefix):].split(":"))
            if all(_namespace_matches(namespace, c) for c in op.match_conditions or ()):
                namespaces.add(namespace[:op.max_depth] if op.max_depth else namespace)
        return sorted(namespaces)[op.offset:op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph operations in order; one result per operation."""
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, PutOp):
                results.append(self._put(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValidationError(f"HTMStore cannot run {type(op).__name__}; expected "
                                      "GetOp, PutOp, SearchOp or ListNamespacesOp")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`: natively on PostgreSQL, else in a worker thread
        (:func:`htm_core.run_async`)."""
        return await run_async(self.htm, self.batch, list(ops))

