"""``HTMStore``: htm as a LangGraph ``BaseStore``.

Real htm databases (every backend in ``BACKENDS``), LangGraph's own ``StateGraph`` and
op types, and LangChain's ``GenericFakeChatModel`` as the graph's model.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)

from htm_core import HTM, FrozenClock, HashingEmbedder
from htm_core.errors import EmbeddingError, MissingDependencyError, ValidationError
from htm_integrations.langchain import HTMStore
from htm_integrations.langchain.store import decode_label, encode_label, namespace_tag


def all_memories(htm: HTM) -> list[Any]:
    return [m for batch in htm.store.iter_memories(include_forgotten=True) for m in batch]


def test_put_get_round_trip_with_odd_labels(htm_factory: Callable[..., HTM],
                                            clock: FrozenClock) -> None:
    htm = htm_factory()
    store = HTMStore(htm=htm)
    namespace = ("users", "ada lovelace", "café:notes")
    store.put(namespace, "first/key", {"text": "Ada likes tea", "n": 1})
    item = store.get(namespace, "first/key")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (namespace, "first/key",
                                                      {"text": "Ada likes tea", "n": 1})
    assert item.created_at == item.updated_at == datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
    assert store.get(namespace, "other") is None
    assert store.get(("users",), "first/key") is None
    tag = namespace_tag(namespace)
    assert tag == "lgstore:users:ada.20lovelace:caf.c3.a9.3anotes"
    assert [decode_label(s) for s in tag.split(":")[1:]] == list(namespace)
    assert decode_label(encode_label("a.b")) == "a.b"
    memory = htm.retrieve(HTMStore.memory_key(namespace, "first/key"))
    assert memory is not None and memory.tags == (tag,) and memory.robot == htm.robot


def test_put_over_an_item_is_one_update_keeping_the_old_value(htm_factory: Callable[..., HTM],
                                                clock: FrozenClock) -> None:
    htm = htm_factory()
    store = HTMStore(htm=htm, fields=["text"])
    ns = ("prefs",)
    store.put(ns, "drink", {"text": "The user drinks green tea"})
    clock.advance(hours=1)
    store.put(ns, "drink", {"text": "The user drinks green tea"})
    assert len(all_memories(htm)) == 1  # the same value again only touches
    clock.advance(hours=1)
    store.put(ns, "drink", {"text": "The user switched to black coffee"})
    item = store.get(ns, "drink")
    assert item is not None and item.value == {"text": "The user switched to black coffee"}
    assert item.created_at == datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
    assert item.updated_at == datetime(2024, 5, 15, 14, tzinfo=timezone.utc)
    assert htm.retrieve(HTMStore.memory_key(ns, "drink")).content == \
        "The user switched to black coffee"  # type: ignore[union-attr]
    found = store.search(ns, query="green tea")
    assert [i.value["text"] for i in found] == ["The user switched to black coffee"]
    key = HTMStore.memory_key(ns, "drink")
    assert [v.content for v in htm.versions(key)] == [
        "The user drinks green tea", "The user switched to black coffee"]
    assert htm.get(key, version=1).metadata["lgstore"]["value"] == {  # type: ignore[union-attr]
        "text": "The user drinks green tea"}
    assert htm.operations(op="update", limit=1)[0].key == key
    assert len(all_memories(htm)) == 1 and [i.key for i in store.search(ns)] == ["drink"]


def test_delete_forgets_recoverably(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    store = HTMStore(htm=htm)
    store.put(("a",), "k", {"text": "secret plan"})
    store.delete(("a",), "k")
    assert store.get(("a",), "k") is None
    assert store.search(("a",), query="secret plan") == []
    assert store.list_namespaces() == []
    store.delete(("a",), "k")  # deleting again is a no-op
    htm.restore(HTMStore.memory_key(("a",), "k"))
    assert store.get(("a",), "k").value == {"text": "secret plan"}  # type: ignore[union-attr]
    store.delete(("a",), "k")
    store.put(("a",), "k", {"text": "new plan"})
    assert store.get(("a",), "k").value == {"text": "new plan"}  # type: ignore[union-attr]
    key = HTMStore.memory_key(("a",), "k")
    assert [v.content for v in htm.versions(key)] == ['{"text": "secret plan"}',
                                                     '{"text": "new plan"}']
    assert len(all_memories(htm)) == 1


def test_search_query_prefix_filter_and_paging(htm_factory: Callable[..., HTM],
                                               clock: FrozenClock) -> None:
    htm = htm_factory()
    store = HTMStore(htm=htm, fields=["text"])
    rows = [
        (("users", "ada", "facts"), "f1", {"text": "Ada owns a grey cat", "score": 3}),
        (("users", "ada", "facts"), "f2", {"text": "Ada rides a red bicycle", "score": 7}),
        (("users", "bob", "facts"), "f3", {"text": "Bob owns a black cat", "score": 5}),
        (("docs",), "d1", {"text": "The cat manual", "score": 9}),
    ]
    for ns, key, value in rows:
        store.put(ns, key, value)
        clock.advance(minutes=1)
    cats = store.search(("users",), query="owns a cat")
    assert {i.key for i in cats[:2]} == {"f1", "f3"}
    assert {i.key for i in cats} == {"f1", "f2", "f3"}
    assert all(isinstance(i, SearchItem) and i.score is not None and i.score >= 0 for i in cats)
    # the two cats hold words of the query; the bicycle none (a score of its own evidence)
    assert all(i.score > 0 for i in cats[:2])
    assert [i.key for i in store.search(("users", "ada"), query="cat")] == ["f1", "f2"]
    high = store.search(("users",), query="owns a cat", filter={"score": {"$gte": 5}})
    assert [i.key for i in high] == ["f3", "f2"]
    assert [i.key for i in store.search(("users",), query="cat", filter={"score": {"$lt": 4}})
            ] == ["f1"]
    assert [i.key for i in store.search((), filter={"score": 7})] == ["f2"]
    listed = store.search(())
    assert [i.key for i in listed] == ["d1", "f3", "f2", "f1"]  # newest first
    assert [i.score for i in listed] == [None] * 4
    assert [i.key for i in store.search((), limit=2, offset=1)] == ["f3", "f2"]
    with pytest.raises(ValidationError, match="operator"):
        store.search((), filter={"score": {"$near": 1}})


def test_list_namespaces(htm_factory: Callable[..., HTM]) -> None:
    store = HTMStore(htm=htm_factory())
    for ns in [("users", "ada", "facts"), ("users", "bob", "facts"), ("users", "bob", "prefs"),
               ("docs", "v1")]:
        store.put(ns, "k", {"x": 1})
    assert store.list_namespaces() == [("docs", "v1"), ("users", "ada", "facts"),
                                       ("users", "bob", "facts"), ("users", "bob", "prefs")]
    assert store.list_namespaces(prefix=("users", "bob")) == [("users", "bob", "facts"),
                                                              ("users", "bob", "prefs")]
    assert store.list_namespaces(suffix=("facts",)) == [("users", "ada", "facts"),
                                                        ("users", "bob", "facts")]
    assert store.list_namespaces(prefix=("users", "*", "prefs")) == [("users", "bob", "prefs")]
    assert store.list_namespaces(max_depth=1) == [("docs",), ("users",)]
    assert store.list_namespaces(limit=1, offset=1) == [("users", "ada", "facts")]


async def test_batch_and_abatch(htm_factory: Callable[..., HTM]) -> None:
    store = HTMStore(htm=htm_factory())
    results = store.batch([
        PutOp(("n",), "a", {"text": "alpha"}),
        PutOp(("n",), "b", {"text": "beta"}),
        GetOp(("n",), "a"),
        SearchOp(("n",), query="beta", limit=1),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("n",)),)),
        PutOp(("n",), "a", None),
        GetOp(("n",), "a"),
    ])
    assert results[0] is None and results[1] is None
    assert results[2].value == {"text": "alpha"}  # type: ignore[union-attr]
    assert [i.key for i in results[3]] == ["b"]  # type: ignore[union-attr]
    assert results[4] == [("n",)]
    assert results[6] is None
    again = await store.abatch([GetOp(("n",), "b"), SearchOp(("n",))])
    assert again[0].value == {"text": "beta"}  # type: ignore[union-attr]
    assert [i.key for i in again[1]] == ["b"]  # type: ignore[union-attr]
    await store.aput(("n",), "c", {"text": "gamma"})
    assert (await store.aget(("n",), "c")).value == {"text": "gamma"}  # type: ignore[union-attr]
    assert [i.key for i in await store.asearch(("n",), query="gamma", limit=1)] == ["c"]


def test_bad_input(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    store = HTMStore(htm=htm)
    with pytest.raises(ValidationError, match="must be a dict"):
        store.batch([PutOp(("n",), "a", ["not", "a", "dict"])])  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="ttl must be a positive number of minutes"):
        store.batch([PutOp(("n",), "a", {"x": 1}, ttl=-5.0)])
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("a.b",), "k")])
    with pytest.raises(ValidationError):
        HTMStore(htm=htm, fields=["text"]).put(("n",), "a", {"text": "bad \x00 nul"})
    assert all_memories(htm) == []


def test_robots_share_items_and_search_can_be_scoped(htm_factory: Callable[..., HTM]) -> None:
    alice = htm_factory(robot="alice")
    bob = htm_factory(robot="bob")
    HTMStore(htm=alice).put(("team",), "a1", {"text": "Alice fixed the login bug"})
    HTMStore(htm=bob).put(("team",), "b1", {"text": "Bob fixed the payment bug"})
    shared = HTMStore(htm=alice)
    assert {i.key for i in shared.search(("team",), query="fixed bug")} == {"a1", "b1"}
    only_bob = HTMStore(htm=alice, robot="bob")
    assert [i.key for i in only_bob.search(("team",), query="fixed bug")] == ["b1"]
    assert [i.key for i in only_bob.search(("team",))] == ["b1"]


class ChatState(TypedDict):
    user: str
    question: str
    answer: str


def test_langgraph_graph_writes_and_a_later_run_finds(store_url: str,
                                                      htm_factory: Callable[..., HTM]) -> None:
    """Run 1 stores what the user says through HTMStore; run 2, in a new graph over a new
    HTM on the same database (a restart), finds it with store.search and puts it in the
    fake chat model's prompt."""
    prompts: list[list[BaseMessage]] = []

    class RecordingChat(GenericFakeChatModel):
        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            prompts.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

    model = RecordingChat(messages=iter([AIMessage("I will remember that."),
                                         AIMessage("Your favourite colour is teal.")]))

    def respond(state: ChatState, runtime: Runtime) -> dict[str, str]:
        assert runtime.store is not None
        namespace = ("memories", state["user"])
        found = runtime.store.search(namespace, query=state["question"], limit=3)
        notes = "\n".join(f"- {item.value['text']}" for item in found)
        reply = model.invoke([SystemMessage(f"What you know about the user:\n{notes}"),
                              HumanMessage(state["question"])])
        if state["question"].startswith("Remember"):
            runtime.store.put(namespace, f"fact-{len(found)}",
                              {"text": state["question"].removeprefix("Remember: ")})
        return {"answer": str(reply.content)}

    def build(htm: HTM) -> Any:
        builder = StateGraph(ChatState)
        builder.add_node("respond", respond)
        builder.add_edge(START, "respond")
        builder.add_edge("respond", END)
        return builder.compile(store=HTMStore(htm=htm, fields=["text"]))

    first = build(htm_factory())
    out = first.invoke({"user": "u1", "question": "Remember: my favourite colour is teal",
                        "answer": ""})
    assert out["answer"] == "I will remember that."

    later_htm = htm_factory(database_url=store_url)
    later = build(later_htm)
    out = later.invoke({"user": "u1", "question": "What is my favourite colour?", "answer": ""})
    assert out["answer"] == "Your favourite colour is teal."
    assert "- my favourite colour is teal" in str(prompts[1][0].content)
    hits = HTMStore(htm=later_htm).search(("memories", "u1"), query="favourite colour")
    assert [i.value for i in hits] == [{"text": "my favourite colour is teal"}]
    assert HTMStore(htm=later_htm).search(("memories", "someone-else"), query="colour") == []


