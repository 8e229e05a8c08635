"""The store conformance suite: what every ``LongTermStore`` must do, as pytest tests.

A backend proves itself by subclassing :class:`StoreConformance` in its own test suite and
giving a ``store_factory`` fixture that returns a function opening a fresh, empty store (the
same store each time it is called in one test). ``capabilities`` declares the optional
behaviour the backend has; the tests of behaviour it does not declare are skipped (see
:data:`CAPABILITIES`). htm runs this suite on SQLite, PostgreSQL and
:class:`~htm_core.testing.InMemoryStore`. Needs ``pytest``. See docs/backends.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

import pytest

from ..embeddings import HashingEmbedder
from ..errors import (
    ConfirmationRequiredError,
    ConflictError,
    DimensionMismatchError,
    DuplicateKeyError,
    NotFoundError,
    ValidationError,
)
from ..store import SCHEMA_VERSION, ArmQuery, LongTermStore, NewMemory, SearchFilters
from ..store.base import CAPABILITIES as ROLES
from ..store.base import WorkingChange, WorkingState, generated_key

#: Optional behaviour a backend may declare: the optional roles of the store protocol
#: (``htm_core.store.base.CAPABILITIES``: ``versions``, ``windows``, ``bulk_load``,
#: ``embedding_repair``, ``enrichment``) and ``reopen`` (a store closed and opened again
#: keeps everything: a durable backend).
CAPABILITIES = frozenset({"reopen", *ROLES})

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
EMB = HashingEmbedder(dim=64)


def vector_hits(store: Any, vector: list[float], limit: int,
                filters: SearchFilters | None = None) -> list[tuple[int, float]]:
    """The store's vector search, as one arm of ``search_arms``."""
    [hits] = store.search_arms([ArmQuery(vector=vector, limit=limit,
                                         filters=filters or SearchFilters())])
    return list(hits)


def text_hits(store: Any, text: str, limit: int,
              filters: SearchFilters | None = None) -> list[tuple[int, float]]:
    """The store's full-text search, as one arm of ``search_arms``."""
    [hits] = store.search_arms([ArmQuery(text=text, limit=limit,
                                         filters=filters or SearchFilters())])
    return list(hits)


def enter(store: Any, robot: str, memories: list[Any], *, evict: tuple[str, ...] = ()) -> None:
    """Put ``memories`` into ``robot``'s working memory (in order) and evict ``evict``."""
    put = [WorkingState(key=m.key, last_accessed=T0, access_count=0, seq=i, access_seq=i,
                        memory_id=m.id) for i, m in enumerate(memories, start=1)]
    store.apply_working(WorkingChange(robot=robot, at=T0, put=put, evict=evict))


def working_keys(store: Any, robot: str) -> list[str]:
    """The keys in ``robot``'s persisted working memory, in entry order."""
    return [row.memory.key for row in store.working_rows(robot)[1]]


def rec(content: str, *, key: str | None = None, robot: str = "r1", when: datetime = T0,
        tags: tuple[str, ...] = (), importance: float = 1.0, embed: bool = True,
        **extra: Any) -> NewMemory:
    """A memory to add, embedded with :data:`EMB` unless ``embed`` is false."""
    return NewMemory(
        key=key or generated_key(robot, content), content=content, robot=robot,
        importance=importance, token_count=len(content.split()), created_at=when, tags=tags,
        metadata={"n": len(content)}, embedding=EMB.embed_query(content) if embed else None,
        embedder=EMB.name if embed else None, explicit_key=key is not None, **extra)



def _tea_talk(store: Any, arm: str, filters: SearchFilters) -> set[str]:
    """The texts of the first three memories for "tea talk" through one ``arm`` (the vector
    or full-text search, or the list) under ``filters``."""
    if arm == "list":
        return {m.content for m in store.list_memories(filters, limit=3)}
    if arm == "vector":
        hits = vector_hits(store, EMB.embed_query("tea talk"), 3, filters)
    else:
        hits = text_hits(store, "tea talk", 3, filters)
    return {m.content for m in store.get_many([h[0] for h in hits])}

