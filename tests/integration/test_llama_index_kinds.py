"""``kinds=`` on the LlamaIndex adapters: ``HTMVectorStore``, ``HTMMemoryBlock``, ``HTMMemory``.

Real ``VectorStoreIndex``, ``VectorIndexRetriever`` and ``Memory`` over htm on every
backend with the hashing embedder. Two users whose ids differ only in letter case,
``Ada`` and ``ada``, hold memories of every kind about the same thing: a kind filter picks
among one user's memories and never reaches the other's.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import Memory
from llama_index.core.retrievers import VectorIndexRetriever
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery

from htm_core import HTM
from htm_core.errors import ValidationError
from htm_integrations._scope import ChatScope
from htm_integrations.llama_index import HTMEmbedding, HTMMemory, HTMMemoryBlock, HTMVectorStore

CODES = {"Ada": "4711", "ada": "1174"}


def nodes(user: str) -> list[TextNode]:
    code = CODES[user]
    return [TextNode(id_="pref", text=f"I prefer the locker {code} by the window"),
            TextNode(id_="code", text=f"The locker code is {code}"),
            TextNode(id_="manual", text=f"The locker {code} manual is in the drawer",
                     metadata={"kind": "manual"})]


@pytest.fixture
def htm(htm_factory: Callable[..., HTM]) -> HTM:
    htm = htm_factory(robot="librarian")
    for user in CODES:
        store = HTMVectorStore(htm=htm, user_id=user)
        index = VectorStoreIndex.from_vector_store(store, embed_model=HTMEmbedding(htm=htm))
        index.insert_nodes(nodes(user))
    return htm


def found(store: HTMVectorStore, **kwargs: object) -> list[str]:
    result = store.query(VectorStoreQuery(query_str="locker", similarity_top_k=10), **kwargs)
    return sorted(n.get_content() for n in result.nodes)


def test_vector_store_kinds_pick_within_the_users_store(htm: HTM) -> None:
    ada = HTMVectorStore(htm=htm, user_id="ada", kinds=["Preference"])
    assert ada.kinds == ("preference",)
    assert found(ada) == ["I prefer the locker 1174 by the window"]
    assert found(HTMVectorStore(htm=htm, user_id="Ada", kinds="preference")) == \
        ["I prefer the locker 4711 by the window"]
    assert found(ada, kinds=["episodic"]) == ["The locker 1174 manual is in the drawer",
                                              "The locker code is 1174"]
    assert found(ada, kinds=["skill", "fact"]) == []
    shared = HTMVectorStore(htm=htm, shared=True, kinds=["preference"])
    assert found(shared) == ["I prefer the locker 1174 by the window",
                             "I prefer the locker 4711 by the window"]


def test_node_metadata_kind_is_not_the_memory_kind(htm: HTM) -> None:
    manual = MetadataFilters(filters=[MetadataFilter(key="kind", value="manual")])
    index = VectorStoreIndex.from_vector_store(
        HTMVectorStore(htm=htm, user_id="Ada", kinds=["episodic"]),
        embed_model=HTMEmbedding(htm=htm))
    got = index.as_retriever(similarity_top_k=5, filters=manual).retrieve("locker")
    assert [(n.get_content(), n.metadata["kind"]) for n in got] == \
        [("The locker 4711 manual is in the drawer", "manual")]
    retriever = VectorIndexRetriever(index, similarity_top_k=5, filters=manual,
                                     vector_store_kwargs={"kinds": ["preference"]})
    assert retriever.retrieve("locker") == []


def test_vector_store_refuses_bad_kinds(htm: HTM) -> None:
    with pytest.raises(ValidationError, match=r"HTMVectorStore kinds must be .*'nope'"):
        HTMVectorStore(htm=htm, kinds=["fact", "nope"])
    store = HTMVectorStore(htm=htm, user_id="ada")
    with pytest.raises(ValidationError, match="non-empty list"):
        found(store, kinds=[])


def seed_facts(htm: HTM) -> None:
    """Per user: a fact and a preference about the locker, in the user's scope."""
    for user, code in CODES.items():
        tag = ChatScope.of(user_id=user).tag
        htm.add(f"The locker code is {code}", tags=[tag], kind="fact", key=f"{tag}:fact")
        htm.add(f"I prefer locker {code} near the door", tags=[tag], key=f"{tag}:pref")


async def test_memory_block_recalls_its_kinds_in_its_users_scope(htm: HTM) -> None:
    seed_facts(htm)
    block = HTMMemoryBlock(htm=htm, user_id="ada", kinds="fact", priority=1)
    memory = Memory.from_defaults(session_id="s1", token_limit=500, memory_blocks=[block])
    await memory.aput(ChatMessage(role="user", content="Which locker code is mine?"))
    system = (await memory.aget())[0]
    assert system.role == MessageRole.SYSTEM
    assert "The locker code is 1174" in str(system.content)
    assert "4711" not in str(system.content) and "near the door" not in str(system.content)
    with pytest.raises(ValidationError, match="HTMMemoryBlock kinds must be"):
        HTMMemoryBlock(htm=htm, kinds=["facts"])


def test_chat_memory_context_holds_its_kinds_in_its_users_scope(htm: HTM) -> None:
    seed_facts(htm)
    htm.recall("locker", tags=["chat"], limit=10)  # every memory of both users in working memory
    memory = HTMMemory.from_defaults(htm=htm, user_id="Ada", session_id="s1",
                                     token_limit=500, kinds=["preference"])
    memory.put(ChatMessage(role="user", content="Which locker do I like?"))
    got = memory.get()
    assert got[0].role == MessageRole.SYSTEM
    lines = str(got[0].content).splitlines()[1:]
    assert sorted(lines) == ["- I prefer locker 4711 near the door",  # both of Ada's, the
                             "- I prefer the locker 4711 by the window"]  # node's too
    assert [m.content for m in got[1:]] == ["Which locker do I like?"]
    unfiltered = HTMMemory.from_defaults(htm=htm, user_id="Ada", session_id="s1",
                                         token_limit=500).get()
    assert "- The locker code is 4711" in str(unfiltered[0].content)
    assert "1174" not in str(unfiltered[0].content)
    with pytest.raises(ValidationError, match="HTMMemory kinds must be"):
        HTMMemory(htm=htm, kinds=[])
