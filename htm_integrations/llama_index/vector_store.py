"""``HTMVectorStore``: an :class:`htm_core.HTM` as a LlamaIndex vector store.

::

    from llama_index.core import VectorStoreIndex
    from htm_integrations.llama_index import HTMEmbedding, HTMVectorStore

    store = HTMVectorStore(htm=htm)
    index = VectorStoreIndex.from_vector_store(store, embed_model=HTMEmbedding(htm=htm))
    index.insert(document)
    index.as_retriever(similarity_top_k=5, filters=filters).retrieve("editor settings")

**One embedding space.** Each node becomes one htm memory (key = node id, or
``<tag_root>:node:<node id>`` in a user's store, see :meth:`HTMVectorStore.key_for`;
content = the node's text, metadata = the node's metadata and its serialised form). htm embeds the text
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

**Filters run inside the search.** ``MetadataFilters`` are translated (module
``_filters``) into htm's own search filters, which every backend applies in SQL inside each
arm of a recall and in :meth:`htm_core.HTM.list` (``get_nodes``, deletes):

``created_at`` (or the key named by ``date_key``) with ``GT``/``GTE``/``LT``/``LTE``/``EQ``
becomes a timeframe (a node with that key is stored with it as its creation time);
``robot`` with ``EQ`` scopes the search to one robot; ``tags`` (hierarchical), ``doc_id``,
``VectorStoreQuery.doc_ids``/``node_ids`` and any other metadata key with
``EQ``/``IN``/``ANY``/``CONTAINS`` become tag filters (each metadata value is indexed as an
htm tag on ``add``: ``llama_index:meta:<key>:<value>``). Conditions combine with ``AND``
(``OR`` among tag conditions). htm's search takes one any-of tag set, so an ``AND`` of two
tag conditions, ranges on other keys, ``NE``, ``NIN``, ``ALL``, ``TEXT_MATCH``,
``IS_EMPTY`` and ``NOT`` raise :class:`UnsupportedFilterError` rather than post-filter and
starve the result.

**Scoped by default.** A store sees only the nodes stored through an ``HTMVectorStore``
(every tag it writes lies below ``llama_index``): conversations and facts held in the same
``HTM`` never come back as nodes. With ``user_id``, the store is that user's: its tags lie
below ``chat:user:<user_id>:llama_index`` (inside the user's conversation scope, see
docs/langchain.md), so it sees only that user's nodes, and the default store does not see
them. ``shared=True`` searches the whole store (every memory, as htm's own recall); it is
the only mode where a ``tags`` filter takes arbitrary htm tags. Node ids are htm keys in
the application's store, unique in it; a user's store keys its nodes inside the user's
scope, so two users' nodes of the same id (a document both ingest) are two memories. Ids
(users, node ids, ``ref_doc_id``) and metadata values compare exactly, byte for byte
(:mod:`htm_core.identity`): ``README.md`` and ``readme.md`` are two documents.

**Deleting never forgets by surprise.** ``delete(ref_doc_id)``, ``delete_nodes`` and
``clear`` call ``htm.forget(key, confirm=True)`` on the nodes' memories: they disappear
from queries and recall at once but stay recoverable with ``htm.restore(key)`` until
``htm.purge(confirm=True)``; every forget is in ``htm.operations()``.
"""

from __future__ import annotations

import asyncio
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

from htm_core import HTM, Hit, Memory
from htm_core.errors import NotFoundError, UnknownStrategyError, UnsupportedFilterError, ValidationError
from htm_core.serialize import memory_metadata
from htm_core.store import SearchFilters
from htm_core.tags import tag_matches
from htm_core.validation import MAX_KEY_LENGTH, check_importance

from .._options import refuse_unknown
from .._scope import ChatScope, id_slug
from ._filters import TAG_ROOT, as_datetime, doc_tag, metadata_tag, node_tag, node_tags, translate

__all__ = ["TAG_ROOT", "HTMVectorStore", "UnsupportedFilterError", "metadata_tag"]

_MODES = {
    VectorStoreQueryMode.DEFAULT: "vector",
    VectorStoreQueryMode.TEXT_SEARCH: "fulltext",
    VectorStoreQueryMode.HYBRID: "hybrid",
}
#: Metadata keys every returned node carries (DESIGN: id, key, score, importance...).
RESULT_KEYS = ("id", "key", "score", "importance", "created_at", "robot", "tags")
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

        The text is embedded by htm's embedder (``node.embedding`` is not stored, see the
        module docstring). A node id already used by a memory with other content raises
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
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    # -- querying -------------------------------------------------------------------------

    def _filters(self, filters: MetadataFilters | None,
                 tag_sets: Iterable[Iterable[str]] = ()) -> SearchFilters | None:
        # Empty id lists mean "no restriction": VectorStoreIndex.as_retriever passes
        # node_ids=[] for stores that keep the text.
        return translate(filters, root=self.tag_root, date_key=self.date_key,
                         shared=self.shared, tag_sets=[s for s in tag_sets if s])

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
        root = self.tag_root
        where = self._filters(query.filters, [
            [doc_tag(d, root) for d in query.doc_ids or ()],
            [node_tag(n, root) for n in query.node_ids or ()]])
        if where is None or limit < 1:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        hits = self.htm.recall(text, limit=limit, strategy=strategy, tags=where.tags or None,
                               robot=where.robot, timeframe=_timeframe(where))
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
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

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
