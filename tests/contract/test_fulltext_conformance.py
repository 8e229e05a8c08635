"""Full text means the same on every backend: one table of queries and the memories each
must find, run against each store (``store_url``: SQLite and PostgreSQL).

Every backend must return exactly the expected memories for every row, so the backends
agree with each other. The rules are docs/concepts.md's "Full-text matching rules".
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone

import pytest

from htm_core.embeddings import HashingEmbedder
from htm_core.store import SCHEMA_VERSION, NewMemory, SearchFilters, open_store

T0 = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)
EMB = HashingEmbedder(dim=64)

CORPUS = {
    "cafe": "Met Ana at the café on Main Street",
    "cafe2": "The cafe near the station closes early",
    "naive": "That was a NAÏVE plan",
    "kenji": "Kenji doesn't like natto",
    "email": "Send the e-mail to the team",
    "snake": "Rename the snake_case helper",
    "v21": "Released version v2.1 yesterday",
    "v20": "Upgraded to v2.0 last week",
    "pi": "Pi is roughly 3.14",
    "year": "Moved to Berlin in 2024",
    "url": "Docs live at https://example.com/docs/setup",
    "path": "The config is in /etc/htm/config.toml",
    "art": "A state-of-the-art parser",
    "emoji": "Party tonight 🎉 bring snacks",
    "ru": "Привет, мир! Москва большая",
    "ar": "أحب القهوة العربية",
    "zh": "我喜欢喝绿茶",
    "zh2": "绿茶和红茶都很好",
    "ja": "私は緑茶が好きです",
    "ja2": "東京タワーに行きました",
    "ko": "한국어 공부를 합니다",
}

#: (query, the memories it must find). Words are OR-ed; text written without spaces is
#: a phrase; CJK runs are substrings.
TABLE: list[tuple[str, set[str]]] = [
    # stop words, punctuation and emoji are no terms: nothing
    ("the", set()),
    ("what is it", set()),
    ("don't", set()),
    ("?!...", set()),
    ("🎉", set()),
    ("🎉🎉 ✨", set()),
    # contractions: the clitic is a stop word, the rest is a word
    ("Kenji don't", {"kenji"}),
    ("doesn't", {"kenji"}),
    ("Ana's", {"cafe"}),
    # case
    ("MAIN street", {"cafe"}),
    ("kenji", {"kenji"}),
    # diacritics, both directions
    ("cafe", {"cafe", "cafe2"}),
    ("café", {"cafe", "cafe2"}),
    ("CAFÉ", {"cafe", "cafe2"}),
    ("naive", {"naive"}),
    ("naïve", {"naive"}),
    # hyphens and underscores: a phrase of their words
    ("e-mail", {"email"}),
    ("mail", {"email"}),
    ("email", set()),
    ("snake_case", {"snake"}),
    ("snake", {"snake"}),
    ("state-of-the-art", {"art"}),
    ("state of the art", {"art"}),
    # numbers and versions
    ("v2.1", {"v21"}),
    ("v2", {"v21", "v20"}),
    ("3.14", {"pi"}),
    ("2024", {"year"}),
    # URLs and paths
    ("example.com", {"url"}),
    ("https://example.com/docs/setup", {"url"}),
    ("setup", {"url"}),
    ("/etc/htm", {"path"}),
    ("config.toml", {"path"}),
    # emoji beside words
    ("party 🎉", {"emoji"}),
    ("snacks🎉", {"emoji"}),
    # Cyrillic and Arabic
    ("привет", {"ru"}),
    ("ПРИВЕТ", {"ru"}),
    ("москва", {"ru"}),
    ("القهوة", {"ar"}),
    # Chinese, Japanese, Korean: substrings, of any length
    ("绿茶", {"zh", "zh2"}),
    ("喝绿茶", {"zh"}),
    ("茶", {"zh", "zh2", "ja"}),
    ("緑茶", {"ja"}),
    ("红茶 绿茶", {"zh", "zh2"}),
    ("タワー", {"ja2"}),
    ("東京", {"ja2"}),
    ("공부", {"ko"}),
    ("绿茶 party", {"zh", "zh2", "emoji"}),
    ("咖啡", set()),
]

#: (tag filter, the tagged memories it must let through): tags compare exactly, byte for
#: byte (no case folding), and a filter also admits the tags below it (``project`` →
#: ``project:x``).
TAGS = {"t1": ("Project:Alpha",), "t2": ("project:beta",), "t3": ("PROJECT",),
        "t4": ("projects",), "t5": ("other:project",), "t6": ("proj_x",)}
TAG_TABLE: list[tuple[str, set[str]]] = [
    ("project", {"t2"}),
    ("Project", {"t1"}),
    ("PROJECT", {"t3"}),
    ("PROJECT:ALPHA", set()),
    ("project:alpha", set()),
    ("Project:Alpha", {"t1"}),
    ("project:Beta", set()),
    ("project:beta", {"t2"}),
    ("project:beta:x", set()),
    ("projects", {"t4"}),
    ("Other", set()),
    ("other", {"t5"}),
    ("proj", set()),
    ("proj-x", set()),
    ("proj_x", {"t6"}),
]

def _memory(key: str, content: str, tags: tuple[str, ...] = ()) -> NewMemory:
    return NewMemory(key=key, content=content, robot="r1", importance=1.0,
                     token_count=len(content.split()), created_at=T0, tags=tags,
                     embedding=EMB.embed_query(content), embedder=EMB.name, explicit_key=True)


@pytest.fixture
def store(store_url):
    s = open_store(store_url)
    s.ensure_robot("r1")
    s.add_many([_memory(k, c) for k, c in CORPUS.items()]
               + [_memory(k, f"tagged note {k}", tags) for k, tags in TAGS.items()])
    yield s
    s.close()


def _keys(store, ids) -> set[str]:
    return {m.key for m in store.get_many(ids)} if ids else set()


def test_every_query_finds_exactly_its_memories(store):
    wrong = []
    for query, expected in TABLE:
        hits = store.fulltext_search(query, limit=50, filters=SearchFilters())
        found = _keys(store, [mid for mid, _ in hits])
        if found != expected:
            wrong.append((query, sorted(found), sorted(expected)))
    assert wrong == [], f"{store.backend}: (query, found, expected) {wrong}"


def test_a_memory_holding_more_of_the_query_ranks_first(store):
    for query, first in [("红茶 绿茶", "zh2"), ("v2.1", "v21"), ("绿茶 party", "zh")]:
        hits = store.fulltext_search(query, limit=50, filters=SearchFilters())
        assert _keys(store, [hits[0][0]]) == {first}, query


def test_tag_filters_are_exact_and_admit_children(store):
    wrong = []
    for tag, expected in TAG_TABLE:
        filters = SearchFilters(tags=(tag,))
        text = _keys(store, [mid for mid, _ in store.fulltext_search(
            "tagged note", limit=50, filters=filters)])
        vector = _keys(store, [mid for mid, _ in store.vector_search(
            EMB.embed_query("tagged note"), limit=50, filters=filters)])
        if text != expected or vector != expected:
            wrong.append((tag, sorted(text), sorted(vector), sorted(expected)))
    assert wrong == [], f"{store.backend}: (tag, full text, vector, expected) {wrong}"


def test_a_common_word_beside_a_dropped_word_still_finds_its_memories(store_url):
    """Issue 19: "Kenji don't" went blind on PostgreSQL in a store where "Kenji" is in
    more than a tenth of the memories, because "don"/"t" (dropped by its dictionary)
    counted as the rare words. Checked without and with the table's statistics."""
    s = open_store(store_url)
    try:
        s.ensure_robot("r1")
        kenji = [f"Kenji: message number {i} about the weekend" for i in range(40)]
        other = [f"Ana wrote note {i} on gardening and tomatoes" for i in range(200)]
        s.add_many([_memory(f"m{i}", c) for i, c in enumerate(kenji + other)]
                   + [_memory("natto", "Kenji: I don't like natto, honestly")])
        for analyzed in (False, True):
            if analyzed and s.backend == "postgres":
                with s.engine.begin() as conn:
                    conn.exec_driver_sql("ANALYZE memories")
            hits = s.fulltext_search("Kenji don't", limit=50, filters=SearchFilters())
            contents = [m.content for m in s.get_many([mid for mid, _ in hits])]
            assert len(contents) == 41, (analyzed, contents)
            assert all(c.startswith("Kenji") for c in contents), contents
    finally:
        s.close()


