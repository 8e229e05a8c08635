"""Ids drawn to collide stay apart on every adapter path, on every backend.

Users, sessions, namespaces and documents whose ids differ only by case (``Ada``/``ada``,
``Chat1``/``chat1``, ``README.md``/``readme.md``), by a Unicode lookalike (Latin ``a`` and
Cyrillic ``а``; NFC and NFD ``é``), by a separator or wildcard (``a:b``, ``a/b``, ``a_b``,
``a-b``, ``a%b``, a trailing ``:``) or that spell another id's hashed form (``h-...``) each
get their own memories: nothing of one is shown, counted, changed or forgotten through
another. The frameworks are real (``langchain.agents.create_agent``, LlamaIndex's
``HTMMemory``/``VectorStoreIndex`` machinery, LangGraph's ``BaseStore`` API) with fake models.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

from htm_core import HTM
from htm_integrations._scope import id_slug
from htm_integrations.langchain import (
    HTMChatMessageHistory,
    HTMMiddleware,
    HTMRetriever,
    HTMStore,
    htm_tools,
)
from htm_integrations.langchain.middleware import BLOCK_END, BLOCK_START
from htm_integrations.llama_index import HTMMemory, HTMVectorStore
from htm_integrations.llama_index._filters import _segment
from tests.fake_chat import RecordingChatModel

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::PendingDeprecationWarning")

NFC = unicodedata.normalize("NFC", "José")
NFD = unicodedata.normalize("NFD", "José")
#: User ids drawn to collide: case, lookalikes, normal forms, separators, wildcards, a
#: trailing separator, and an id spelling another's hashed slug.
USERS = ["Ada", "ada", "ADA", "\u0430da", NFC, NFD, "a:b", "a/b", "a_b", "a-b", "a%b", "a:",
         "a", id_slug("a:b")]
#: Session ids drawn to collide (chat history keys and tags).
SESSIONS = ["Chat1", "chat1", "CHAT1", "\u0441hat1", "c_1", "c-1", "c%1", "c:1", "c/1", "c:",
            "c", id_slug("c:1")]
#: Document ids drawn to collide.
DOCS = ["README.md", "readme.md", "README-md", "README_md", "README%md", f"{NFC}.md",
        f"{NFD}.md", _segment("README md"), "README md"]
BLOCK = re.compile(re.escape(BLOCK_START) + r".*?" + re.escape(BLOCK_END), re.S)


def pin(i: int) -> str:
    return f"{4700 + i}"


def others(i: int, count: int) -> list[str]:
    return [pin(j) for j in range(count) if j != i]


def leaks(text: str, i: int, count: int) -> list[str]:
    """The other owners' PINs found in ``text``."""
    return [p for p in others(i, count) if p in text]


