"""``HTMRetriever``: langchain-tests' standard retriever suite, LCEL chains, per-call options.

Everything is real: an htm SQLite file (and every backend in ``BACKENDS``), the hashing
embedder, LangChain's own ``FakeListLLM`` and prompt classes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_tests.integration_tests import RetrieversIntegrationTests

from htm_core import HTM, FrozenClock
from htm_core.errors import UnknownStrategyError, ValidationError
from htm_integrations.langchain import HTMRetriever

FACTS = [
    ("vim", "The user prefers Vim keybindings in every editor", ["user:preferences"]),
    ("tea", "The user drinks green tea every morning", ["user:habits"]),
    ("rust", "The team rewrote the parser in Rust last spring", ["project"]),
    ("deploy", "Deploys happen on Tuesdays after the standup", ["project:process"]),
    ("editor-theme", "The user likes a dark editor theme with large fonts", ["user:preferences"]),
    ("keyboard", "The user types on a split ergonomic keyboard", ["user:hardware"]),
]


def seed(htm: HTM) -> None:
    htm.add_many([{"content": text, "key": key, "tags": tags} for key, text, tags in FACTS])


class TestStandardRetriever(RetrieversIntegrationTests):
    """The langchain-tests conformance suite, on a seeded htm database."""

    @pytest.fixture(autouse=True)
    def _seeded(self, htm_factory: Callable[..., HTM]) -> None:
        self.htm = htm_factory()
        seed(self.htm)

    @property
    def retriever_constructor(self) -> type[HTMRetriever]:
        return HTMRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"htm": self.htm, "shared": True}

    @property
    def retriever_query_example(self) -> str:
        return "what editor does the user like"


class PromptRecorder(BaseCallbackHandler):
    """Keeps every prompt an LLM was called with."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any) -> None:
        self.prompts.extend(prompts)