def test_a_query_without_terms_recalls_only_what_its_vector_finds_above_the_floor(htm_factory):
    """An emoji-only or stop-word-only query has no full-text terms: full text finds
    nothing, hybrid returns only memories similar enough to the query (here the memory
    that is the same emoji, cosine 1), never arbitrary ones."""
    htm = htm_factory(robot="a")
    htm.add("Party tonight, bring snacks", key="party")
    htm.add("Kenji likes natto", key="natto")
    htm.add("🎉", key="emoji")
    htm.add("what is it", key="stop")
    for query, hybrid in [("🎉", ["emoji"]), ("what is it", ["stop"]), ("?!", [])]:
        assert htm.recall(query, strategy="fulltext") == [], query
        assert [h.memory.key for h in htm.recall(query, strategy="hybrid")] == hybrid, query


def _version_1_store(url: str) -> None:
    """A store as htm with schema version 1 left it: its DDL, then rows written in SQL."""
    from sqlalchemy import create_engine, text

    postgres = url.startswith("postgresql")
    if postgres:
        from htm_core.store.postgres import _SCHEMA_V1
        engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
        when: object = T0
        schema = ["CREATE EXTENSION IF NOT EXISTS vector", *_SCHEMA_V1]
    else:
        from htm_core.store.sqlite import _SCHEMA_V1
        engine = create_engine(url if url.startswith("sqlite") else f"sqlite:///{url}")
        when = T0.timestamp()
        schema = list(_SCHEMA_V1)
    rows = [("cafe", "Met Ana at the café"), ("v21", "Released v2.1 today"),
            ("zh", "我喜欢喝绿茶"), ("tagged", "a tagged note")]
    with engine.begin() as conn:
        for statement in schema:
            conn.exec_driver_sql(statement)
        conn.execute(text("INSERT INTO htm_meta(key, value) VALUES ('schema_version', '1')"))
        conn.execute(text("INSERT INTO robots(name, created_at) VALUES ('r1', :t)"),
                     {"t": when})
        for key, content in rows:
            conn.execute(text(
                "INSERT INTO memories(key, content, content_hash, robot_id, importance, "
                "token_count, created_at, last_accessed) VALUES (:k, :c, :h, "
                "(SELECT id FROM robots WHERE name = 'r1'), 1.0, 3, :t, :t)"),
                {"k": key, "c": content, "t": when,
                 "h": hashlib.sha256(content.encode("utf-8")).hexdigest()})
        conn.execute(text("INSERT INTO tags(name) VALUES ('Project:Alpha')"))
        conn.execute(text("INSERT INTO memory_tags(memory_id, tag_id) SELECT m.id, t.id "
                          "FROM memories m, tags t WHERE m.key = 'tagged'"))
    engine.dispose()


@pytest.mark.empty_database
def test_a_version_1_store_upgrades_and_its_memories_follow_the_new_rules(store_url):
    _version_1_store(store_url)
    s = open_store(store_url)
    try:
        assert s.schema_version() == SCHEMA_VERSION
        for query, tags, expected in [("cafe", (), {"cafe"}), ("v2.1", (), {"v21"}),
                                      ("绿茶", (), {"zh"}), ("note", ("Project",), {"tagged"})]:
            hits = s.fulltext_search(query, limit=10, filters=SearchFilters(tags=tags))
            assert _keys(s, [mid for mid, _ in hits]) == expected, query
        s.add_many([_memory("new", "绿茶和红茶")])
        hits = s.fulltext_search("绿茶", limit=10, filters=SearchFilters())
        assert _keys(s, [mid for mid, _ in hits]) == {"zh", "new"}
    finally:
        s.close()
