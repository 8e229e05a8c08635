"""``HTMVectorStore``: an :class:`htm_core.HTM` as a LlamaIndex vector store.

::

    from llama_index.core import VectorStoreIndex
    from htm_integrations.llama_index import HTMEmbedding, HTMVectorStore

    store = HTMVectorStore(htm=htm)
    index = VectorStoreIndex.from_vector_store(store, embed_model=HTMEmbedding(htm=htm))
    index.insert(document)
    index.as_retriever(similarity_top_k=5, filters=filters).retrieve("editor settings")

**One embedding space.** Each node becomes one htm memory (key = node id, content = the
node's text, metadata = the node's metadata and its serialised form). htm embeds the text
with its own embedder, and queries go through ``htm.recall`` by *text*
(``is_embedding_query = False``, so LlamaIndex does not embed queries for this store). The
vectors LlamaIndex computes for nodes are not stored: every vector in the store comes from
one model, and ``index.as_retriever().retrieve(q)`` returns exactly ``htm.recall(q)``. Use
:class:`~htm_integrations.llama_index.HTMEmbedding` as the index's ``embed_model`` so the
node vectors LlamaIndex computes come from that same model.

**Query modes.** ``DEFAULT`` is htm's vector recall, ``TEXT_SEARCH`` its full-text recall
(bm25 / ``ts_rank``) and ``HYBRID`` its Reciprocal Rank Fusion of both (``alpha`` is not
used; ``hybrid_top_k`` overrides ``similarity_top_k``). Other modes raise
``UnknownStrategyError``. Recalled nodes enter htm's working memory, as any recall does.

**Filters run inside the search.** ``MetadataFilters`` are translated into htm's search
filters, which every backend applies in SQL inside each arm:

- ``created_at`` (or the key named by ``date_key``) with ``GT``, ``GTE``, ``LT``, ``LTE``
  or ``EQ`` on an ISO date/datetime string or a POSIX timestamp becomes a timeframe. A node
  whose metadata has that key is stored with it as its htm creation time.
- ``robot`` with ``EQ`` (or ``IN`` of one name) scopes the search to one robot.
- ``tags`` with ``EQ``/``IN``/``ANY``/``CONTAINS``: the node's ``tags`` metadata,
  hierarchical (``"user"`` matches ``"user:preferences"``); they are also indexed below the
  store's tag root (``llama_index:tag:<tag>``), which keeps the filter inside the scope.
- ``doc_id`` / ``ref_doc_id`` / ``document_id``, ``VectorStoreQuery.doc_ids`` and
  ``node_ids``, and **any other metadata key** with ``EQ``/``IN``/``ANY``/``CONTAINS`` on
  string, number or boolean values: on ``add`` each such value is indexed as an htm tag
  under ``llama_index:`` (``llama_index:meta:<key>:<value>``; values that are not plain
  tag segments are hashed), so these filters are tag filters too.

Conditions combine with ``AND`` (and ``OR`` among tag conditions). htm's search takes one
any-of tag set, so an ``AND`` of two tag conditions (two metadata keys, or a metadata key
and ``doc_ids``), range operators on keys other than the date key, ``NE``, ``NIN``,
``ALL``, ``TEXT_MATCH``, ``IS_EMPTY`` and ``NOT`` raise :class:`UnsupportedFilterError`
rather than post-filter and starve the result.

**Scoped by default.** A store sees only the nodes stored through an ``HTMVectorStore``
(every tag it writes lies below ``llama_index``): conversations and facts held in the same
``HTM`` never come back as nodes. With ``user_id``, the store is that user's: its tags lie
below ``chat:user:<user_id>:llama_index`` (inside the user's conversation scope, see
docs/langchain.md), so it sees only that user's nodes, and the default store does not see
them. ``shared=True`` searches the whole store (every memory, as htm's own recall); it is
the only mode where a ``tags`` filter takes arbitrary htm tags. Node ids are htm keys,
unique in the whole store.

**Deleting never forgets by surprise.** ``delete(ref_doc_id)``, ``delete_nodes`` and
``clear`` call ``htm.forget(key, confirm=True)`` on the nodes' memories: they disappear
from queries and recall at once but stay recoverable with ``htm.restore(key)`` until
``htm.purge(confirm=True)``; every forget is in ``htm.operations()``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from htm_core import HTM, Hit, Memory
from htm_core.errors import NotFoundError, UnknownStrategyError, UnsupportedFilterError, ValidationError
from htm_core.serialize import memory_metadata
from htm_core.tags import carries_tag, tag_matches
from htm_core.validation import check_importance

from .._scope import ChatScope, id_slug

__all__ = ["TAG_ROOT", "HTMVectorStore", "UnsupportedFilterError", "metadata_tag"]

#: Every tag this store derives from node metadata lives below this one.
TAG_ROOT = "llama_index"
_SEGMENT = re.compile(r"^[\w.\-]{1,64}$")
_DOC_KEYS = ("doc_id", "ref_doc_id", "document_id")
_MODES = {
    VectorStoreQueryMode.DEFAULT: "vector",
    VectorStoreQueryMode.TEXT_SEARCH: "fulltext",
    VectorStoreQueryMode.HYBRID: "hybrid",
}
_TAG_OPS = (FilterOperator.EQ, FilterOperator.IN, FilterOperator.ANY, FilterOperator.CONTAINS)
_RANGE_OPS = (FilterOperator.GT, FilterOperator.GTE, FilterOperator.LT, FilterOperator.LTE,
              FilterOperator.EQ)
#: Metadata keys every returned node carries (DESIGN: id, key, score, importance...).
RESULT_KEYS = ("id", "key", "score", "importance", "created_at", "robot", "tags")


def _segment(value: Any) -> str:
    if isinstance(value, str) and _SEGMENT.match(value):
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


def _doc_tag(ref_doc_id: str, root: str) -> str:
    return f"{root}:doc:{_segment(ref_doc_id)}"


def _node_tag(node_id: str, root: str) -> str:
    return f"{root}:node:{_segment(node_id)}"


def _is_tag(value: Any) -> bool:
    return isinstance(value, str) and re.match(r"^[\w.\-]+(?::[\w.\-]+)*$", value) is not None


@dataclass
class _Plan:
    """htm search filters: one any-of tag set, a robot and a [start, end) range."""

    tags: set[str] | None = None
    robot: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    empty: bool = False
    kinds: set[str] = field(default_factory=set)

    def matches(self, memory: Memory) -> bool:
        """Whether ``memory`` passes the plan (for listing, not for searching)."""
        if self.empty:
            return False
        if self.robot is not None and memory.robot != self.robot:
            return False
        created = memory.created_at
        if self.start is not None and created < _utc(self.start):
            return False
        if self.end is not None and created >= _utc(self.end):
            return False
        if self.tags is not None:
            return carries_tag(memory.tags, self.tags)
        return True


def _utc(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.astimezone()


class HTMVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store over an :class:`htm_core.HTM` (``stores_text=True``).

    Attributes:
        htm: the ``HTM`` instance.
        date_key: the metadata key that is the node's date: stored as the memory's
            creation time and filterable with ``GT``/``LT``.
        importance: htm importance of added nodes (a numeric ``importance`` in a node's
            metadata wins).
        user_id: make this the store of one user (its nodes and queries stay within
            ``chat:user:<user_id>:llama_index``); default the application's store.
        shared: ``True`` queries and lists the whole htm store (every memory), not only
            this store's nodes. Default False.

    See the module docstring for the embedding design, query modes, filters and deletes.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    stores_text: bool = True
    is_embedding_query: bool = False
    flat_metadata: bool = False
    htm: Any = Field(exclude=True, description="The htm_core.HTM instance.")
    date_key: str = Field(default="created_at")
    importance: float = Field(default=1.0, ge=0.0, le=10.0)
    user_id: str | None = Field(default=None)
    shared: bool = Field(default=False)

    def __init__(self, **data: Any) -> None:
        htm = data.get("htm")
        if not isinstance(htm, HTM):
            raise ValidationError(
                f"HTMVectorStore needs htm=<htm_core.HTM instance>, got {type(htm).__name__}")
        if "importance" in data:
            check_importance(data["importance"])
        if data.get("user_id") is not None:
            id_slug(data["user_id"], name="user_id")
        super().__init__(**data)

    @property
    def tag_root(self) -> str:
        """The tag every tag this store writes lies below (its scope)."""
        if self.user_id is None:
            return TAG_ROOT
        return f"{ChatScope.of(user_id=self.user_id).tag}:{TAG_ROOT}"

    @classmethod
    def class_name(cls) -> str:
        return "HTMVectorStore"

    @property
    def client(self) -> HTM:
        """The ``HTM`` instance."""
        return self.htm  # type: ignore[no-any-return]

    # -- adding ---------------------------------------------------------------------------

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store ``nodes`` as htm memories in one transaction; return their ids.

        The text is embedded by htm's embedder (``node.embedding`` is not stored, see the
        module docstring). A node id already used by a memory with other content raises
        ``DuplicateKeyError`` and nothing is written.
        """
        items = [self._item(node) for node in nodes]
        if items:
            self.htm.add_many(items)
        return [node.node_id for node in nodes]

    def _item(self, node: BaseNode) -> dict[str, Any]:
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        metadata = node_to_metadata_dict(node, remove_text=True, flat_metadata=False)
        root = self.tag_root
        tags = [_node_tag(node.node_id, root)]
        if node.ref_doc_id:
            tags.append(_doc_tag(node.ref_doc_id, root))
        for key, value in node.metadata.items():
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                if isinstance(v, (str, int, float, bool)) and not (isinstance(v, float) and v != v):
                    tags.append(metadata_tag(key, v, root))
                    if key == "tags" and isinstance(v, str) and _is_tag(v):
                        tags.extend([v, f"{root}:tag:{v}"])
        importance = node.metadata.get("importance", self.importance)
        item: dict[str, Any] = {"content": text, "key": node.node_id, "tags": tags,
                                "metadata": metadata, "importance": importance}
        if self.date_key in node.metadata:
            item["created_at"] = _as_datetime(node.metadata[self.date_key], self.date_key)
        return item

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """Async :meth:`add`."""
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    # -- querying -------------------------------------------------------------------------

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Recall the nodes best matching ``query.query_str`` within ``query.filters``."""
        strategy = _MODES.get(VectorStoreQueryMode(query.mode))
        if strategy is None:
            raise UnknownStrategyError(
                f"HTMVectorStore does not support query mode {query.mode!r}; use DEFAULT "
                "(vector), TEXT_SEARCH (full text) or HYBRID (both, fused)")
        text = query.query_str
        if not isinstance(text, str) or not text.strip():
            raise ValidationError(
                "HTMVectorStore searches by text through htm.recall; give the query a "
                "query_str (a query embedding alone is not used, see the module docstring)")
        limit = query.similarity_top_k
        if query.mode == VectorStoreQueryMode.HYBRID and query.hybrid_top_k:
            limit = query.hybrid_top_k
        plan = self._plan(query.filters, doc_ids=query.doc_ids, node_ids=query.node_ids)
        if plan.empty or limit < 1:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        timeframe = (plan.start, plan.end) if plan.start or plan.end else None
        hits = self.htm.recall(text, limit=limit, strategy=strategy,
                               tags=sorted(plan.tags) if plan.tags is not None else None,
                               robot=plan.robot, timeframe=timeframe)
        nodes = [self._to_node(hit.memory, hit) for hit in hits]
        return VectorStoreQueryResult(nodes=nodes, similarities=[h.score for h in hits],
                                      ids=[n.node_id for n in nodes])

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Async :meth:`query`."""
        return await asyncio.to_thread(self.query, query, **kwargs)

    def _to_node(self, memory: Memory, hit: Hit | None = None) -> BaseNode:
        node: BaseNode
        if "_node_content" in memory.metadata:
            node = metadata_dict_to_node(memory.metadata, text=memory.content)
        else:
            node = TextNode(id_=memory.key, text=memory.content, metadata=dict(memory.metadata))
        node.metadata.update(memory_metadata(
            memory, hit.score if hit else None,
            tags=[t for t in memory.tags
                  if not tag_matches(t, TAG_ROOT) and not tag_matches(t, self.tag_root)]))
        for excluded in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
            excluded.extend(k for k in RESULT_KEYS if k not in excluded)
        return node

    # -- filters --------------------------------------------------------------------------

    def _plan(self, filters: MetadataFilters | None, *, doc_ids: Sequence[str] | None = None,
              node_ids: Sequence[str] | None = None) -> _Plan:
        plan = self._group(filters) if filters is not None and filters.filters else _Plan()
        # Empty lists mean "no restriction": VectorStoreIndex.as_retriever passes node_ids=[]
        # for stores that keep the text.
        root = self.tag_root
        if doc_ids:
            plan = _and(plan, _tag_plan({_doc_tag(d, root) for d in doc_ids}))
        if node_ids:
            plan = _and(plan, _tag_plan({_node_tag(n, root) for n in node_ids}))
        if plan.tags is None and not self.shared:
            plan.tags = {root}  # every other tag condition already lies below the root
        return plan

    def _group(self, filters: MetadataFilters) -> _Plan:
        condition = filters.condition or FilterCondition.AND
        parts = [self._group(f) if isinstance(f, MetadataFilters) else self._leaf(f)
                 for f in filters.filters]
        if condition == FilterCondition.AND:
            plan = _Plan()
            for part in parts:
                plan = _and(plan, part)
            return plan
        if condition == FilterCondition.OR:
            if any(p.kinds - {"tags"} for p in parts):
                raise UnsupportedFilterError(
                    "OR works only between tag-like conditions (metadata keys, tags, doc ids); "
                    "robot and date conditions can only be combined with AND")
            tags: set[str] = set()
            for part in parts:
                if not part.empty:
                    tags |= part.tags or set()
            return _tag_plan(tags)
        raise UnsupportedFilterError(
            f"filter condition {condition.value!r} is not supported by HTMVectorStore; use "
            "AND, or OR between tag-like conditions")

    def _leaf(self, f: MetadataFilter) -> _Plan:
        op, key, value = f.operator, f.key, f.value
        if key == self.date_key:
            return _range_plan(op, value, key)
        if key == "robot":
            names = value if isinstance(value, list) else [value]
            if op in (FilterOperator.EQ, FilterOperator.IN) and len(names) == 1 \
                    and isinstance(names[0], str):
                return _Plan(robot=names[0], kinds={"robot"})
            raise UnsupportedFilterError(
                "the 'robot' filter takes EQ with one robot name (or IN with a single name)")
        if op not in _TAG_OPS:
            raise UnsupportedFilterError(
                f"operator {op.value!r} on metadata key {key!r} cannot run inside htm's search; "
                f"use EQ, IN, ANY or CONTAINS (ranges work on {self.date_key!r} only)")
        if value is None:
            raise UnsupportedFilterError(f"filter on {key!r} needs a value")
        values = value if isinstance(value, list) else [value]
        root = self.tag_root
        if key in _DOC_KEYS:
            return _tag_plan({_doc_tag(str(v), root) for v in values})
        tags = {metadata_tag(key, v, root) for v in values}
        if key == "tags":
            tags = {(str(v) if self.shared else f"{root}:tag:{v}") if _is_tag(v)
                    else metadata_tag(key, v, root) for v in values}
        return _tag_plan(tags)

    # -- reading and deleting -------------------------------------------------------------

    def _scan(self, plan: _Plan) -> Iterator[Memory]:
        for batch in self.htm.store.iter_memories(include_forgotten=False):
            yield from (m for m in batch if plan.matches(m))

    def _select(self, node_ids: Sequence[str] | None, filters: MetadataFilters | None
                ) -> list[Memory]:
        plan = self._plan(filters)
        if node_ids is not None:
            found = [self.htm.store.get(k) for k in node_ids]
            return [m for m in found if m is not None and plan.matches(m)]
        return list(self._scan(plan))

    def get_nodes(self, node_ids: list[str] | None = None,
                  filters: MetadataFilters | None = None) -> list[BaseNode]:
        """The nodes with these ids and/or matching ``filters`` (no recall, no access)."""
        return [self._to_node(m) for m in self._select(node_ids, filters)]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Forget (recoverably) every node of document ``ref_doc_id``.

        The memories are hidden from queries and recall at once and stay recoverable with
        ``htm.restore(node_id)`` until ``htm.purge(confirm=True)``.
        """
        for memory in list(self._scan(_tag_plan({_doc_tag(ref_doc_id, self.tag_root)}))):
            self._forget(memory.key)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Async :meth:`delete`."""
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    def delete_nodes(self, node_ids: list[str] | None = None,
                     filters: MetadataFilters | None = None, **delete_kwargs: Any) -> None:
        """Forget (recoverably) the nodes with these ids and/or matching ``filters``."""
        if node_ids is None and filters is None:
            raise ValidationError("delete_nodes needs node_ids or filters; use clear() for all")
        for memory in self._select(node_ids, filters):
            self._forget(memory.key)

    def clear(self) -> None:
        """Forget (recoverably) every node of this store's scope (``tag_root``).

        Other memories in the same ``HTM`` (conversations, facts, other users' nodes) are
        left alone.
        """
        for memory in list(self._scan(_tag_plan({self.tag_root}))):
            self._forget(memory.key)

    def _forget(self, key: str) -> None:
        try:
            self.htm.forget(key, confirm=True)
        except NotFoundError:
            return


