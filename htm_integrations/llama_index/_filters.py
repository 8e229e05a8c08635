"""LlamaIndex ``MetadataFilters`` translated into htm's own search filters.

htm filters a recall or a listing by one any-of set of hierarchical tags, one robot and a
``[start, end)`` time range, all in SQL inside the search. :func:`translate` turns a
LlamaIndex filter tree into exactly that (:class:`htm_core.store.SearchFilters`), or raises
:class:`~htm_core.errors.UnsupportedFilterError` for what it cannot express; nothing is
filtered afterwards in Python. :func:`node_tags` gives a node its tags on ``add``
(``<root>:node:<id>``, ``<root>:doc:<id>``, ``<root>:meta:<key>:<value>``,
``<root>:tag:<tag>``). See docs/llamaindex.md ("Metadata filters: inside the search").
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from htm_core.errors import UnsupportedFilterError, ValidationError
from htm_core.store import SearchFilters

__all__ = ["TAG_ROOT", "as_datetime", "doc_tag", "metadata_tag", "node_tag", "node_tags",
           "translate"]

#: Every tag an ``HTMVectorStore`` derives from node metadata lives below this one.
TAG_ROOT = "llama_index"
_SEGMENT = re.compile(r"[\w.\-]{1,64}")
_TAG = re.compile(r"^[\w.\-]+(?::[\w.\-]+)*$")
_HASHED = re.compile(r"h-[0-9a-f]{24}")
DOC_KEYS = ("doc_id", "ref_doc_id", "document_id")
_TAG_OPS = (FilterOperator.EQ, FilterOperator.IN, FilterOperator.ANY, FilterOperator.CONTAINS)
_TICK = timedelta(microseconds=1)
#: The filters that match nothing (an empty any-of set, disjoint robots or dates).
NOTHING = None


def _segment(value: Any) -> str:
    """A metadata key or value as a tag segment: a plain string as is, anything else as
    ``h-`` + a hash of its JSON (a plain string of that form, ``h-`` and 24 hex digits, too,
    so two different values never share a segment: strings compare exactly, see
    :mod:`htm_core.identity`)."""
    if isinstance(value, str) and _SEGMENT.fullmatch(value) and not _HASHED.fullmatch(value):
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return "h-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:24]


def metadata_tag(key: str, value: Any, root: str = TAG_ROOT) -> str:
    """The htm tag that indexes ``metadata[key] == value`` (below the store's tag root).

    >>> metadata_tag("author", "alice")
    'llama_index:meta:author:alice'
    """
    return f"{root}:meta:{_segment(key)}:{_segment(value)}"


def doc_tag(ref_doc_id: str, root: str) -> str:
    """The tag of every node of document ``ref_doc_id``."""
    return f"{root}:doc:{_segment(ref_doc_id)}"


def node_tag(node_id: str, root: str) -> str:
    """The tag of node ``node_id``."""
    return f"{root}:node:{_segment(node_id)}"


def node_tags(node: BaseNode, root: str) -> list[str]:
    """The tags a node is stored with (docs/llamaindex.md, "Metadata filters: inside the search")."""
    tags = [node_tag(node.node_id, root)]
    if node.ref_doc_id:
        tags.append(doc_tag(node.ref_doc_id, root))
    for key, value in node.metadata.items():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, (str, int, float, bool)) and not (isinstance(v, float) and v != v):
                tags.append(metadata_tag(key, v, root))
                if key == "tags" and isinstance(v, str) and _TAG.match(v):
                    tags.extend([v, f"{root}:tag:{v}"])
    return list(dict.fromkeys(tags))


def as_datetime(value: Any, key: str) -> datetime:
    """A date metadata value (ISO 8601 string, datetime or POSIX timestamp) as a datetime."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=timezone.utc)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ValidationError(
        f"metadata {key!r} must be an ISO 8601 date/datetime or a POSIX timestamp, got {value!r}")


def translate(filters: MetadataFilters | None, *, root: str, date_key: str, shared: bool,
              tag_sets: Iterable[Iterable[str]] = ()) -> SearchFilters | None:
    """htm's filters for a LlamaIndex filter tree ANDed with each of ``tag_sets`` (doc ids,
    node ids); None when they can match nothing. Scoped to ``root`` unless ``shared``."""
    out: SearchFilters | None = SearchFilters()
    if filters is not None and filters.filters:
        out = _group(filters, root, date_key, shared)
    for tags in tag_sets:
        out = _and(out, _tags(set(tags)))
    if out is not None and not out.tags and not shared:
        out = replace(out, tags=(root,))  # every tag condition above lies below the root
    return out