def test_the_middleware_block_shows_each_user_only_their_own_memories(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    model = RecordingChatModel(default="Noted.")
    agent = create_agent(model, middleware=[HTMMiddleware(htm)])
    for i, user in enumerate(USERS):
        agent.invoke({"messages": [HumanMessage(f"My bank PIN is {pin(i)}")]},
                     context={"user_id": user})
    wrong = {}
    for i, user in enumerate(USERS):
        agent.invoke({"messages": [HumanMessage("What is my bank PIN?")]},
                     context={"user_id": user})
        found = BLOCK.search(model.system_texts()[-1])
        block = found.group(0) if found else ""
        if pin(i) not in block or leaks(block, i, len(USERS)):
            wrong[user] = block
    assert wrong == {}


def test_llama_index_memory_gets_only_its_users_turns(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    memories = [HTMMemory.from_defaults(htm=htm, user_id=u, session_id="s", recall_limit=20)
                for u in USERS]
    for i, memory in enumerate(memories):
        memory.put(ChatMessage(role="user", content=f"My bank PIN is {pin(i)}"))
    for i, user in enumerate(USERS):
        fresh = HTMMemory.from_defaults(htm=htm, user_id=user, session_id="new",
                                        recall_limit=20)
        text = "\n".join(m.content or "" for m in fresh.get("What is my bank PIN?"))
        assert pin(i) in text and leaks(text, i, len(USERS)) == [], user


def test_retriever_and_tools_recall_only_their_users_memories(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    for i, user in enumerate(USERS):
        remember = htm_tools(htm, user_id=user)[0]
        remember.invoke({"content": f"My bank PIN is {pin(i)}"})
    for i, user in enumerate(USERS):
        docs = HTMRetriever(htm=htm, user_id=user, k=20).invoke("bank PIN")
        text = "\n".join(d.page_content for d in docs)
        assert pin(i) in text and leaks(text, i, len(USERS)) == [], user
        recalled = htm_tools(htm, user_id=user)[1].invoke({"query": "bank PIN"})
        assert pin(i) in recalled and leaks(recalled, i, len(USERS)) == [], user


def _nodes(user: int) -> list[TextNode]:
    return [TextNode(id_=f"u{user}-d{d}-n{n}", text=f"doc {d} part {n}: bank PIN {pin(user)}",
                     metadata={"author": doc})
            .model_copy(update={"relationships": {}}) for d, doc in enumerate(DOCS)
            for n in range(2)]


def _with_doc(node: TextNode, doc: str) -> TextNode:
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo

    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc)
    return node


def _stores(htm: HTM) -> list[HTMVectorStore]:
    stores = [HTMVectorStore(htm=htm, user_id=u) for u in USERS[:4]]
    for i, store in enumerate(stores):
        store.add([_with_doc(n, DOCS[int(n.node_id.split("-d")[1].split("-")[0])])
                   for n in _nodes(i)])
    return stores


def _ids(store: HTMVectorStore, **query: Any) -> set[str]:
    result = store.query(VectorStoreQuery(query_str="bank PIN part", similarity_top_k=100,
                                          **query))
    return set(result.ids or [])


def test_vector_store_queries_and_filters_see_only_their_users_documents(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    stores = _stores(htm)
    for i, store in enumerate(stores):
        own = {n.node_id for n in _nodes(i)}
        assert _ids(store) == own
        for d, doc in enumerate(DOCS):
            exact = {f"u{i}-d{d}-n0", f"u{i}-d{d}-n1"}
            eq = MetadataFilters(filters=[MetadataFilter(key="author", value=doc)])
            assert _ids(store, filters=eq) == exact, doc
            listed = {n.node_id for n in store.get_nodes(filters=eq)}
            assert listed == exact, doc
            assert _ids(store, doc_ids=[doc]) == exact, doc
        among = MetadataFilters(filters=[MetadataFilter(key="author", value=DOCS[:2],
                                                        operator=FilterOperator.IN)])
        assert _ids(store, filters=among) == {f"u{i}-d{d}-n{n}" for d in (0, 1)
                                              for n in (0, 1)}


def test_vector_store_delete_and_clear_forget_only_their_own_nodes(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    stores = _stores(htm)
    stores[1].delete("README.md")
    for i, store in enumerate(stores):
        gone = {"u1-d0-n0", "u1-d0-n1"} if i == 1 else set()
        assert _ids(store) == {n.node_id for n in _nodes(i)} - gone
    stores[0].clear()
    assert _ids(stores[0]) == set()
    for i, store in enumerate(stores[1:], start=1):
        gone = {"u1-d0-n0", "u1-d0-n1"} if i == 1 else set()
        assert _ids(store) == {n.node_id for n in _nodes(i)} - gone
    total = sum(len(store.get_nodes(filters=None)) for store in stores)
    assert total == 3 * len(_nodes(0)) - 2


def test_chat_histories_keep_each_session_apart(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    histories = [HTMChatMessageHistory(htm=htm, session_id=s) for s in SESSIONS]
    for i, history in enumerate(histories):
        history.add_messages([HumanMessage(f"My bank PIN is {pin(i)}"), AIMessage("Noted.")])
    for i, session in enumerate(SESSIONS):
        texts = [m.content for m in HTMChatMessageHistory(htm=htm, session_id=session).messages]
        assert texts == [f"My bank PIN is {pin(i)}", "Noted."], session
    histories[1].clear()
    for i, session in enumerate(SESSIONS):
        texts = [m.content for m in HTMChatMessageHistory(htm=htm, session_id=session).messages]
        assert len(texts) == (0 if i == 1 else 2), session
    histories[0].add_messages([HumanMessage("again")])  # numbering of its own keys only
    assert histories[0].messages[-1].content == "again"
    assert histories[0].key_for(2) in {m.key for m in htm.list(
        key_prefix=histories[0].key_for(0)[:-8], limit=10).memories}


def test_user_histories_keep_each_user_apart(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    for i, user in enumerate(USERS):
        HTMChatMessageHistory(htm=htm, session_id="Chat1", user_id=user).add_messages(
            [HumanMessage(f"My bank PIN is {pin(i)}")])
    for i, user in enumerate(USERS):
        texts = [m.content for m in
                 HTMChatMessageHistory(htm=htm, session_id="Chat1", user_id=user).messages]
        assert texts == [f"My bank PIN is {pin(i)}"], user


LABELS = ["Alice", "alice", "ALICE", "\u0430lice", NFC, NFD, "a:b", "a/b", "a_b",
          "a-b", "a%b", "a b", "a:20b", "a20b"]


def test_langgraph_namespaces_are_exact(htm_factory: Callable[..., HTM]) -> None:
    store = HTMStore(htm=htm_factory(robot="assistant"))
    for i, label in enumerate(LABELS):
        for n in range(3):
            store.put(("users", label), f"k{n}", {"text": f"bank PIN {pin(i)} item {n}"})
    for i, label in enumerate(LABELS):
        listed = store.search(("users", label), limit=3)
        assert [(tuple(it.namespace), it.value["text"]) for it in listed] == [
            (("users", label), f"bank PIN {pin(i)} item {n}") for n in (2, 1, 0)], label
        found = store.search(("users", label), query="bank PIN item", limit=3)
        assert {it.key for it in found} == {"k0", "k1", "k2"}, label
        assert all(it.namespace == ("users", label) for it in found), label
        assert store.list_namespaces(prefix=("users", label)) == [("users", label)]
    assert store.list_namespaces(prefix=("users",)) == sorted(("users", x) for x in LABELS)


def test_two_users_storing_the_same_node_id_keep_two_nodes(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    stores = [HTMVectorStore(htm=htm, user_id=u) for u in ("Ada", "ada", "\u0430da")]
    for store in stores:  # one document both ingest: the same node ids and the same text
        store.add([TextNode(id_="README.md_part_0", text="Install with pip, bank PIN 4711")])
    stores[2].add([TextNode(id_="README.md_part_1", text="other text of her own")])
    stores[1].add([TextNode(id_="README.md_part_1", text="different text, same node id")])
    for store in stores:
        assert _ids(store) == {"README.md_part_0", "README.md_part_1"} - (
            set() if store is not stores[0] else {"README.md_part_1"})
        got = store.get_nodes(node_ids=["README.md_part_1", "README.md_part_0"])
        assert [n.node_id for n in got][-1] == "README.md_part_0"
    stores[1].clear()
    assert _ids(stores[1]) == set()
    assert _ids(stores[0]) == {"README.md_part_0"}
    assert _ids(stores[2]) == {"README.md_part_0", "README.md_part_1"}
    htm.restore(stores[1].key_for("README.md_part_0"))
    assert _ids(stores[1]) == {"README.md_part_0"}
