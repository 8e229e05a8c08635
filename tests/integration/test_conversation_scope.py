"""A conversation belongs to its user: two users (Ada and Bob), two sessions each, one htm.

Every test drives the real framework classes (LangChain's ``ConversationChain`` and
``RunnableWithMessageHistory``, LlamaIndex's ``SimpleChatEngine`` and ``Memory``) with
their own fake models, on one ``HTM`` shared by every user, on every backend (a SQLite
file and PostgreSQL). Bob's prompts and recalls never hold Ada's words unless the
application asks for shared memory explicitly; a new ``HTM`` on the same database (a
restart, with Ada's turns restored into working memory) keeps the scoping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_classic.chains import ConversationChain
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder, PromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.runnables.history import RunnableWithMessageHistory

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockLLMWithChatMemoryOfLastCall
from llama_index.core.memory import Memory
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from htm_core import HTM
from htm_core.errors import ValidationError
from htm_integrations.langchain import HTMChatMessageHistory, HTMRetriever, HTMStore
from htm_integrations.langchain import HTMMemory as LangChainMemory
from htm_integrations.llama_index import HTMEmbedding, HTMMemoryBlock, HTMVectorStore
from htm_integrations.llama_index import HTMMemory as LlamaMemory

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::PendingDeprecationWarning")

ADA_SECRET = "My locker code is 4711 and my cat is called Tiberius"
BOB_FACT = "My locker code is 9350 and my dog is called Rex"
QUESTION = "What is my locker code and what is my pet called?"


class PromptRecorder(BaseCallbackHandler):
    """Keeps every prompt an LLM was called with."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any) -> None:
        self.prompts.extend(prompts)


def lc_chat(memory: LangChainMemory, *inputs: str) -> list[str]:
    """Run a ConversationChain over ``inputs``; the prompts the LLM got."""
    recorder = PromptRecorder()
    chain = ConversationChain(llm=FakeListLLM(responses=["Noted."] * len(inputs),
                                              callbacks=[recorder]), memory=memory)
    for text in inputs:
        chain.invoke({"input": text})
    return recorder.prompts


def li_chat(memory: LlamaMemory, text: str) -> str:
    """One SimpleChatEngine turn; everything the LLM was sent, as one string."""
    llm = MockLLMWithChatMemoryOfLastCall(max_tokens=5)
    SimpleChatEngine.from_defaults(llm=llm, memory=memory).chat(text)
    return "\n".join(m.content or "" for m in llm.last_chat_messages or [])


# -- LangChain classic HTMMemory -----------------------------------------------------------


def test_langchain_memory_of_bob_never_shows_adas_transcript(
        htm_factory: Callable[..., HTM]) -> None:
    """The reported bug: Bob's history held Ada's whole transcript, even with recall_tags."""
    htm = htm_factory(robot="assistant")
    lc_chat(LangChainMemory(htm=htm, session_id="ada"), ADA_SECRET, "Remember that please")
    assert any(ADA_SECRET in h.memory.content for h in htm.recall("locker code", limit=5))

    as_documented = LangChainMemory(htm=htm, session_id="bob", recall_tags=["chat:session:bob"])
    default = LangChainMemory(htm=htm, session_id="bob")
    for memory in (as_documented, default):
        for prompt in lc_chat(memory, QUESTION):
            assert "4711" not in prompt and "Tiberius" not in prompt
        history = memory.load_memory_variables({"input": QUESTION})["history"]
        assert "4711" not in history
        assert f"Human: {QUESTION}" in history  # Bob's own turns are there

    # Ada's own session still has her transcript
    ada = LangChainMemory(htm=htm, session_id="ada")
    assert ADA_SECRET in ada.load_memory_variables({"input": QUESTION})["history"]


