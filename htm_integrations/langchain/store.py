"""``HTMStore``: htm as a LangGraph ``BaseStore`` (long-term memory for graphs and agents).

``graph = builder.compile(store=HTMStore(htm=htm))``: nodes get it as ``runtime.store``.

How LangGraph's model maps onto htm:

- **Namespace → tag.** ``("users", "alice")`` is the tag ``lgstore:users:alice``; htm's
  tags are hierarchical, so ``search(("users",))`` covers every namespace below it.
  Labels keep letters, digits, ``_`` and ``-``; any other character is ``.`` + its UTF-8
  bytes in hex (``"a b"`` → ``a.20b``; reversible, as LangGraph forbids ``.`` in labels).
- **Writer → robot.** Items are written by the ``HTM``'s robot; ``search`` covers every
  robot unless ``HTMStore(robot=...)`` narrows it (robots on one store share items).
- **Scope.** The namespace (prefix) is the scope, as LangGraph intends: only items put
  through an ``HTMStore`` inside it are returned, never other memories of the ``HTM``; a
  shorter prefix (``("memories",)``, ``()``) asks for several users' items, explicitly.
  Labels compare exactly, byte for byte (:mod:`htm_core.identity`): ``("users", "Alice")``
  and ``("users", "alice")`` are two namespaces.
- **Item → memory.** Key ``lgstore:<namespace tag>|<key>`` (a hash when longer than
  htm's 255-character limit); content is the text to search: the ``fields`` of the value
  (store-wide ``fields=`` or ``put(..., index=[...])``) or else the whole value as JSON;
  metadata ``lgstore`` holds the namespace, key and value.
- **search with a query** is htm's hybrid recall inside the namespace prefix, then the
  ``filter`` on the values; **without a query** it pages through ``htm.list`` (the
  namespace's tag, newest first, in SQL): it reads about ``offset + limit`` memories
  however large the store (with a ``filter``, the pages it takes to find that many).
- **get** is ``htm.get`` (no access counted, working memory untouched).
- **put over an existing item** is one atomic ``htm.update`` (the old value kept as the
  memory's history, ``htm.versions(key)``; a crash leaves the old value or the new one,
  never neither); ``updated_at`` is when the current version was written. The same value
  again writes nothing; over a deleted item it restores, then updates.
- **delete** is ``forget(confirm=True)``: recoverable with ``htm.restore`` until a purge.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import operator
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from htm_core.errors import ConflictError, InvalidBudgetError, ValidationError, missing_extra
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
        validate_op_namespace,
    )
    from langgraph.store.base.embed import get_text_at_path
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langgraph", "langgraph") from None

__all__ = ["HTMStore", "decode_label", "encode_label", "namespace_tag"]

ROOT_TAG = "lgstore"
_OPTIONS = ("htm", "robot", "fields", "importance")
#: How often a put reads and writes again when another put landed in between.
_PUT_ATTEMPTS = 5
_PLAIN = re.compile(r"[A-Za-z0-9_\-]")
_ESCAPED = re.compile(r"((?:\.[0-9a-f]{2})+)")
#: LangGraph's filter operators; an order against a missing field is False.
_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "$eq": operator.eq, "$ne": operator.ne, "$gt": operator.gt, "$gte": operator.ge,
    "$lt": operator.lt, "$lte": operator.le}


def encode_label(label: str) -> str:
    """A namespace label as a tag segment (reversible; see the module docstring)."""
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

    Example:
        >>> from htm_core import HTM
        >>> store = HTMStore(htm=HTM(database_url=":memory:", embedder="hashing"))
        >>> store.put(("users", "ada"), "pref", {"text": "Ada prefers tea"})
        >>> store.search(("users",), query="tea")[0].value
        {'text': 'Ada prefers tea'}
    """

    supports_ttl = False

    def __init__(self, *, htm: Any, robot: str | None = None, fields: list[str] | None = None,
                 importance: float = 1.0, **unknown: Any) -> None:
        if unknown:
            hint = " (give the fields to index as fields=[...])" if "index" in unknown else ""
            raise ValidationError(f"HTMStore got unknown options {sorted(unknown)}{hint}; it "
                                  f"takes {', '.join(_OPTIONS)}")
        self.htm = htm
        self.robot = robot
        self.fields = list(fields) if fields else None
        self.importance = check_importance(importance)

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

    # -- operations ------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        memory = self.htm.get(self.memory_key(op.namespace, op.key))
        return None if memory is None else Item(**self._fields(memory))

    def _put(self, op: PutOp) -> None:
        key = self.memory_key(op.namespace, op.key)
        if op.value is None:
            if self.htm.get(key) is not None:
                self.htm.forget(key, confirm=True)
            return
        if op.ttl is not None:
            raise ValidationError("HTMStore does not expire items (htm never forgets on its own); "
                                  "put without ttl")
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
                self._write(key, content, op)
                return
            except ConflictError:  # another put landed between the read and the write
                if attempt == _PUT_ATTEMPTS - 1:
                    raise

    def _write(self, key: str, content: str, op: PutOp) -> None:
        """Write ``op``'s value as the item's new version, over the version read here (a
        put replaces the value whole: the last put wins, as in LangGraph's own stores)."""
        existing = self.htm.get(key, include_forgotten=True)
        record: dict[str, Any] = {"namespace": list(op.namespace), "key": op.key,
                                  "value": op.value}
        fields = {"importance": self.importance, "tags": [namespace_tag(op.namespace)]}
        if existing is None:
            self.htm.add(content, key=key, metadata={"lgstore": record}, **fields)
            return
        previous = existing.metadata.get("lgstore") or {}
        if previous.get("created_at"):  # an item written before puts were updates
            record["created_at"] = previous["created_at"]
        if existing.forgotten_at is not None:
            self.htm.restore(key)
        elif existing.content == content and previous.get("value") == op.value:
            return
        self.htm.update(key, content, metadata={"lgstore": record},
                        expected_version=existing.version, **fields)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        for name, value in (("limit", op.limit), ("offset", op.offset)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidBudgetError(f"search {name} must be a non-negative integer, "
                                         f"got {value!r}")
        tag = namespace_tag(op.namespace_prefix)
        wanted = op.offset + op.limit
        matching: list[tuple[Memory, float | None]] = []
        if op.query:
            limit = min(10_000, wanted * (4 if op.filter else 1))
            hits = self.htm.recall(op.query, tags=[tag], limit=limit, robot=self.robot)
            matching = [(h.memory, h.score) for h in hits if self._is_item(h.memory, tag)
                        and _matches(h.memory.metadata["lgstore"]["value"], op.filter)]
        else:  # pages of the namespace, newest first, until enough items match
            cursor: str | None = None
            size = min(10_000, wanted if not op.filter else max(wanted * 4, 100))
            while len(matching) < wanted:
                page = self.htm.list(tags=[tag], robot=self.robot, order="created_at",
                                     descending=True, limit=size, cursor=cursor)
                matching += [(m, None) for m in page.memories if self._is_item(m, tag)
                             and _matches(m.metadata["lgstore"]["value"], op.filter)]
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
        return [SearchItem(**self._fields(m), score=s) for m, s in matching[op.offset:wanted]]

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
        """Async :meth:`batch` (runs in a worker thread)."""
        return await asyncio.to_thread(self.batch, list(ops))