def test_documents_carry_memory_metadata(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    seed(htm)
    docs = HTMRetriever(htm=htm, shared=True, k=2).invoke("Vim keybindings")
    assert isinstance(docs[0], Document)
    top = docs[0]
    assert top.page_content == "The user prefers Vim keybindings in every editor"
    assert top.id == "vim"
    stored = htm.retrieve("vim")
    assert stored is not None
    assert top.metadata == {
        "id": stored.id, "key": "vim", "score": pytest.approx(top.metadata["score"]),
        "importance": 1.0, "created_at": "2024-05-15T12:00:00+00:00", "robot": stored.robot,
        "tags": ["user:preferences"], "kind": "episodic",
    }
    # the second shares no word with the query (the hashing embedder): its own score is low
    assert top.metadata["score"] > docs[1].metadata["score"] >= 0
    assert datetime.fromisoformat(top.metadata["created_at"]).tzinfo is not None


def test_options_filter_by_tags_robot_and_timeframe(htm_factory: Callable[..., HTM],
                                                    clock: FrozenClock) -> None:
    htm = htm_factory(robot="alice")
    seed(htm)
    other = htm_factory(robot="bob")
    other.add("The user prefers Emacs keybindings on weekends", key="emacs",
              created_at=datetime(2023, 1, 10, tzinfo=timezone.utc))
    query = "user prefers keybindings"
    by_tag = HTMRetriever(htm=htm, k=10, tags=["user:preferences"]).invoke(query)
    assert {d.metadata["key"] for d in by_tag} == {"vim", "editor-theme"}
    by_parent_tag = HTMRetriever(htm=htm, k=10, tags="user").invoke(query)
    assert {d.metadata["key"] for d in by_parent_tag} == {"vim", "tea", "editor-theme", "keyboard"}
    by_robot = HTMRetriever(htm=htm, shared=True, k=10, robot="bob").invoke(query)
    assert [d.metadata["key"] for d in by_robot] == ["emacs"]
    assert by_robot[0].metadata["robot"] == "bob"
    recent = HTMRetriever(htm=htm, shared=True, k=10, timeframe=timedelta(days=30)).invoke(query)
    assert "emacs" not in {d.metadata["key"] for d in recent}
    assert "vim" in {d.metadata["key"] for d in recent}
    january = HTMRetriever(htm=htm, shared=True, k=10).invoke(query, timeframe="January 2023")
    assert [d.metadata["key"] for d in january] == ["emacs"]
    fulltext = HTMRetriever(htm=htm, shared=True, k=10, strategy="fulltext").invoke("Tuesdays")
    assert [d.metadata["key"] for d in fulltext] == ["deploy"]


def test_kinds_filter_inside_a_users_scope(htm_factory: Callable[..., HTM]) -> None:
    """``kinds`` (on the retriever or per call) keeps memories of those kinds, up to ``k``
    of them, and never widens the user's scope: ``Ada`` and ``ada`` each see their own."""
    from htm_core.scope import ChatScope

    htm = htm_factory()
    htm.add_many([{"content": f"tea talk {i}"} for i in range(20)], working_memory=False)
    for user in ("Ada", "ada"):
        scope = ChatScope.of(user_id=user)
        htm.add_many([{"content": f"{user} tea fact {i}", "kind": "fact",
                       "tags": scope.stored_tags(None)} for i in range(2)])
        htm.add(f"{user} said tea talk", tags=scope.stored_tags(None))
    for user in ("Ada", "ada"):
        facts = HTMRetriever(htm=htm, user_id=user, k=2, kinds="fact").invoke("tea talk")
        assert sorted(d.page_content for d in facts) == [f"{user} tea fact 0",
                                                        f"{user} tea fact 1"]
        assert {d.metadata["kind"] for d in facts} == {"fact"}
        said = HTMRetriever(htm=htm, user_id=user, k=5).invoke("tea talk", kinds=["episodic"])
        assert [d.page_content for d in said] == [f"{user} said tea talk"]
    with pytest.raises(ValidationError, match="kinds must name kinds among episodic"):
        HTMRetriever(htm=htm, shared=True, kinds="facts").invoke("tea")


def test_source_and_confidence_filters_inside_a_users_scope(
        htm_factory: Callable[..., HTM]) -> None:
    """``sources`` and ``min_confidence`` (on the retriever or per call) keep the memories
    that pass, up to ``k`` of them, exact sources only, never widening the user's scope:
    ``Ada`` and ``ada`` each see their own; a bad value is refused when searching."""
    from htm_core.scope import ChatScope

    htm = htm_factory()
    htm.add_many([{"content": f"tea talk {i}", "source": "user", "confidence": 1.0}
                  for i in range(20)], working_memory=False)
    for user in ("Ada", "ada"):
        tags = ChatScope.of(user_id=user).stored_tags(None)
        htm.add_many([
            {"content": f"{user} sure tea talk", "source": "user", "confidence": 0.9,
             "tags": tags},
            {"content": f"{user} unsure tea talk", "source": "user", "confidence": 0.1,
             "tags": tags},
            {"content": f"{user} unknown tea talk", "source": "user", "kind": "episodic",
             "tags": tags},
            {"content": f"{user} told tea talk", "source": "User", "confidence": 0.9,
             "tags": tags}])
    for user in ("Ada", "ada"):
        sure = HTMRetriever(htm=htm, user_id=user, k=1, sources="user",
                            min_confidence=0.5).invoke("tea talk")
        assert [d.page_content for d in sure] == [f"{user} sure tea talk"]
        told = HTMRetriever(htm=htm, user_id=user, k=5).invoke("tea talk", sources=["User"])
        assert [d.page_content for d in told] == [f"{user} told tea talk"]
        known = HTMRetriever(htm=htm, user_id=user, k=5, sources="user").invoke(
            "tea talk", min_confidence=0.0)
        assert sorted(d.page_content for d in known) == [f"{user} sure tea talk",
                                                         f"{user} unsure tea talk"]
    with pytest.raises(ValidationError, match="min_confidence must be a number"):
        HTMRetriever(htm=htm, shared=True, min_confidence=1.5).invoke("tea")
    with pytest.raises(ValidationError, match="source must be a non-blank"):
        HTMRetriever(htm=htm, shared=True).invoke("tea", sources=[""])


def test_bad_options_raise_htm_errors(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    seed(htm)
    with pytest.raises(UnknownStrategyError):
        HTMRetriever(htm=htm, shared=True, strategy="semantic").invoke("vim")
    with pytest.raises(ValidationError, match="per-call options"):
        HTMRetriever(htm=htm, shared=True).invoke("vim", limit=3)


async def test_async_matches_sync(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    seed(htm)
    retriever = HTMRetriever(htm=htm, shared=True, k=3)
    sync_docs = retriever.invoke("green tea in the morning")
    async_docs = await retriever.ainvoke("green tea in the morning")
    assert [d.metadata["key"] for d in async_docs] == [d.metadata["key"] for d in sync_docs]
    assert async_docs[0].metadata["key"] == "tea"


def test_lcel_chain_retriever_prompt_fake_llm(htm_factory: Callable[..., HTM]) -> None:
    """``retriever | prompt | FakeListLLM``: the LLM's prompt holds the recalled memory."""
    htm = htm_factory()
    seed(htm)
    retriever = HTMRetriever(htm=htm, shared=True, k=2)
    prompt = PromptTemplate.from_template(
        "Answer from the notes.\nNotes:\n{context}\nQuestion: {question}\nAnswer:")
    llm = FakeListLLM(responses=["Green tea."])
    recorder = PromptRecorder()

    def join(docs: list[Document]) -> str:
        return "\n".join(f"- {d.page_content}" for d in docs)

    chain = ({"context": retriever | join, "question": RunnablePassthrough()}
             | prompt | llm | StrOutputParser())
    answer = chain.invoke("What does the user drink in the morning?",
                          config={"callbacks": [recorder]})
    assert answer == "Green tea."
    assert len(recorder.prompts) == 1
    sent = recorder.prompts[0]
    assert "- The user drinks green tea every morning" in sent
    assert sent.count("\n- ") == 2
    assert sent.endswith("Question: What does the user drink in the morning?\nAnswer:")


def test_same_htm_serves_chain_and_direct_recall(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    seed(htm)
    retriever = HTMRetriever(htm=htm, shared=True, k=4)
    docs = retriever.invoke("user editor preferences")
    hits = htm.recall("user editor preferences", limit=4)
    assert [d.metadata["key"] for d in docs] == [h.memory.key for h in hits]
    assert [d.metadata["score"] for d in docs] == pytest.approx([h.score for h in hits])
    # a memory added directly is found by the retriever at once, and recall through the
    # retriever brings memories into the same working memory the facade reports
    htm.add("The user switched to the Helix editor last week", key="helix", importance=5.0)
    keys = [d.metadata["key"] for d in retriever.invoke("Helix editor")]
    assert keys[0] == "helix"
    assert all(key in htm.working_memory for key in keys)


def test_unknown_keyword_is_refused(htm_factory: Callable[..., HTM]) -> None:
    """``limit=`` is not the retriever's word for ``k=``: it used to be ignored silently
    (four documents came back); it is an error that names the right option."""
    htm = htm_factory()
    seed(htm)
    with pytest.raises(ValidationError, match=r"\['limit'\].*did you mean 'k'"):
        HTMRetriever(htm=htm, shared=True, limit=2)
    with pytest.raises(ValidationError, match="strategy"):
        HTMRetriever(htm=htm, shared=True, stratgy="vector")
    assert len(HTMRetriever(htm=htm, shared=True, k=2).invoke("user editor")) == 2