def test_langchain_users_with_two_sessions_each_and_a_restart(
        store_url: str, htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    lc_chat(LangChainMemory(htm=htm, user_id="ada", session_id="s1"), ADA_SECRET)
    lc_chat(LangChainMemory(htm=htm, user_id="bob", session_id="s1"), BOB_FACT)
    lc_chat(LangChainMemory(htm=htm, user_id="ada", session_id="s2"), "I moved to Lisbon")

    for generation in range(2):
        # Bob's second session recalls Bob's first one, never Ada's sessions
        bob = LangChainMemory(htm=htm, user_id="bob", session_id="s2")
        prompts = lc_chat(bob, QUESTION)
        assert "9350" in prompts[0] and "Rex" in prompts[0]
        assert all("4711" not in p and "Lisbon" not in p for p in prompts)
        ada = LangChainMemory(htm=htm, user_id="ada", session_id="s2")
        history = ada.load_memory_variables({"input": QUESTION})["history"]
        assert "4711" in history and "Lisbon" in history and "9350" not in history
        if generation == 0:
            # a restart: a new HTM on the same database restores working memory (both
            # users' turns) and must keep them apart
            htm.close()
            htm = htm_factory(robot="assistant", database_url=store_url)
            assert len(htm.working_memory) > 0


def test_langchain_shared_memory_is_explicit(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    lc_chat(LangChainMemory(htm=htm, session_id="ada"), ADA_SECRET)
    htm.add("The office is closed on public holidays", key="kb-office", tags=["kb:office"])
    shared = LangChainMemory(htm=htm, session_id="bob", shared=True)
    assert "4711" in lc_chat(shared, QUESTION)[0]
    knowledge = LangChainMemory(htm=htm, session_id="carol", shared_tags=["kb"])
    prompt = lc_chat(knowledge, "Is the office closed on public holidays?")[0]
    assert "closed on public holidays" in prompt and "4711" not in prompt
    with pytest.raises(ValidationError, match="shared=True"):
        LangChainMemory(htm=htm, session_id="bob", recall_tags=["chat:session:ada"])


def test_message_histories_of_two_users_with_the_same_session_id(
        store_url: str, htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")])
    seen: list[list[BaseMessage]] = []

    def record(value: Any) -> Any:
        seen.append(list(value.to_messages()))
        return value

    model = GenericFakeChatModel(messages=iter([AIMessage("Noted.")] * 4))
    chains = {user: RunnableWithMessageHistory(
        prompt | record | model,
        lambda session_id, user=user: HTMChatMessageHistory(htm=htm, session_id=session_id,
                                                            user_id=user),
        input_messages_key="question", history_messages_key="history")
        for user in ("ada", "bob")}
    chains["ada"].invoke({"question": ADA_SECRET}, config={"configurable": {"session_id": "s1"}})
    chains["bob"].invoke({"question": QUESTION}, config={"configurable": {"session_id": "s1"}})
    assert all("4711" not in str(m.content) for m in seen[-1])
    htm.close()
    again = htm_factory(robot="assistant", database_url=store_url)
    ada = HTMChatMessageHistory(htm=again, session_id="s1", user_id="ada")
    bob = HTMChatMessageHistory(htm=again, session_id="s1", user_id="bob")
    assert [m.content for m in ada.messages] == [ADA_SECRET, "Noted."]
    assert [m.content for m in bob.messages] == [QUESTION, "Noted."]
    assert ada.key_for(0) == "chat:user:ada:s1:00000000"
    assert set(again.retrieve(ada.key_for(0)).tags) == {  # type: ignore[union-attr]
        "chat:user:ada:session:s1", "chat:role:human"}


# -- LlamaIndex HTMMemory and HTMMemoryBlock ----------------------------------------------


def test_llama_index_memory_of_a_new_user_never_recalls_another_users_locker_code(
        htm_factory: Callable[..., HTM]) -> None:
    """The reported bug: a new user's chat recalled another user's locker code."""
    htm = htm_factory(robot="assistant")
    ada = LlamaMemory.from_defaults(htm=htm, session_id="ada", token_limit=400)
    li_chat(ada, ADA_SECRET)
    bob = LlamaMemory.from_defaults(htm=htm, session_id="bob", token_limit=400)
    sent = li_chat(bob, QUESTION)
    assert "4711" not in sent and "Tiberius" not in sent
    assert not any("4711" in m.content for m in bob.get(input=QUESTION) if m.content)
    # the same memory for Ada (a new process's memory object, same session) still recalls
    again = LlamaMemory.from_defaults(htm=htm, session_id="ada", token_limit=400)
    assert "4711" in li_chat(again, QUESTION)


def test_llama_index_users_with_two_sessions_each_and_a_restart(
        store_url: str, htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    li_chat(LlamaMemory.from_defaults(htm=htm, user_id="ada", session_id="s1"), ADA_SECRET)
    li_chat(LlamaMemory.from_defaults(htm=htm, user_id="bob", session_id="s1"), BOB_FACT)
    for generation in range(2):
        bob = LlamaMemory.from_defaults(htm=htm, user_id="bob", session_id="s2")
        sent = li_chat(bob, QUESTION)
        assert "9350" in sent and "4711" not in sent
        ada = LlamaMemory.from_defaults(htm=htm, user_id="ada", session_id="s2")
        sent = li_chat(ada, QUESTION)
        assert "4711" in sent and "9350" not in sent
        if generation == 0:
            htm.close()
            htm = htm_factory(robot="assistant", database_url=store_url)
    shared = LlamaMemory.from_defaults(htm=htm, user_id="carol", session_id="s1", shared=True,
                                       recall_limit=20)
    sent = li_chat(shared, "whose locker code is 4711")
    assert ADA_SECRET in sent


async def test_llama_index_memory_block_is_scoped_to_the_memory_session(
        htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")

    def memory(session: str, **block: Any) -> Memory:
        return Memory.from_defaults(
            session_id=session, token_limit=120, token_flush_size=40,
            chat_history_token_ratio=0.5,
            memory_blocks=[HTMMemoryBlock(htm=htm, recall_limit=5, priority=1, **block)])

    ada = memory("ada-1")
    await ada.aput(ChatMessage(role="user", content=ADA_SECRET))
    await ada.aput(ChatMessage(role="assistant", content="Locker 4711, got it."))
    filler = "Tell me about the history of the printing press in fifteenth century Europe."
    for _ in range(3):
        await ada.aput(ChatMessage(role="user", content=filler))
        await ada.aput(ChatMessage(role="assistant", content="Gutenberg, around 1440."))
    flushed = htm.recall("locker code", limit=5, strategy="fulltext")
    assert any(h.memory.content == ADA_SECRET for h in flushed)
    assert "chat:session:ada-1" in flushed[0].memory.tags

    again = memory("ada-1")
    assert "4711" in str((await again.aget(input=QUESTION))[0].content)
    bob = memory("bob-1")
    got = await bob.aget(input=QUESTION)
    assert all("4711" not in str(m.content) for m in got)
    shared = memory("bob-2", shared=True)
    assert "4711" in str((await shared.aget(input=QUESTION))[0].content)


# -- LlamaIndex HTMVectorStore ---------------------------------------------------------------


def test_vector_store_sees_its_own_nodes_only(store_url: str,
                                              htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    li_chat(LlamaMemory.from_defaults(htm=htm, user_id="ada", session_id="s1"), ADA_SECRET)
    embed = HTMEmbedding(htm=htm)
    kb = VectorStoreIndex.from_vector_store(HTMVectorStore(htm=htm), embed_model=embed)
    kb.insert(Document(text="Lockers are emptied every Friday evening", doc_id="kb-lockers",
                       metadata={"tags": ["facilities"]}))
    ada_store = HTMVectorStore(htm=htm, user_id="ada")
    VectorStoreIndex.from_vector_store(ada_store, embed_model=embed).insert(
        Document(text="Ada's locker code card: the code is 4711", doc_id="ada-card"))
    VectorStoreIndex.from_vector_store(HTMVectorStore(htm=htm, user_id="bob"), embed_model=embed
                                       ).insert(Document(text="Bob's locker code is 9350",
                                                         doc_id="bob-card"))

    def texts(store: HTMVectorStore, **retriever: Any) -> str:
        index = VectorStoreIndex.from_vector_store(store, embed_model=HTMEmbedding(htm=store.htm))
        nodes = index.as_retriever(similarity_top_k=10, **retriever).retrieve("locker code")
        return "\n".join(n.node.get_content() for n in nodes)

    for generation in range(2):
        app = texts(HTMVectorStore(htm=htm))
        assert "emptied every Friday" in app and "4711" not in app and "9350" not in app
        everything = MetadataFilters(filters=[MetadataFilter(key="tags", value="chat")])
        assert texts(HTMVectorStore(htm=htm), filters=everything) == ""  # stays in scope
        bob = texts(HTMVectorStore(htm=htm, user_id="bob"))
        assert "9350" in bob and "4711" not in bob and "Friday" not in bob
        assert "4711" in texts(HTMVectorStore(htm=htm, user_id="ada"))
        assert ADA_SECRET in texts(HTMVectorStore(htm=htm, shared=True))
        # Ada's own chat memory (user scope) recalls her document node too, Bob's does not
        assert "4711" in li_chat(LlamaMemory.from_defaults(htm=htm, user_id="ada",
                                                           session_id="s9"), "locker code card")
        assert "4711" not in li_chat(LlamaMemory.from_defaults(htm=htm, user_id="bob",
                                                               session_id="s9"), "locker code card")
        if generation == 0:
            htm.close()
            htm = htm_factory(robot="assistant", database_url=store_url)
    HTMVectorStore(htm=htm, user_id="bob").clear()  # forgets Bob's nodes, nobody else's
    ada_nodes = HTMVectorStore(htm=htm, user_id="ada").get_nodes()
    assert [n.ref_doc_id for n in ada_nodes] == ["ada-card"]
    assert [n.ref_doc_id for n in HTMVectorStore(htm=htm).get_nodes()] == ["kb-lockers"]
    assert HTMVectorStore(htm=htm, user_id="bob").get_nodes() == []


# -- LangChain HTMRetriever ------------------------------------------------------------------


def test_retriever_searches_an_explicit_scope_only(store_url: str,
                                                   htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    for user, fact in (("ada", ADA_SECRET), ("bob", BOB_FACT)):
        for session in ("s1", "s2"):
            HTMChatMessageHistory(htm=htm, session_id=session, user_id=user).add_messages(
                [HumanMessage(f"{fact} ({session})"), AIMessage("Noted.")])
    htm.add("Lockers are emptied every Friday evening", key="kb-lockers", tags=["kb"])
    with pytest.raises(ValidationError, match="whose memories"):
        HTMRetriever(htm=htm)

    prompt = PromptTemplate.from_template("Context:\n{context}\nQuestion: {question}")
    recorder = PromptRecorder()

    def chain(retriever: HTMRetriever) -> Any:
        return ({"context": retriever | (lambda docs: "\n".join(d.page_content for d in docs)),
                 "question": RunnablePassthrough()}
                | prompt | FakeListLLM(responses=["Noted."] * 8, callbacks=[recorder]))

    for generation in range(2):
        chain(HTMRetriever(htm=htm, user_id="bob", shared_tags=["kb"], k=10)).invoke(QUESTION)
        assert "9350" in recorder.prompts[-1] and "Friday" in recorder.prompts[-1]
        assert "4711" not in recorder.prompts[-1]
        one_session = HTMRetriever(htm=htm, user_id="bob", tags=["chat:user:bob:session:s2"],
                                   k=10)
        texts = [d.page_content for d in one_session.invoke("locker code")]
        assert texts and all("(s2)" in t or t == "AI: Noted." for t in texts)
        assert all("4711" not in d.page_content
                   for d in HTMRetriever(htm=htm, tags=["kb"], k=10).invoke("locker code"))
        with pytest.raises(ValidationError, match="outside"):
            one_session.invoke("locker code", tags=["chat:user:ada"])
        shared = HTMRetriever(htm=htm, shared=True, k=20).invoke("locker code 4711")
        assert any("4711" in d.page_content for d in shared)
        if generation == 0:
            htm.close()
            htm = htm_factory(robot="assistant", database_url=store_url)


# -- LangGraph HTMStore ----------------------------------------------------------------------


def test_langgraph_store_stays_in_its_namespace(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="assistant")
    lc_chat(LangChainMemory(htm=htm, user_id="ada", session_id="s1"), ADA_SECRET)
    store = HTMStore(htm=htm, fields=["text"])
    store.put(("memories", "ada"), "locker", {"text": "Ada's locker code is 4711"})
    store.put(("memories", "bob"), "locker", {"text": "Bob's locker code is 9350"})
    bob = store.search(("memories", "bob"), query="locker code 4711", limit=10)
    assert [i.value["text"] for i in bob] == ["Bob's locker code is 9350"]
    everyone = store.search((), query="locker code", limit=10)  # every namespace, explicitly
    assert {i.value["text"] for i in everyone} == {"Ada's locker code is 4711",
                                                   "Bob's locker code is 9350"}
    assert ADA_SECRET not in {str(i.value) for i in store.search((), limit=50)}