def _tags(tags: set[str]) -> SearchFilters | None:
    return SearchFilters(tags=tuple(sorted(tags))) if tags else NOTHING


def _group(filters: MetadataFilters, root: str, date_key: str, shared: bool
           ) -> SearchFilters | None:
    condition = filters.condition or FilterCondition.AND
    parts = [_group(f, root, date_key, shared) if isinstance(f, MetadataFilters)
             else _leaf(f, root, date_key, shared) for f in filters.filters]
    if condition == FilterCondition.AND:
        out: SearchFilters | None = SearchFilters()
        for part in parts:
            out = _and(out, part)
        return out
    if condition == FilterCondition.OR:
        live = [p for p in parts if p is not None]
        if any(p.is_empty for p in live):
            return SearchFilters()  # one branch without conditions: everything matches
        if any(p.robot or p.start or p.end for p in live):
            raise UnsupportedFilterError(
                "OR works only between tag-like conditions (metadata keys, tags, doc ids); "
                "robot and date conditions can only be combined with AND")
        return _tags({t for p in live for t in p.tags})
    raise UnsupportedFilterError(
        f"filter condition {condition.value!r} is not supported by HTMVectorStore; use "
        "AND, or OR between tag-like conditions")


def _and(a: SearchFilters | None, b: SearchFilters | None) -> SearchFilters | None:
    if a is None or b is None:
        return NOTHING
    if a.tags and b.tags:
        raise UnsupportedFilterError(
            "htm's search takes one set of tag-like conditions (metadata keys, tags, doc ids or "
            "node ids); combine them with OR, or filter on one key and narrow with robot/dates")
    if a.robot and b.robot and a.robot != b.robot:
        return NOTHING
    starts = [s for s in (a.start, b.start) if s is not None]
    ends = [e for e in (a.end, b.end) if e is not None]
    start = max(starts, key=_aware) if starts else None
    end = min(ends, key=_aware) if ends else None
    if start is not None and end is not None and _aware(start) >= _aware(end):
        return NOTHING
    return SearchFilters(tags=a.tags or b.tags, robot=a.robot or b.robot, start=start, end=end)


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.astimezone()


def _leaf(f: MetadataFilter, root: str, date_key: str, shared: bool) -> SearchFilters | None:
    op, key, value = f.operator, f.key, f.value
    if key == date_key:
        return _range(op, as_datetime(value, key), key)
    if key == "robot":
        names = value if isinstance(value, list) else [value]
        if op in (FilterOperator.EQ, FilterOperator.IN) and len(names) == 1 \
                and isinstance(names[0], str):
            return SearchFilters(robot=names[0])
        raise UnsupportedFilterError(
            "the 'robot' filter takes EQ with one robot name (or IN with a single name)")
    if op not in _TAG_OPS:
        raise UnsupportedFilterError(
            f"operator {op.value!r} on metadata key {key!r} cannot run inside htm's search; "
            f"use EQ, IN, ANY or CONTAINS (ranges work on {date_key!r} only)")
    if value is None:
        raise UnsupportedFilterError(f"filter on {key!r} needs a value")
    values: Sequence[Any] = value if isinstance(value, list) else [value]
    if key in DOC_KEYS:
        return _tags({doc_tag(str(v), root) for v in values})
    if key == "tags":
        return _tags({(str(v) if shared else f"{root}:tag:{v}")
                      if isinstance(v, str) and _TAG.match(v) else metadata_tag(key, v, root)
                      for v in values})
    return _tags({metadata_tag(key, v, root) for v in values})


def _range(op: FilterOperator, when: datetime, key: str) -> SearchFilters:
    if op in (FilterOperator.GT, FilterOperator.GTE):
        return SearchFilters(start=when + _TICK if op == FilterOperator.GT else when)
    if op in (FilterOperator.LT, FilterOperator.LTE):
        return SearchFilters(end=when + _TICK if op == FilterOperator.LTE else when)
    if op == FilterOperator.EQ:
        return SearchFilters(start=when, end=when + _TICK)
    raise UnsupportedFilterError(
        f"operator {op.value!r} on {key!r} is not supported; use GT, GTE, LT, LTE or EQ")