def test_package_surface_is_lazy_and_names_missing_extras(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing framework is simulated by blocking its import (``sys.modules[name] = None``,
    which makes ``import`` fail exactly as when the package is not installed)."""
    import htm_integrations.langchain as package

    assert package.__all__ == sorted(package.__all__)
    assert set(package.__all__) == {"HTMChatMessageHistory", "HTMMemory", "HTMMiddleware",
                                    "HTMRetriever", "HTMStore", "htm_tools"}
    with pytest.raises(AttributeError):
        package.HTMNothing  # noqa: B018
    monkeypatch.setitem(sys.modules, "langgraph.store.base", None)
    monkeypatch.delitem(sys.modules, "htm_integrations.langchain.store", raising=False)
    with pytest.raises(MissingDependencyError, match=r'pip install "htm-memory\[langgraph\]"'):
        importlib.import_module("htm_integrations.langchain.store")
    monkeypatch.setitem(sys.modules, "langchain_classic.base_memory", None)
    monkeypatch.delitem(sys.modules, "htm_integrations.langchain.memory", raising=False)
    with pytest.raises(MissingDependencyError, match=r'pip install "htm-memory\[langchain\]"'):
        importlib.import_module("htm_integrations.langchain.memory")


def test_index_fields_choose_the_searchable_text(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    store = HTMStore(htm=htm)
    ns = ("recipes",)
    store.put(ns, "r1", {"title": "Lemon tart", "body": {"steps": ["zest", "bake"]}},
              index=["title", "body.steps[*]"])
    store.put(ns, "r2", {"title": "Plain bread", "secret": 42}, index=False)
    store.put(ns, "r3", {"title": "Fig jam"})
    content = {k: htm.retrieve(HTMStore.memory_key(ns, k)).content  # type: ignore[union-attr]
               for k in ("r1", "r2", "r3")}
    assert content == {"r1": "Lemon tart\nzest\nbake", "r2": '{"secret": 42, "title": "Plain bread"}',
                       "r3": '{"title": "Fig jam"}'}
    assert store.search(ns, query="zest", limit=1)[0].key == "r1"


def test_a_rejected_update_changes_nothing(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    store = HTMStore(htm=htm, fields=["text"])
    store.put(("n",), "k", {"text": "the original"})
    with pytest.raises(ValidationError, match="NUL"):
        store.put(("n",), "k", {"text": "broken \x00 update"})
    with pytest.raises(ValidationError, match="JSON"):
        store.put(("n",), "k", {"text": "not json", "when": object()})
    assert store.get(("n",), "k").value == {"text": "the original"}  # type: ignore[union-attr]
    assert len(all_memories(htm)) == 1


def test_a_put_that_fails_midway_keeps_the_old_item(htm_factory: Callable[..., HTM]) -> None:
    """Regression: put replaced an item in five calls (archive, forget, purge, add), so an
    embedding server failing on the new text lost the item. Now it is one update: the
    failure leaves the old value in place and nothing else written."""
    class FlakyEmbedder(HashingEmbedder):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            if any("unreachable" in t for t in texts):
                raise ConnectionError("embedding server unreachable")
            return super().embed_documents(texts)

    htm = htm_factory(embedder=FlakyEmbedder())
    store = HTMStore(htm=htm, fields=["text"])
    store.put(("n",), "k", {"text": "the original"})
    with pytest.raises(EmbeddingError):
        store.put(("n",), "k", {"text": "unreachable server update"})
    assert store.get(("n",), "k").value == {"text": "the original"}  # type: ignore[union-attr]
    assert len(all_memories(htm)) == 1
    assert len(htm.versions(HTMStore.memory_key(("n",), "k"))) == 1


def test_unknown_options_are_refused(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory()
    with pytest.raises(ValidationError, match=r"unknown options \['colour'\].*takes htm"):
        HTMStore(htm=htm, colour="teal")
    with pytest.raises(ValidationError, match="fields="):
        HTMStore(htm=htm, index={"fields": ["text"]})


class CountingStore:
    """Counts the memories the LangGraph store reads out of htm's store (a wrapper around
    the real store object's reading methods, set on the instance)."""

    READERS = ("list_memories", "get_many", "get", "iter_memories", "versions", "briefs",
               "search_history", "working_rows")

    def __init__(self, htm: HTM) -> None:
        self.read = 0
        for name in self.READERS:
            setattr(htm.store, name, self._counting(getattr(htm.store, name)))

    def _counting(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            out = method(*args, **kwargs)
            if method.__name__ == "iter_memories":
                return self._batches(out)
            self.read += len(out) if isinstance(out, (list, dict, tuple)) else out is not None
            return out
        return counted

    def _batches(self, batches: Any) -> Any:
        for batch in batches:
            self.read += len(batch)
            yield batch


def test_search_of_a_50k_store_reads_only_a_page(htm_factory: Callable[..., HTM],
                                                 clock: FrozenClock) -> None:
    """50,000 items (loaded through the store's bulk path; 20,000 on PostgreSQL, where the
    HNSW build at the end of the load took most of the test's time); a namespace-prefix
    search with a limit, with a filter, and with a query each read a small number of
    memories, never the store (the old search walked every memory with ``iter_memories``)."""
    htm = htm_factory()
    store = HTMStore(htm=htm, fields=["text"])
    total, batch = (50_000 if htm.store.backend == "sqlite" else 20_000), 5_000
    with htm.store.bulk_load():
        for start in range(0, total, batch):
            items = []
            for i in range(start, start + batch):
                ns = ("users", "ada") if i % 1000 == 0 else ("users", f"u{i % 97}")
                value = {"text": f"note {i} about topic {i % 13}", "n": i}
                items.append({"content": value["text"], "key": HTMStore.memory_key(ns, f"k{i}"),
                              "tags": [namespace_tag(ns)],
                              "metadata": {"lgstore": {"namespace": list(ns), "key": f"k{i}",
                                                       "value": value}}})
            htm.add_many(items, working_memory=False)
            clock.advance(minutes=1)
    assert htm.stats().long_term_total == total
    counter = CountingStore(htm)
    newest = store.search(("users",), limit=10)
    assert [i.value["n"] for i in newest] == list(range(total - 1, total - 11, -1))
    assert counter.read <= 11
    counter.read = 0
    ada = store.search(("users", "ada"), limit=5, offset=5)
    assert [i.key for i in ada] == [f"k{n}" for n in range(total - 6_000, -1, -1000)][:5]
    assert counter.read <= 11
    counter.read = 0
    assert [i.value["n"] for i in store.search(("users",), limit=3, filter={
        "n": {"$gte": total - 3}})] == [total - 1, total - 2, total - 3]
    assert counter.read <= 101  # one page of 100 holds them
    counter.read = 0
    assert len(store.search(("users", "ada"), query="topic 3 note", limit=5)) == 5
    assert counter.read < 100


class RacingEmbedder(HashingEmbedder):
    """The hashing embedder, running ``race`` once when asked to embed ``text``: a way to
    land another writer's put inside this put's update, between its read and its write."""

    def __init__(self, text: str, race: Callable[[], None]) -> None:
        super().__init__()
        self.text, self.race = text, race

    def embed_documents(self, texts: Any) -> list[list[float]]:
        if self.text in list(texts):
            self.text = ""
            self.race()
        return super().embed_documents(texts)


def test_a_put_racing_another_put_wins_as_the_last_put(htm_factory: Callable[..., HTM]) -> None:
    """Two stores (two ``HTM`` objects on one database) put the same item, the other put
    landing while this put's update embeds its text. The later put wins whole, as in
    LangGraph's own stores: no ``ConflictError`` reaches the caller and nothing of the value
    it replaced is merged in."""
    namespace = ("users", "Ada")
    theirs = htm_factory(robot="b")

    def race() -> None:
        HTMStore(htm=theirs).put(namespace, "k", {"text": "coffee", "cups": 2})

    embedder = RacingEmbedder('{"cups": 3, "text": "water"}', race)
    ours = htm_factory(robot="a", embedder=embedder)
    HTMStore(htm=ours).put(namespace, "k", {"text": "tea", "cups": 1})
    HTMStore(htm=ours).put(namespace, "k", {"text": "water", "cups": 3})
    assert embedder.text == "", "the race did not run"
    item = HTMStore(htm=theirs).get(namespace, "k")
    assert item is not None and item.value == {"text": "water", "cups": 3}
    memory = theirs.retrieve(HTMStore.memory_key(namespace, "k"))
    assert memory is not None and "water" in memory.content and "coffee" not in memory.content