def _tag_plan(tags: set[str]) -> _Plan:
    return _Plan(tags=set(tags), empty=not tags, kinds={"tags"})


def _and(a: _Plan, b: _Plan) -> _Plan:
    if a.tags is not None and b.tags is not None:
        raise UnsupportedFilterError(
            "htm's search takes one set of tag-like conditions (metadata keys, tags, doc ids or "
            "node ids); combine them with OR, or filter on one key and narrow with robot/dates")
    out = _Plan(tags=a.tags if a.tags is not None else b.tags, empty=a.empty or b.empty,
                kinds=a.kinds | b.kinds)
    robots = {r for r in (a.robot, b.robot) if r is not None}
    if len(robots) > 1:
        out.empty = True
    out.robot = next(iter(robots), None)
    starts = [s for s in (a.start, b.start) if s is not None]
    ends = [e for e in (a.end, b.end) if e is not None]
    out.start = max(starts, key=_utc) if starts else None
    out.end = min(ends, key=_utc) if ends else None
    if out.start is not None and out.end is not None and _utc(out.start) >= _utc(out.end):
        out.empty = True
    return out


def _as_datetime(value: Any, key: str) -> datetime:
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


def _range_plan(op: FilterOperator, value: Any, key: str) -> _Plan:
    if op not in _RANGE_OPS:
        raise UnsupportedFilterError(
            f"operator {op.value!r} on {key!r} is not supported; use GT, GTE, LT, LTE or EQ")
    when = _as_datetime(value, key)
    tick = timedelta(microseconds=1)
    plan = _Plan(kinds={"range"})
    if op in (FilterOperator.GT, FilterOperator.GTE):
        plan.start = when + tick if op == FilterOperator.GT else when
    elif op in (FilterOperator.LT, FilterOperator.LTE):
        plan.end = when + tick if op == FilterOperator.LTE else when
    else:
        plan.start, plan.end = when, when + tick
    return plan