class StoreConformance:
    """The conformance tests; subclass it (named ``Test...``) and give ``store_factory``."""

    capabilities: ClassVar[frozenset[str]] = frozenset()

    @pytest.fixture
    def store_factory(self) -> Callable[[], LongTermStore]:
        raise NotImplementedError("give a store_factory fixture returning a function that "
                                  "opens the test's store")

    @pytest.fixture
    def store(self, store_factory: Callable[[], LongTermStore]) -> Iterator[LongTermStore]:
        s = store_factory()
        s.ensure_robot("r1")
        yield s
        s.close()

    def needs(self, capability: str) -> None:
        """Skip the calling test unless the backend declared ``capability``."""
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}")
        if capability not in self.capabilities:
            pytest.skip(f"the backend does not declare {capability!r}")

    def test_schema_version_and_migrate_is_idempotent(self, store: Any) -> None:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.migrate() == SCHEMA_VERSION
        assert store.schema_version() == SCHEMA_VERSION

    def test_add_get_roundtrip(self, store: Any) -> None:
        [result] = store.add_many([rec("Alice likes green tea", key="tea", tags=("user:drinks",),
                                       importance=7.5)])
        assert result.created
        m = store.get("tea")
        assert m is not None and m.id == result.memory.id
        assert (m.content, m.robot, m.importance, m.tags) == ("Alice likes green tea", "r1", 7.5,
                                                              ("user:drinks",))
        assert m.created_at == T0 and m.created_at.tzinfo is not None
        assert m.metadata == {"n": 21} and m.embedder == EMB.name
        with_vec = store.get("tea", include_embedding=True)
        assert with_vec.embedding is not None and len(with_vec.embedding) == 64
        assert store.get("nope") is None
        assert [x.key for x in store.get_many([m.id, 999_999])] == ["tea"]

    def test_batch_is_one_transaction_all_or_nothing(self, store: Any) -> None:
        store.add_many([rec("existing", key="k1")])
        with pytest.raises(DuplicateKeyError, match="k1"):
            store.add_many([rec("first new"), rec("different content", key="k1"), rec("third new")])
        assert store.counts("r1").total == 1
        assert store.get(generated_key("r1", "first new")) is None

    def test_same_content_same_robot_is_deduplicated_and_touched(self, store: Any) -> None:
        a = store.add_many([rec("repeat me")])[0]
        b = store.add_many([rec("repeat me")])[0]
        assert a.created and not b.created and a.memory.id == b.memory.id
        assert b.memory.access_count == 1
        both = store.add_many([rec("twice in one batch"), rec("twice in one batch")])
        assert both[0].memory.id == both[1].memory.id and [r.created for r in both] == [True, False]
        assert store.counts("r1").total == 2
        ops = [o.op for o in store.operations(limit=10)]
        assert "touch" in ops

    def test_distinct_keys_give_distinct_memories_for_identical_text(self, store: Any) -> None:
        store.add_many([rec("ok", key="turn-1"), rec("ok", key="turn-2")])
        assert store.get("turn-1").id != store.get("turn-2").id

    def test_keys_are_unique_across_robots(self, store: Any) -> None:
        store.ensure_robot("r2")
        store.add_many([rec("mine", key="shared", robot="r1")])
        with pytest.raises(DuplicateKeyError):
            store.add_many([rec("theirs", key="shared", robot="r2")])

    def test_imported_history_is_kept(self, store: Any) -> None:
        seen = T0 + timedelta(days=3)
        gone = T0 + timedelta(days=4)
        store.add_many([rec("old fact", key="old", last_accessed=seen, access_count=7,
                            forgotten_at=gone)])
        assert store.get("old") is None
        m = store.get("old", include_forgotten=True)
        assert (m.last_accessed, m.access_count, m.forgotten_at) == (seen, 7, gone)
        store.restore("old", robot="r1")
        hits = vector_hits(store, EMB.embed_query("old fact"), 1, SearchFilters())
        assert hits and hits[0][0] == m.id

    def test_fulltext_search_ranks_and_escapes(self, store: Any) -> None:
        store.add_many([rec("PostgreSQL indexes with pgvector HNSW"), rec("Cooking pasta carbonara"),
                        rec("SQLite FTS5 uses bm25 ranking")])
        hits = text_hits(store, "how does bm25 ranking work", 5, SearchFilters())
        assert hits and store.get_many([hits[0][0]])[0].content.startswith("SQLite")
        for hostile in ['"', 'AND(', '*', 'NEAR/', "'; DROP TABLE memories; --", 'a OR', '\\',
                        "pasta) OR (", "NOT pasta", "pasta*", "-pasta", "^pasta", "pasta:*"]:
            result = text_hits(store, hostile, 5, SearchFilters())
            assert isinstance(result, list)
        assert text_hits(store, '"pasta" AND(', 5, SearchFilters())
        assert store.counts("r1").total == 3

    def test_vector_search_orders_by_cosine(self, store: Any) -> None:
        store.add_many([rec("the cat sat on the mat"), rec("stock markets fell sharply"),
                        rec("a cat sitting on a mat")])
        hits = vector_hits(store, EMB.embed_query("cat on mat"), 3, SearchFilters())
        contents = [m.content for m in store.get_many([h[0] for h in hits])]
        assert set(contents[:2]) == {"the cat sat on the mat", "a cat sitting on a mat"}
        assert hits[0][1] >= hits[1][1] >= hits[2][1]
        with pytest.raises(DimensionMismatchError):
            vector_hits(store, [0.1] * 65, 3, SearchFilters())

    def test_dimension_is_fixed_per_store(self, store: Any) -> None:
        store.add_many([rec("first vector")])
        assert store.embedding_info() == (EMB.name, 64)
        other = HashingEmbedder(dim=32)
        bad = NewMemory(key="k32", content="x", robot="r1", importance=1.0, token_count=1,
                        created_at=T0, embedding=other.embed_query("x"), embedder=other.name)
        with pytest.raises(DimensionMismatchError, match="dimension"):
            store.add_many([bad])
        assert store.get("k32") is None

    @pytest.mark.parametrize("arm", ["vector", "fulltext"])
    def test_filters_apply_inside_each_arm(self, store: Any, arm: str) -> None:
        store.ensure_robot("r2")
        # Many matching memories outside the window must not starve the few inside it.
        store.add_many([rec(f"weather report number {i}", when=T0 - timedelta(days=30)) for i in range(40)])
        store.add_many([rec("weather report in window", when=T0),
                        rec("weather report other robot", when=T0, robot="r2"),
                        rec("weather report tagged", when=T0, tags=("topic:weather:daily",))])
        def run(filters: SearchFilters) -> set[str]:
            if arm == "vector":
                hits = vector_hits(store, EMB.embed_query("weather report"), 3, filters)
            else:
                hits = text_hits(store, "weather report", 3, filters)
            return {m.content for m in store.get_many([h[0] for h in hits])}

        window = SearchFilters(start=T0 - timedelta(hours=1), end=T0 + timedelta(hours=1))
        assert run(window) == {"weather report in window", "weather report other robot",
                               "weather report tagged"}
        assert run(SearchFilters(start=T0 - timedelta(hours=1), robot="r2")) == {
            "weather report other robot"}
        assert run(SearchFilters(tags=("topic",))) == {"weather report tagged"}
        assert run(SearchFilters(tags=("topic:weather:daily",))) == {"weather report tagged"}
        assert run(SearchFilters(tags=("topic:weath",))) == set()  # prefix is by whole segments
        assert run(SearchFilters(robot="nobody")) == set()
        old = run(SearchFilters(end=T0 - timedelta(days=1)))
        assert len(old) == 3 and all("number" in c for c in old)

    def test_kind_source_and_confidence_round_trip(self, store: Any) -> None:
        made = store.add_many([
            rec("Ada prefers tea", key="pref", kind="preference", source="user",
                confidence=0.85),
            rec("we talked about tea", key="talk"),
            rec("# Tea\nGreen tea is steamed.", key="doc:tea#1", kind="document",
                source="import:tea.md", confidence=None)])
        assert [(r.memory.kind, r.memory.source, r.memory.confidence) for r in made] == [
            ("preference", "user", 0.85), ("episodic", None, None),
            ("document", "import:tea.md", None)]
        read = {m.key: (m.kind, m.source, m.confidence) for m in store.get_many(
            [r.memory.id for r in made])}
        assert read == {"pref": ("preference", "user", 0.85), "talk": ("episodic", None, None),
                        "doc:tea#1": ("document", "import:tea.md", None)}
        assert store.get("pref") == made[0].memory
        again = store.add_many([rec("Ada prefers tea", key="pref", kind="fact",
                                    source="assistant", confidence=0.1)])[0]
        assert not again.created and (again.memory.kind, again.memory.source,
                                       again.memory.confidence) == ("preference", "user", 0.85)

    def test_versions_keep_their_kind_source_and_confidence(self, store: Any) -> None:
        self.needs("versions")
        store.add_many([rec("Ada likes tea", key="tea", source="user", confidence=0.5)])
        new = rec("Ada likes green tea", key="tea", kind="preference", source="rule",
                  confidence=0.75)
        store.update_memory(new, robot="r1", at=T0, read_version=1)
        old, now = store.versions("tea")
        assert (old.kind, old.source, old.confidence) == ("episodic", "user", 0.5)
        assert (now.kind, now.source, now.confidence) == ("preference", "rule", 0.75)
        only_kind = rec("Ada likes green tea", key="tea", kind="fact")
        assert store.update_memory(only_kind, robot="r1", at=T0, read_version=2,
                                   fields=("kind",)).kind == "fact"
        assert [(m.version, m.kind, m.source) for m in store.versions("tea")] == [
            (1, "episodic", "user"), (2, "preference", "rule"), (3, "fact", "rule")]
        # Compare-and-set: based on version 3, an importance merges with a kind set since,
        # a kind set since to another value refuses the update.
        store.update_memory(rec("Ada likes green tea", key="tea", kind="skill"),
                            robot="r1", at=T0, read_version=3, fields=("kind",))
        merged = store.update_memory(rec("Ada likes green tea", key="tea", kind="fact",
                                         importance=7.0), robot="r1", at=T0, read_version=3,
                                     fields=("importance",))
        assert (merged.version, merged.kind, merged.importance) == (5, "skill", 7.0)
        with pytest.raises(ConflictError, match="kind"):
            store.update_memory(rec("Ada likes green tea", key="tea", kind="digest"),
                                robot="r1", at=T0, read_version=3, fields=("kind",))
        assert store.get("tea").version == 5
        # The filter is on the memory's current kind; each old version shows its own.
        hits = store.search_history(ArmQuery(limit=5, text="likes tea",
                                             filters=SearchFilters(kinds=("skill",))))
        assert sorted((m.version, m.kind) for m, _ in hits) == [
            (1, "episodic"), (2, "preference"), (3, "fact"), (4, "skill")]
        assert store.search_history(ArmQuery(limit=5, text="likes tea", filters=SearchFilters(
            kinds=("preference",)))) == []

    @pytest.mark.parametrize("arm", ["vector", "fulltext", "list"])
    def test_kind_filter_applies_inside_each_arm(self, store: Any, arm: str) -> None:
        store.ensure_robot("r2")
        # Many matching episodic memories must not starve the few facts.
        store.add_many([rec(f"tea talk number {i}") for i in range(40)])
        store.add_many([rec("tea fact of r1", kind="fact"),
                        rec("tea fact of r2", kind="fact", robot="r2"),
                        rec("tea digest", kind="digest", tags=("digest",))])

        def run(filters: SearchFilters) -> set[str]:
            return _tea_talk(store, arm, filters)

        assert run(SearchFilters(kinds=("fact",))) == {"tea fact of r1", "tea fact of r2"}
        assert run(SearchFilters(kinds=("fact", "digest"))) == {
            "tea fact of r1", "tea fact of r2", "tea digest"}
        assert run(SearchFilters(kinds=("fact",), robot="r2")) == {"tea fact of r2"}
        assert run(SearchFilters(kinds=("fact",), tags=("digest",))) == set()
        assert run(SearchFilters(kinds=("skill",))) == set()
        assert len(run(SearchFilters(kinds=("episodic",)))) == 3
        ids = [m.id for m in store.list_memories(SearchFilters(), limit=100)]
        assert {b.content for b in store.briefs(ids, SearchFilters(kinds=("digest",))).values()
                } == {"tea digest"}

    @pytest.mark.parametrize("arm", ["vector", "fulltext", "list"])
    def test_source_and_confidence_filters_apply_inside_each_arm(self, store: Any,
                                                                 arm: str) -> None:
        # Many matching memories of other sources must not starve the few that pass.
        store.add_many([rec(f"tea talk number {i}", source="User", confidence=0.9)
                        for i in range(40)])
        store.add_many([rec("tea from user sure", source="user", confidence=0.9),
                        rec("tea from user unsure", source="user", confidence=0.2),
                        rec("tea from user unknown", source="user"),
                        rec("tea from user:x", source="user:x", confidence=1.0)])

        def run(filters: SearchFilters) -> set[str]:
            return _tea_talk(store, arm, filters)

        assert run(SearchFilters(sources=("user",))) == {
            "tea from user sure", "tea from user unsure", "tea from user unknown"}
        assert run(SearchFilters(sources=("user:x",))) == {"tea from user:x"}
        assert run(SearchFilters(sources=("user",), min_confidence=0.5)) == {
            "tea from user sure"}
        assert run(SearchFilters(sources=("user", "user:x"), min_confidence=0.9)) == {
            "tea from user sure", "tea from user:x"}
        assert run(SearchFilters(sources=("USER",))) == set()
        assert run(SearchFilters(min_confidence=0.0, sources=("user",))) == {
            "tea from user sure", "tea from user unsure"}  # no confidence never passes
        assert len(run(SearchFilters(sources=("User",), min_confidence=0.9))) == 3
        ids = [m.id for m in store.list_memories(SearchFilters(), limit=100)]
        assert {b.content for b in store.briefs(ids, SearchFilters(
            sources=("user:x",), min_confidence=1.0)).values()} == {"tea from user:x"}

    def test_tag_filter_escapes_like_wildcards(self, store: Any) -> None:
        store.add_many([rec("underscore tag", tags=("a_b",)), rec("plain tag", tags=("axb:c",))])
        hits = text_hits(store, "tag", 5, SearchFilters(tags=("a_b",)))
        assert [m.content for m in store.get_many([h[0] for h in hits])] == ["underscore tag"]

    def test_forget_restore_purge(self, store: Any) -> None:
        m = store.add_many([rec("secret plan", key="plan")])[0].memory
        enter(store, "r1", [m])
        forgotten = store.forget("plan", robot="r1", at=T0)
        assert forgotten.forgotten_at == T0
        assert store.get("plan") is None
        assert text_hits(store, "secret plan", 5, SearchFilters()) == []
        assert vector_hits(store, EMB.embed_query("secret plan"), 5, SearchFilters()) == []
        assert working_keys(store, "r1") == []
        assert store.counts("r1").forgotten == 1
        with pytest.raises(ConfirmationRequiredError):
            store.purge(robot="r1", key=store.add_many([rec("live one", key="live")])[0].memory.key)
        store.restore("plan", robot="r1")
        assert text_hits(store, "secret plan", 5, SearchFilters())
        hits = vector_hits(store, EMB.embed_query("secret plan"), 1, SearchFilters())
        assert hits[0][0] == m.id
        store.forget("plan", robot="r1", at=T0)
        assert store.purge(robot="r1") == 1
        assert store.get("plan", include_forgotten=True) is None
        with pytest.raises(NotFoundError):
            store.restore("plan", robot="r1")
        with pytest.raises(NotFoundError):
            store.forget("never-existed", robot="r1", at=T0)
        ops = [o.op for o in store.operations(limit=50)]
        for op in ("add", "forget", "restore", "purge"):
            assert op in ops

    def test_working_membership_per_robot_and_eviction_log(self, store: Any) -> None:
        store.ensure_robot("r2")
        ms = [r.memory for r in store.add_many([rec(f"m{i} text") for i in range(3)])]
        enter(store, "r1", ms)
        enter(store, "r2", [ms[0]])
        version = store.working_version("r1")
        enter(store, "r1", [], evict=(ms[1].key,))
        assert store.working_version("r1") > version
        assert working_keys(store, "r1") == [ms[0].key, ms[2].key]
        assert working_keys(store, "r2") == [ms[0].key]
        evictions = store.operations(op="evict", robot="r1")
        assert len(evictions) == 1
        assert store.clear_working("r1") == 2
        assert working_keys(store, "r1") == [] and len(working_keys(store, "r2")) == 1

    def test_touch_updates_access(self, store: Any) -> None:
        m = store.add_many([rec("touch me")])[0].memory
        later = T0 + timedelta(hours=1)
        store.touch([m.id], at=later)
        again = store.get(m.key)
        assert again.access_count == 1 and again.last_accessed == later

    def test_robots_tags_counts(self, store: Any) -> None:
        store.ensure_robot("r2")
        store.add_many([rec("a", tags=("x:y",)), rec("b", tags=("x:y", "z")), rec("c", robot="r2")])
        assert {r.name: r.memory_count for r in store.robots()} == {"r1": 2, "r2": 1}
        assert store.tags() == {"x:y": 2, "z": 1}
        counts = store.counts("r1")
        assert (counts.total, counts.robot, counts.robots, counts.forgotten) == (3, 2, 2, 0)

    def test_embeddings_can_be_filled_later(self, store: Any) -> None:
        ms = [r.memory for r in store.add_many([rec("later one", embed=False),
                                                rec("later two", embed=False)])]
        assert {c for _, c, _ in store.missing_embeddings(limit=10)} == {"later one", "later two"}
        assert store.counts("r1").missing_embeddings == 2
        store.set_embeddings([(m.id, EMB.embed_query(m.content)) for m in ms], EMB.name)
        assert store.missing_embeddings(limit=10) == []
        best = vector_hits(store, EMB.embed_query("later two"), 1, SearchFilters())
        assert best[0][0] == ms[1].id
        assert ms[0].content_hash in store.find_embeddings([ms[0].content_hash], EMB.name)

    def test_embeddings_reset_and_failure_marks(self, store: Any) -> None:
        self.needs("embedding_repair")
        ms = [r.memory for r in store.add_many([rec("kept one"), rec("refused", embed=False)])]
        store.mark_embedding_failures([(ms[1].id, "too long for the model")], EMB.name)
        assert store.missing_embeddings(limit=10) == []
        assert [(f.key, f.error) for f in store.embedding_failures()] == [
            (ms[1].key, "too long for the model")]
        assert store.retry_embedding_failures() == 1
        assert [c for _, c, _ in store.missing_embeddings(limit=10)] == ["refused"]
        store.reset_embeddings()
        assert store.embedding_info() is None and len(store.missing_embeddings(limit=10)) == 2
        assert store.vector_centroid() is None

    def test_iter_memories_in_batches(self, store: Any) -> None:
        self.needs("bulk_load")
        store.add_many([rec(f"item {i}") for i in range(25)])
        store.forget(generated_key("r1", "item 3"), robot="r1", at=T0)
        batches = list(store.iter_memories(batch_size=10))
        assert [len(b) for b in batches] == [10, 10, 5]
        assert len([m for b in store.iter_memories(batch_size=10, include_forgotten=False)
                    for m in b]) == 24
        resumed = [m for b in store.iter_memories(batch_size=10, after_id=batches[1][-1].id) for m in b]
        assert len(resumed) == 5

    def test_enrichment_writes_tags_and_importance(self, store: Any) -> None:
        self.needs("enrichment")
        store.add_many([rec("postgres tuning notes", key="note", tags=("user:given",))])
        tagged = store.add_tags("note", ["database:postgresql", "user:given"], robot="r1")
        assert tagged.tags == ("database:postgresql", "user:given")
        assert store.set_importance("note", 8.5, robot="r1").importance == 8.5
        hits = text_hits(store, "tuning", 5, SearchFilters(tags=("database",)))
        assert [h[0] for h in hits] == [tagged.id]
        ops = [(o.op, o.detail) for o in store.operations(limit=3)]
        assert ("importance", {"importance": 8.5}) in ops
        assert ("tag", {"tags": ["database:postgresql", "user:given"]}) in ops
        with pytest.raises(NotFoundError):
            store.add_tags("missing", ["x"], robot="r1")
        with pytest.raises(NotFoundError):
            store.set_importance("missing", 1.0, robot="r1")

    def test_keys_with_prefix(self, store: Any) -> None:
        store.add_many([rec("a", key="doc:1:a"), rec("b", key="doc:1:b"), rec("c", key="doc:10:c"),
                        rec("d", key="doc_1:d"), rec("e", key="other")])
        store.forget("doc:1:b", robot="r1", at=T0)
        assert store.keys_with_prefix("doc:1:") == ["doc:1:a"]
        assert store.keys_with_prefix("doc:1:", include_forgotten=True) == ["doc:1:a", "doc:1:b"]
        assert store.keys_with_prefix("doc_") == ["doc_1:d"]  # '_' is literal, not a wildcard

    def test_find_embeddings_in_one_lookup(self, store: Any) -> None:
        ms = [r.memory for r in store.add_many([rec("alpha text"), rec("beta text"),
                                                rec("gamma text", embed=False)])]
        found = store.find_embeddings([m.content_hash for m in ms] + ["0" * 64], EMB.name)
        assert set(found) == {ms[0].content_hash, ms[1].content_hash}
        assert len(found[ms[0].content_hash]) == 64
        assert store.find_embeddings([ms[0].content_hash], "another-embedder") == {}
        assert store.find_embeddings([], EMB.name) == {}

    def test_briefs_return_visible_memories_that_pass_the_filters(self, store: Any) -> None:
        store.ensure_robot("r2")
        made = store.add_many([rec("in window", when=T0), rec("old one", when=T0 - timedelta(days=9)),
                               rec("other robot", when=T0, robot="r2"),
                               rec("tagged", when=T0, tags=("topic:x",)), rec("to forget", when=T0)])
        ids = {r.memory.content: r.memory.id for r in made}
        store.forget(made[-1].memory.key, robot="r1", at=T0)
        everything = store.briefs([*ids.values(), 10**9], SearchFilters())
        assert {b.content for b in everything.values()} == {"in window", "old one", "other robot",
                                                              "tagged"}
        brief = everything[ids["other robot"]]
        assert (brief.id, brief.robot, brief.created_at) == (ids["other robot"], "r2", T0)
        window = SearchFilters(start=T0 - timedelta(hours=1), robot="r1")
        assert {b.content for b in store.briefs(list(ids.values()), window).values()} == {
            "in window", "tagged"}
        assert set(store.briefs(list(ids.values()), SearchFilters(tags=("topic",)))) == {ids["tagged"]}
        assert store.briefs([], SearchFilters()) == {}

    def test_search_arms_answer_as_each_arm_alone(self, store: Any) -> None:
        """Several vector and full-text searches at once (PostgreSQL: one statement) return
        what each arm returns asked alone, in the order asked, filters and limits kept apart."""
        store.ensure_robot("r2")
        store.add_many([rec(f"note {i} about topic {i % 7} and colour {i % 3}",
                            when=T0 + timedelta(minutes=i), robot="r1" if i % 4 else "r2")
                        for i in range(120)])
        store.add_many([rec("a note nobody embedded about topic 3", embed=False)])
        window = SearchFilters(start=T0 + timedelta(minutes=30), end=T0 + timedelta(minutes=60))
        vector = EMB.embed_query("topic 3 and colour 1")
        arms = [ArmQuery(vector=vector, limit=12, filters=SearchFilters()),
                ArmQuery(text="topic 3 colour", limit=9, filters=SearchFilters()),
                ArmQuery(vector=vector, limit=5, filters=window),
                ArmQuery(text="topic 3", limit=50, filters=SearchFilters(robot="r2")),
                ArmQuery(text="???", limit=5, filters=SearchFilters())]
        got = store.search_arms(arms)
        assert got == [vector_hits(store, vector, 12, SearchFilters()),
                       text_hits(store, "topic 3 colour", 9, SearchFilters()),
                       vector_hits(store, vector, 5, window),
                       text_hits(store, "topic 3", 50, SearchFilters(robot="r2")),
                       []]
        assert [len(hits) for hits in got[:3]] == [12, 9, 5]
        assert 0 < len(got[3]) < 50  # only r2's matches: the filter stayed with its arm
        assert store.search_arms([]) == []
        with pytest.raises(ValidationError, match="exactly one"):
            ArmQuery(limit=3, filters=SearchFilters())

    def test_rare_terms_are_counted_among_the_memories_the_filters_admit(self, store: Any
                                                                         ) -> None:
        """A term is rare when found in at least one and at most a tenth of the memories
        passing the filters: "kayak" is in 2 of scope ``a``'s 40 and 10 of ``b``'s."""
        store.add_many([rec(f"tea chat {i}" + (" kayak" if i < 2 else ""), tags=("a",))
                        for i in range(40)])
        store.add_many([rec(f"tea talk {i}" + (" kayak" if i < 10 else ""), tags=("b",))
                        for i in range(40)])
        terms = ["kayak", "tea", "chat", "talk", "skydiving"]
        assert store.rare_terms(terms, SearchFilters()) == []
        assert store.rare_terms(terms, SearchFilters(tags=("a",))) == ["kayak"]
        assert store.rare_terms(terms, SearchFilters(tags=("b",))) == []
        assert store.rare_terms(["chat 3", "tea"], SearchFilters(tags=("a",))) == ["chat 3"]
        assert store.rare_terms([], SearchFilters()) == []

    def test_vector_centroid_is_the_mean_direction(self, store: Any) -> None:
        assert store.vector_centroid() is None
        texts = ["alpha beta", "beta gamma", "gamma delta", "delta alpha epsilon"]
        store.add_many([rec(t) for t in texts])
        mean = [sum(col) / len(texts) for col in zip(*(EMB.embed_query(t) for t in texts), strict=True)]
        norm = sum(x * x for x in mean) ** 0.5
        got = store.vector_centroid()
        assert got is not None and len(got) == 64
        assert got == pytest.approx([x / norm for x in mean], abs=1e-5)
        store.add_many([rec("zeta eta theta")])  # a small store is re-read as it grows
        assert store.vector_centroid() != pytest.approx(got, abs=1e-5)

    def test_counts_and_robots_within_tags(self, store: Any) -> None:
        store.ensure_robot("r2")
        store.ensure_robot("r3")
        store.add_many([rec("ada one", tags=("chat:user:Ada",)),
                        rec("ada two", tags=("chat:user:Ada:session:s1",), robot="r2"),
                        rec("lower ada", tags=("chat:user:ada",)),
                        rec("ada gone", key="gone", tags=("chat:user:Ada",)),
                        rec("untagged", robot="r3")])
        store.forget("gone", robot="r1", at=T0)
        ada = store.counts("r1", tags=("chat:user:Ada",))
        assert (ada.total, ada.robot, ada.forgotten, ada.robots) == (2, 1, 1, 2)
        whole = store.counts("r1")
        assert (whole.total, whole.forgotten, whole.robots) == (4, 1, 3)
        assert {r.name: r.memory_count for r in store.robots(tags=("chat:user:Ada",))} == {
            "r1": 1, "r2": 1}
        assert [r.name for r in store.robots(tags=("chat:user:nobody",))] == []
        assert {r.name: r.memory_count for r in store.robots()} == {"r1": 2, "r2": 1, "r3": 1}

    def test_a_robot_keeps_the_budget_recorded_for_it(self, store: Any) -> None:
        assert {r.name: r.working_memory_tokens for r in store.robots()} == {"r1": None}
        store.ensure_robot("r2", working_memory_tokens=600)
        store.ensure_robot("r2")  # no budget given: the recorded one stays
        assert {r.name: r.working_memory_tokens for r in store.robots()}["r2"] == 600
        assert store.ensure_robot("r2", working_memory_tokens=700).working_memory_tokens == 700

    def test_reopen_sees_everything(self, store_factory: Callable[[], LongTermStore]) -> None:
        self.needs("reopen")
        s = store_factory()
        s.ensure_robot("r1")
        s.add_many([rec("durable fact", key="durable")])
        s.close()
        s2 = store_factory()
        try:
            assert s2.get("durable").content == "durable fact"  # type: ignore[union-attr]
            hits = vector_hits(s2, EMB.embed_query("durable fact"), 1)
            assert hits and hits[0][0] == s2.get("durable").id  # type: ignore[union-attr]
        finally:
            s2.close()
