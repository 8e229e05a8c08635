"""Isolation: a robot-scoped recall never returns another robot's memory; tenants never meet.

Robot scope (``recall(..., robot=name)``) is checked as a property with Hypothesis on both
backends: random robots write memories drawn from one shared vocabulary (so contents overlap,
and the same text is often written by several robots), then every robot recalls every
word with every strategy, and every other robot recalls it on its behalf. Each hit must be
that robot's; a vector recall must return all of that robot's memories (fewer than the limit)
and a full-text recall every one holding the word (the scope filters, it does not starve).

Tenant scope on one shared PostgreSQL database: ``PostgresStore`` has no tenant parameter;
what works today, with no code change, is a PostgreSQL schema per tenant selected by the
connection's ``search_path`` in the URL
(``?options=-csearch_path%3Dtenant_a%2Cpublic``), with the ``vector`` extension created once
in ``public`` by the administrator. Each tenant then has its own tables: same keys, same
robot names, forget/purge and the operations log stay within the tenant. See
docs/reliability.md for the setup and the proposed first-class ``schema=`` option.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htm_core import HTM, HashingEmbedder
from htm_core.testing import working_memories

WORDS = ["falcon", "harbour", "lantern", "meadow", "quartz", "signal", "timber", "violet"]
ROBOTS = ["ada", "bob", "cyd"]


writes = st.lists(
    st.tuples(st.sampled_from(ROBOTS),
              st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
              st.sampled_from(["", "a note on", "remember the", "'; DROP TABLE memories; --"])),
    min_size=1, max_size=12)


@pytest.mark.postgres
@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(writes=writes)
def test_robot_scoped_recall_never_leaks(writes: list[tuple[str, list[str], str]],
                                         htm_factory: Callable[..., HTM]) -> None:
    run = uuid.uuid4().hex[:8]  # each example gets its own robots on the shared store
    htms = {r: htm_factory(robot=f"{r}-{run}", working_memory_tokens=200) for r in ROBOTS}
    written: dict[str, dict[str, str]] = {r: {} for r in ROBOTS}
    for robot, words, prefix in writes:
        memory = htms[robot].add(f"{prefix} {' '.join(words)}".strip())
        written[robot][memory.key] = memory.content
    for robot, htm in htms.items():
        for word in WORDS:
            for strategy in ("hybrid", "vector", "fulltext"):
                hits = htm.recall(word, robot=htm.robot, strategy=strategy, limit=50)
                assert {h.memory.robot for h in hits} <= {htm.robot}, (robot, word, strategy)
                assert {h.memory.key for h in hits} <= set(written[robot])
                if strategy == "vector":  # nearest neighbors within the scope: all of them
                    assert {h.memory.key for h in hits} == set(written[robot]), (robot, word)
            # Another robot asking for this robot's memories also gets only this robot's.
            other = htms[ROBOTS[(ROBOTS.index(robot) + 1) % len(ROBOTS)]]
            hits = other.recall(word, robot=htm.robot, strategy="fulltext", limit=50)
            expected = {k for k, c in written[robot].items() if word in c.split()}
            assert {h.memory.key for h in hits} == expected, (robot, word)
            hits = other.recall(word, robot=htm.robot, strategy="vector", limit=50)
            assert {h.memory.key for h in hits} == set(written[robot]), (robot, word)
        # Working memory is per robot: only memories this robot added or recalled.
        assert set(htm.working_memory.keys()) <= set(written[robot]) | {
            h for r in ROBOTS for h in written[r]}
        htm.flush()  # recalls are written behind (docs/reliability.md)
        persisted = {m.key for m in working_memories(htm.store, htm.robot)}
        assert persisted == set(htm.working_memory.keys())


@pytest.mark.postgres
def test_working_memory_is_per_robot(htm_factory: Callable[..., HTM]) -> None:
    ada = htm_factory(robot="ada")
    bob = htm_factory(robot="bob")
    ada.add("ada's private working note about quartz", key="ada-note")
    assert "ada-note" in ada.working_memory
    assert "ada-note" not in bob.working_memory
    assert bob.create_context().keys == ()
    assert bob.recall("quartz", robot="bob") == []
    # The store is shared: unscoped recall does find it (that is the hive mind).
    assert [h.memory.key for h in bob.recall("quartz", strategy="fulltext")] == ["ada-note"]


# -- tenants on one shared PostgreSQL database ------------------------------------------


def tenant_url(url: str, schema: str) -> str:
    """``url`` with the connection's search_path set to the tenant's schema, then public."""
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options={quote(f'-csearch_path={schema},public')}"


@pytest.fixture
def shared_database(postgres_server_url: str) -> Iterator[str]:
    """A database prepared by its administrator: ``vector`` in public, one schema per tenant."""
    import psycopg

    from tests.pg import fresh_database

    for url in fresh_database(postgres_server_url):
        with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"),
                             autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            for schema in ("tenant_a", "tenant_b"):
                conn.execute(f"CREATE SCHEMA {schema}")
        yield url


@pytest.mark.postgres
def test_tenants_never_see_each_other(shared_database: str) -> None:
    a_url, b_url = tenant_url(shared_database, "tenant_a"), tenant_url(shared_database, "tenant_b")
    embedder = HashingEmbedder()
    with HTM(robot="assistant", database_url=a_url, embedder=embedder) as a1, \
            HTM(robot="assistant", database_url=b_url, embedder=embedder) as b1:
        # Same robot name, same key, same words: two tenants, two memories.
        a1.add("the launch code is alpha-alpha", key="secret", tags=["ops:codes"])
        b1.add("the launch code is bravo-bravo", key="secret", tags=["ops:codes"])
        a1.add_many([f"tenant a fact {i} about the launch" for i in range(5)])
        for strategy in ("hybrid", "vector", "fulltext"):
            assert all("bravo" not in h.memory.content
                       for h in a1.recall("launch code", strategy=strategy, limit=100))
            assert all("alpha" not in h.memory.content and "tenant a" not in h.memory.content
                       for h in b1.recall("launch code", strategy=strategy, limit=100))
        assert a1.retrieve("secret").content.endswith("alpha-alpha")
        assert b1.retrieve("secret").content.endswith("bravo-bravo")
        assert a1.stats().long_term_total == 6 and b1.stats().long_term_total == 1
        assert a1.tags() == {"ops:codes": 1} and b1.tags() == {"ops:codes": 1}
        # Destructive calls stay within the tenant.
        b1.forget("secret", confirm=True)
        assert b1.purge(confirm=True) == 1
        assert a1.retrieve("secret") is not None
        assert len(b1.operations(op="add", limit=1000)) == 1
        assert len(a1.operations(op="add", limit=1000)) == 6
        # Working memory persisted per tenant: a new instance of tenant a's robot gets its own.
        with HTM(robot="assistant", database_url=a_url, embedder=embedder) as a2:
            assert set(a2.working_memory.keys()) == set(a1.working_memory.keys())
        with HTM(robot="assistant", database_url=b_url, embedder=embedder) as b2:
            assert set(b2.working_memory.keys()) == set()
            assert b2.recall("alpha", strategy="fulltext") == []


@pytest.mark.postgres
def test_adapter_robot_scopes_never_leak(htm_factory: Callable[..., HTM]) -> None:
    """The adapters' robot scopes (retriever, classic memory, LlamaIndex filter) hold too."""
    from langchain_core.messages import HumanMessage
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery

    from htm_integrations.langchain import HTMChatMessageHistory, HTMMemory, HTMRetriever
    from htm_integrations.llama_index import HTMVectorStore

    ada, bob = htm_factory(robot="ada"), htm_factory(robot="bob")
    for htm in (ada, bob):
        htm.add_many([f"{htm.robot} keeps the {w} report" for w in WORDS])
        HTMChatMessageHistory(htm=htm, session_id="s").add_messages(
            [HumanMessage(f"{htm.robot} says the quartz report is late")])
    for word in WORDS:
        docs = HTMRetriever(htm=bob, robot="ada", k=20, shared=True).invoke(f"{word} report")
        assert docs and {d.metadata["robot"] for d in docs} == {"ada"}
        result = HTMVectorStore(htm=bob, shared=True).query(VectorStoreQuery(
            query_str=f"{word} report", similarity_top_k=20, filters=MetadataFilters(
                filters=[MetadataFilter(key="robot", value="ada")])))
        assert result.nodes and {n.metadata["robot"] for n in result.nodes} == {"ada"}
    history = HTMMemory(htm=bob, recall_robot="ada", max_tokens=4_000, shared=True)
    bob.clear_working_memory()
    text = history.load_memory_variables({"input": "quartz report"})["history"]
    assert "ada" in text and "bob" not in text
