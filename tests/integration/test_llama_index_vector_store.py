"""HTMVectorStore under a real ``VectorStoreIndex``, and the embedding adapters.

htm runs on a real SQLite file (and on PostgreSQL when that backend joins ``BACKENDS``);
embeddings are htm's ``HashingEmbedder`` seen through the adapters, or LlamaIndex's own
``MockEmbedding``; no network.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from htm_core import HTM, HashingEmbedder
from htm_core.errors import UnknownStrategyError, ValidationError
from htm_integrations.llama_index import (
    HTMEmbedding,
    HTMVectorStore,
    LlamaIndexEmbedder,
    UnsupportedFilterError,
)

DOCS = [
    ("doc-vim", "Vim keybindings make editing fast for the whole team", "alice", "editors",
     "2024-05-01"),
    ("doc-emacs", "Emacs org-mode keeps the team's notes and agenda", "bob", "editors",
     "2024-05-10"),
    ("doc-deploy", "Production deploys run every Thursday after code review", "alice", "ops",
     "2024-04-20"),
    ("doc-oncall", "The on-call rota rotates weekly between alice and bob", "carol", "ops",
     "2024-05-14"),
]


def f(key: str, value: object, op: FilterOperator = FilterOperator.EQ) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=op)  # type: ignore[arg-type]


@pytest.fixture
def htm(htm_factory: Callable[..., HTM]) -> HTM:
    return htm_factory(robot="librarian")


@pytest.fixture
def index(htm: HTM) -> VectorStoreIndex:
    store = HTMVectorStore(htm=htm)
    index = VectorStoreIndex.from_vector_store(store, embed_model=HTMEmbedding(htm=htm))
    for doc_id, text, author, category, date in DOCS:
        index.insert(Document(text=text, doc_id=doc_id,
                              metadata={"author": author, "category": category,
                                        "created_at": date}))
    return index


def keys_of(nodes: list) -> list[str]:
    return [n.node.node_id for n in nodes]


@pytest.mark.parametrize(("mode", "strategy"), [
    (VectorStoreQueryMode.DEFAULT, "vector"),
    (VectorStoreQueryMode.TEXT_SEARCH, "fulltext"),
    (VectorStoreQueryMode.HYBRID, "hybrid"),
])
def test_retrieval_matches_htm_recall(index: VectorStoreIndex, htm: HTM,
                                      mode: VectorStoreQueryMode, strategy: str) -> None:
    retriever = index.as_retriever(similarity_top_k=3, vector_store_query_mode=mode)
    got = retriever.retrieve("team editing keybindings")
    hits = htm.recall("team editing keybindings", limit=3, strategy=strategy)
    assert keys_of(got) == [h.memory.key for h in hits]
    assert [n.score for n in got] == pytest.approx([h.score for h in hits])
    top = got[0].node
    assert top.get_content() == "Vim keybindings make editing fast for the whole team"
    assert top.ref_doc_id == "doc-vim"
    assert top.metadata["author"] == "alice"
    for key in ("id", "key", "score", "importance", "created_at", "robot", "tags"):
        assert key in top.metadata
    assert top.metadata["robot"] == "librarian" and top.metadata["tags"] == []
    assert top.metadata["created_at"].startswith("2024-05-01")
    assert "score" not in top.get_content(metadata_mode="llm")  # kept out of prompts


def test_filters_run_inside_the_search(index: VectorStoreIndex, htm: HTM) -> None:
    def search(filters: MetadataFilters, k: int = 4) -> set[str]:
        return {n.node.ref_doc_id for n in
                index.as_retriever(similarity_top_k=k, filters=filters).retrieve("team")}

    assert search(MetadataFilters(filters=[f("author", "alice")])) == {"doc-vim", "doc-deploy"}
    assert search(MetadataFilters(filters=[f("category", ["ops"], FilterOperator.IN)])) == \
        {"doc-deploy", "doc-oncall"}
    assert search(MetadataFilters(filters=[f("created_at", "2024-05-01", FilterOperator.GT)])) == \
        {"doc-emacs", "doc-oncall"}
    assert search(MetadataFilters(filters=[f("created_at", "2024-05-01", FilterOperator.GTE),
                                           f("created_at", "2024-05-10", FilterOperator.LT)])) == \
        {"doc-vim"}
    assert search(MetadataFilters(filters=[f("author", "alice"),
                                           f("created_at", "2024-05-01", FilterOperator.LTE)])) == \
        {"doc-vim", "doc-deploy"}
    assert search(MetadataFilters(filters=[f("author", "bob"), f("author", "carol")],
                                  condition=FilterCondition.OR)) == {"doc-emacs", "doc-oncall"}
    assert search(MetadataFilters(filters=[f("doc_id", "doc-emacs")])) == {"doc-emacs"}
    assert search(MetadataFilters(filters=[f("robot", "librarian")])) == {d[0] for d in DOCS}
    assert search(MetadataFilters(filters=[f("robot", "nobody")])) == set()
    # In the search, not after it: one match among many better ones is still found.
    for i in range(30):
        index.insert(Document(text=f"team team team meeting number {i}", doc_id=f"noise-{i}",
                              metadata={"author": "dave"}))
    assert search(MetadataFilters(filters=[f("author", "carol")]), k=1) == {"doc-oncall"}
    hits = htm.recall("team", limit=1, tags=["llama_index:meta:author:carol"])
    assert hits[0].memory.key == keys_of(index.as_retriever(
        similarity_top_k=1, filters=MetadataFilters(filters=[f("author", "carol")])).retrieve("team"))[0]


@pytest.mark.parametrize("filters", [
    MetadataFilters(filters=[f("author", "alice", FilterOperator.NE)]),
    MetadataFilters(filters=[f("author", "alice"), f("category", "ops")]),
    MetadataFilters(filters=[f("rating", 3, FilterOperator.GT)]),
    MetadataFilters(filters=[f("author", "alice"), f("robot", "librarian")],
                    condition=FilterCondition.OR),
    MetadataFilters(filters=[f("author", "alice")], condition=FilterCondition.NOT),
])
def test_filters_htm_cannot_run_inside_the_search_are_refused(
        index: VectorStoreIndex, filters: MetadataFilters) -> None:
    with pytest.raises(UnsupportedFilterError) as err:
        index.as_retriever(filters=filters).retrieve("team")
    assert "use" in str(err.value) or "combine" in str(err.value)


def test_delete_forgets_recoverably(index: VectorStoreIndex, htm: HTM) -> None:
    retriever = index.as_retriever(similarity_top_k=4)
    node_id = next(n.node.node_id for n in retriever.retrieve("Emacs org-mode notes")
                   if n.node.ref_doc_id == "doc-emacs")
    index.delete_ref_doc("doc-emacs")
    assert "doc-emacs" not in {n.node.ref_doc_id for n in retriever.retrieve("Emacs org-mode notes")}
    assert all(h.memory.key != node_id for h in htm.recall("Emacs org-mode notes", limit=10))
    assert htm.stats().forgotten == 1
    assert any(op.key == node_id for op in htm.operations(op="forget"))
    htm.restore(node_id)
    assert "doc-emacs" in {n.node.ref_doc_id for n in retriever.retrieve("Emacs org-mode notes")}


def test_get_nodes_delete_nodes_and_clear(htm: HTM) -> None:
    store = HTMVectorStore(htm=htm)
    htm.add("A fact that is not a node", key="fact")
    nodes = [TextNode(id_=f"n{i}", text=f"node text {i}", metadata={"kind": k})
             for i, k in enumerate(["a", "a", "b"])]
    assert store.add(nodes) == ["n0", "n1", "n2"]
    assert [n.node_id for n in store.get_nodes(node_ids=["n2", "missing"])] == ["n2"]
    by_kind = store.get_nodes(filters=MetadataFilters(filters=[f("kind", "a")]))
    assert sorted(n.node_id for n in by_kind) == ["n0", "n1"]
    # A node's own "kind" is kept (not the memory's kind) and stays in its text for LLMs.
    assert [n.metadata["kind"] for n in by_kind] == ["a", "a"]
    assert "kind: a" in by_kind[0].get_content(metadata_mode=MetadataMode.LLM)
    store.add([TextNode(id_="plain", text="a plain node")])
    plain = store.get_nodes(node_ids=["plain"])[0]
    assert plain.metadata["kind"] == "episodic"  # the memory's, kept out of the LLM text
    assert "kind:" not in plain.get_content(metadata_mode=MetadataMode.LLM)
    store.delete_nodes(node_ids=["n0"])
    assert htm.retrieve("n0") is None
    with pytest.raises(ValidationError, match="clear"):
        store.delete_nodes()
    store.clear()
    assert htm.stats().forgotten == 4
    assert htm.retrieve("fact") is not None  # not a node: left alone


def test_reads_and_deletes_list_in_the_store_never_scan_it(
        htm: HTM, monkeypatch: pytest.MonkeyPatch) -> None:
    """``get_nodes``, ``delete``, ``delete_nodes`` and ``clear`` ask ``HTM.list`` for the
    matching memories (filtered in SQL); a scan of the whole store would fail here."""
    store = HTMVectorStore(htm=htm)
    htm.add_many([f"a fact that is not a node {i}" for i in range(20)])
    store.add([TextNode(id_=f"n{i}", text=f"node text {i}", metadata={"kind": "ab"[i % 2]})
               for i in range(6)])

    def no_scan(*args: object, **kwargs: object) -> None:
        raise AssertionError("the whole store was scanned")

    monkeypatch.setattr(htm.store, "iter_memories", no_scan)
    by_kind = store.get_nodes(filters=MetadataFilters(filters=[f("kind", "b")]))
    assert [n.node_id for n in by_kind] == ["n1", "n3", "n5"]
    assert [n.node_id for n in store.get_nodes(node_ids=["n4", "n0", "fact", "n4"])] == \
        ["n4", "n0"]
    in_may = MetadataFilters(filters=[f("robot", "librarian")])
    assert [n.node_id for n in store.get_nodes(node_ids=["n2"], filters=in_may)] == ["n2"]
    with pytest.raises(UnsupportedFilterError, match="one set of tag-like"):
        store.get_nodes(node_ids=["n2"], filters=MetadataFilters(filters=[f("kind", "a")]))
    store.delete_nodes(filters=MetadataFilters(filters=[f("kind", "a")]))
    assert [n.node_id for n in store.get_nodes()] == ["n1", "n3", "n5"]
    store.clear()
    assert store.get_nodes() == [] and htm.stats().forgotten == 6
    assert htm.stats().long_term_total == 20  # visible: the facts, left alone


def test_unknown_keywords_are_refused(htm: HTM) -> None:
    with pytest.raises(ValidationError, match=r"\['similarity_top_k'\]"):
        HTMVectorStore(htm=htm, similarity_top_k=3)
    with pytest.raises(ValidationError, match=r"\['date_field'\].*did you mean 'date_key'"):
        HTMVectorStore(htm=htm, date_field="published")
    with pytest.raises(ValidationError, match=r"\['batch_size'\]"):
        HTMEmbedding(HashingEmbedder(), batch_size=8)
    assert HTMEmbedding(HashingEmbedder(), embed_batch_size=8).embed_batch_size == 8


def test_query_errors(htm: HTM) -> None:
    store = HTMVectorStore(htm=htm)
    store.add([TextNode(id_="n", text="some text")])
    with pytest.raises(ValidationError, match="query_str"):
        store.query(VectorStoreQuery(query_embedding=[0.1] * 384, similarity_top_k=1))
    with pytest.raises(UnknownStrategyError, match="TEXT_SEARCH"):
        store.query(VectorStoreQuery(query_str="text", mode=VectorStoreQueryMode.MMR))
    with pytest.raises(ValidationError, match="htm_core"):
        HTMVectorStore(htm=None)
    with pytest.raises(ValidationError, match="ISO 8601"):
        store.add([TextNode(id_="bad", text="dated", metadata={"created_at": "last tuesday"})])
    assert htm.retrieve("bad") is None  # nothing half-written


async def test_async_paths(index: VectorStoreIndex) -> None:
    got = await index.as_retriever(similarity_top_k=1).aretrieve("Thursday deploys")
    assert got[0].node.ref_doc_id == "doc-deploy"
    store = index.vector_store
    await store.adelete("doc-deploy")
    got = await index.as_retriever(similarity_top_k=4).aretrieve("Thursday deploys")
    assert "doc-deploy" not in {n.node.ref_doc_id for n in got}


def test_embedding_adapters(htm_factory: Callable[..., HTM], sqlite_url: str) -> None:
    hashing = HashingEmbedder()
    embed = HTMEmbedding(hashing)
    assert embed.get_text_embedding("hello world") == hashing.embed_documents(["hello world"])[0]
    assert embed.get_query_embedding("hello") == hashing.embed_query("hello")
    assert embed.model_name == hashing.name
    with pytest.raises(Exception, match="exactly one"):
        HTMEmbedding()
    # The LlamaIndex model can be the HTM embedder, and a wrapped htm embedder keeps its
    # name, so a store embedded by HashingEmbedder opens through HTMEmbedding.
    first = htm_factory(database_url=sqlite_url, embedder=hashing)
    first.add("kept across embedders")
    second = htm_factory(database_url=sqlite_url, embedder=LlamaIndexEmbedder(embed))
    assert second.recall("kept across", limit=1, strategy="vector")[0].memory.content == \
        "kept across embedders"
    mock = LlamaIndexEmbedder(MockEmbedding(embed_dim=8))
    assert mock.embed_documents(["a", "b"]) == [[0.5] * 8, [0.5] * 8]
    assert mock.name == "llama_index:MockEmbedding:unknown:8"
    with pytest.raises(Exception, match="BaseEmbedding"):
        LlamaIndexEmbedder(hashing)  # type: ignore[arg-type]


def test_public_surface_and_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    import htm_integrations.llama_index as package
    from htm_core.errors import MissingDependencyError

    assert package.__all__ == sorted(package.__all__)
    assert all(hasattr(package, name) for name in package.__all__)
    for name in list(sys.modules):
        if name.startswith("htm_integrations.llama_index"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "llama_index.core", None)
    with pytest.raises(MissingDependencyError, match=r'htm-memory\[llamaindex\]'):
        importlib.import_module("htm_integrations.llama_index")
