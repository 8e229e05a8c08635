"""``HTMVectorStore``: an :class:`htm_core.HTM` as a LlamaIndex vector store.

``VectorStoreIndex.from_vector_store(HTMVectorStore(htm=htm),
embed_model=HTMEmbedding(htm=htm))``. Each node is one htm memory embedded by htm's own
embedder, and queries go through ``htm.recall`` by text, so every vector comes from one
model; the query modes map to htm's strategies; ``MetadataFilters`` become htm's own
filters, applied in SQL inside the search (module ``_filters``); a store sees only its own
nodes (a user's with ``user_id``) unless ``shared=True``; deleting forgets, recoverably.
See docs/llamaindex.md ("Vector store: ``HTMVectorStore``").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from htm_core import HTM, Hit, Memory, run_async
from htm_core.errors import NotFoundError, UnknownStrategyError, UnsupportedFilterError, ValidationError
from htm_core.serialize import memory_metadata
from htm_core.store import SearchFilters
from htm_core.tags import tag_matches
from htm_core.validation import MAX_KEY_LENGTH, check_importance

from .._options import refuse_unknown
from .._scope import ChatScope, id_slug
from ._filters import TAG_ROOT, as_datetime, doc_tag, metadata_tag, node_tag, node_tags, translate
from ._messages import recall_kinds

__all__ = ["TAG_ROOT", "HTMVectorStore", "UnsupportedFilterError", "metadata_tag"]

_MODES = {
    VectorStoreQueryMode.DEFAULT: "vector",
    VectorStoreQueryMode.TEXT_SEARCH: "fulltext",
    VectorStoreQueryMode.HYBRID: "hybrid",
}
#: Metadata keys every returned node carries (DESIGN: id, key, score, importance...).
RESULT_KEYS = ("id", "key", "score", "importance", "created_at", "robot", "tags", "kind")
#: Memories per listing page, and node ids per listing (one tag condition each).
_PAGE = 1_000
_IDS_PER_LIST = 200


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
        kinds: ``query`` recalls only memories of these kinds (``["fact", "document"]``,
            see docs/consolidation.md, "Kinds"), inside the search and within the store's
            scope; default every kind but ``digest``. A query's own ``kinds=`` keyword
            (``VectorIndexRetriever(vector_store_kwargs={"kinds": [...]})``) takes its
            place. ``MetadataFilter(key="kind")`` is the node's own metadata, not this.

    Any other keyword raises :class:`~htm_core.errors.ValidationError`. See the module
    docstring for the embedding design, query modes, filters and deletes.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    stores_text: bool = True
    is_embedding_query: bool = False
    flat_metadata: bool = False
    htm: Any = Field(exclude=True, description="The htm_core.HTM instance.")
    date_key: str = Field(default="created_at")
    importance: float = Field(default=1.0, ge=0.0, le=10.0)
    user_id: str | None = Field(default=None)
    shared: bool = Field(default=False)
    kinds: tuple[str, ...] | None = Field(default=None)

    def __init__(self, **data: Any) -> None:
        refuse_unknown("HTMVectorStore", data, type(self).model_fields)
        htm = data.get("htm")
        if not isinstance(htm, HTM):
            raise ValidationError(
                f"HTMVectorStore needs htm=<htm_core.HTM instance>, got {type(htm).__name__}")
        if "importance" in data:
            check_importance(data["importance"])
        if data.get("user_id") is not None:
            id_slug(data["user_id"], name="user_id")
        if data.get("kinds") is not None:
            data["kinds"] = recall_kinds(data["kinds"], "HTMVectorStore")
        super().__init__(**data)

    @property
    def tag_root(self) -> str:
        """The tag every tag this store writes lies below (its scope)."""
        if self.user_id is None:
            return TAG_ROOT
        return f"{ChatScope.of(user_id=self.user_id).tag}:{TAG_ROOT}"

    def key_for(self, node_id: str) -> str:
        """The htm key of node ``node_id``: the node id in the application's store; in a
        user's store ``<tag_root>:node:<node id>`` (a hash of the id when that is longer
        than htm's key limit), so the node is the user's alone."""
        if self.user_id is None:
            return node_id
        key = f"{self.tag_root}:node:{node_id}"
        if len(key) <= MAX_KEY_LENGTH:
            return key
        digest = hashlib.sha256(node_id.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{self.tag_root}:node:h-{digest[:32]}"

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

        The text is embedded by htm's embedder (``node.embedding`` is not stored, see
        docs/llamaindex.md, "Embedding design"). A node id already used by a memory with other content raises
        ``DuplicateKeyError`` and nothing is written.
        """
        items = [self._item(node) for node in nodes]
        if items:
            self.htm.add_many(items)
        return [node.node_id for node in nodes]

    def _item(self, node: BaseNode) -> dict[str, Any]:
        item: dict[str, Any] = {
            "content": node.get_content(metadata_mode=MetadataMode.NONE),
            "key": self.key_for(node.node_id),
            "tags": node_tags(node, self.tag_root),
            "metadata": node_to_metadata_dict(node, remove_text=True, flat_metadata=False),
            "importance": node.metadata.get("importance", self.importance)}
        if self.date_key in node.metadata:
            item["created_at"] = as_datetime(node.metadata[self.date_key], self.date_key)
        return item

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """Async :meth:`add`."""
        return await run_async(self.htm, self.add, nodes, **kwargs)

    # -- querying -------------------------------------------------------------------------

    def _filters(self, filters: MetadataFilters | None,
                 tag_sets: Iterable[Iterable[str]] = ()) -> SearchFilters | None:
        # Empty id lists mean "no restriction": VectorStoreIndex.as_retriever passes
        # node_ids=[] for stores that keep the text.
        return translate(filters, root=self.tag_root, date_key=self.date_key,
                         shared=self.shared, tag_sets=[s for s in tag_sets if s])

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Recall the nodes best matching ``query.query_str`` within ``query.filters``
        (and of the store's ``kinds``, or of the ``kinds`` keyword when given)."""
        kinds = recall_kinds(kwargs["kinds"], "HTMVectorStore") if "kinds" in kwargs else self.kinds
        strategy = _MODES.get(VectorStoreQueryMode(query.mode))
        if strategy is None:
            raise UnknownStrategyError(
                f"HTMVectorStore does not support query mode {query.mode!r}; use DEFAULT "
                "(vector), TEXT_SEARCH (full text) or HYBRID (both, fused)")
        text = query.query_str
        if not isinstance(text, str) or not text.strip():
            raise ValidationError(
                "HTMVectorStore searches by text through htm.recall; give the query a "
                "query_str (a query embedding alone is not used; see docs/llamaindex.md, "
                "'Embedding design')")
        limit = query.similarity_top_k
        if query.mode == VectorStoreQueryMode.HYBRID and query.hybrid_top_k:
            limit = query.hybrid_top_k
        root = self.tag_root
        where = self._filters(query.filters, [
            [doc_tag(d, root) for d in query.doc_ids or ()],
            [node_tag(n, root) for n in query.node_ids or ()]])
        if where is None or limit < 1:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        hits = self.htm.recall(text, limit=limit, strategy=strategy, tags=where.tags or None,
                               robot=where.robot, timeframe=_timeframe(where),
                               kinds=kinds or None)
        nodes = [self._to_node(hit.memory, hit) for hit in hits]
        return VectorStoreQueryResult(nodes=nodes, similarities=[h.score for h in hits],
                                      ids=[n.node_id for n in nodes])

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Async :meth:`query`."""
        return await run_async(self.htm, self.query, query, **kwargs)

    def _to_node(self, memory: Memory, hit: Hit | None = None) -> BaseNode:
        node: BaseNode
        if "_node_content" in memory.metadata:
            node = metadata_dict_to_node(memory.metadata, text=memory.content)
        else:
            node = TextNode(id_=memory.key, text=memory.content, metadata=dict(memory.metadata))
        ours = memory_metadata(
            memory, hit.score if hit else None,
            tags=[t for t in memory.tags
                  if not tag_matches(t, TAG_ROOT) and not tag_matches(t, self.tag_root)])
        if "kind" in node.metadata:  # the node's own "kind" stays, and stays in its text
            del ours["kind"]
        node.metadata.update(ours)
        for excluded in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
            excluded.extend(k for k in RESULT_KEYS if k in ours and k not in excluded)
        return node

    # -- reading and deleting -------------------------------------------------------------

    def _list(self, where: SearchFilters | None) -> Iterator[Memory]:
        """The memories matching ``where``, page by page through ``HTM.list`` (in SQL)."""
        cursor: str | None = None
        while where is not None:
            page = self.htm.list(tags=where.tags or None, robot=where.robot,
                                 timeframe=_timeframe(where), limit=_PAGE, cursor=cursor)
            yield from page.memories
            cursor = page.next_cursor
            if cursor is None:
                return

    def _select(self, node_ids: Sequence[str] | None, filters: MetadataFilters | None
                ) -> list[Memory]:
        if node_ids is None:
            return list(self._list(self._filters(filters)))
        found: dict[str, Memory] = {}  # by node id: the node's tag names it
        for i in range(0, len(node_ids), _IDS_PER_LIST):
            chunk = {node_tag(n, self.tag_root): n for n in node_ids[i:i + _IDS_PER_LIST]}
            for memory in self._list(self._filters(filters, [chunk])):
                found.update((chunk[t], memory) for t in memory.tags if t in chunk)
        return [found[n] for n in dict.fromkeys(node_ids) if n in found]

    def get_nodes(self, node_ids: list[str] | None = None,
                  filters: MetadataFilters | None = None) -> list[BaseNode]:
        """The nodes with these ids and/or matching ``filters`` (no recall, no access)."""
        return [self._to_node(m) for m in self._select(node_ids, filters)]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Forget (recoverably: ``htm.restore(store.key_for(node_id))``) every node of
        ``ref_doc_id`` in this store's scope (exactly that id: not ``readme.md`` for
        ``README.md``)."""
        self._forget(self._list(self._filters(None, [[doc_tag(ref_doc_id, self.tag_root)]])))

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Async :meth:`delete`."""
        await run_async(self.htm, self.delete, ref_doc_id, **delete_kwargs)

    def delete_nodes(self, node_ids: list[str] | None = None,
                     filters: MetadataFilters | None = None, **delete_kwargs: Any) -> None:
        """Forget (recoverably) the nodes with these ids and/or matching ``filters``."""
        if node_ids is None and filters is None:
            raise ValidationError("delete_nodes needs node_ids or filters; use clear() for all")
        self._forget(self._select(node_ids, filters))

    def clear(self) -> None:
        """Forget (recoverably) every node of this store's scope (``tag_root``); other
        memories of the ``HTM`` (conversations, facts, other users' nodes) are left alone."""
        self._forget(self._list(SearchFilters(tags=(self.tag_root,))))

    def _forget(self, memories: Iterable[Memory]) -> None:
        for memory in list(memories):  # read every page before forgetting
            try:
                self.htm.forget(memory.key, confirm=True)
            except NotFoundError:
                continue


def _timeframe(where: SearchFilters) -> tuple[Any, Any] | None:
    return (where.start, where.end) if where.start or where.end else None
