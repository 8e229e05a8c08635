"""Windows of long memories on every backend (schema version 4).

A long memory gets one vector per window of its text besides its whole vector; the vector
search scores it by the better of the two. These tests use a bag-of-words embedder, with
which a fact said deep inside a long text is certain to be missed by the whole vector and
found by its window (``tests/unit/test_windows.py``).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import create_engine, text

from htm_core import HTM, RetrievalConfig
from htm_core._windows import split_windows
from htm_core.recall import hybrid_arms
from htm_core.store import SCHEMA_VERSION, SearchFilters, open_store
from htm_core.transfer import copy_store, export_jsonl, import_jsonl
from tests.unit.test_windows import DISTRACTORS, FACT, FILLER, LONG, QUERY, BagOfWords


def _fill(htm: HTM, **long_options: object) -> None:
    htm.add(LONG, key="long", **long_options)  # type: ignore[arg-type]
    htm.add_many([{"content": d, "key": f"d{i}"} for i, d in enumerate(DISTRACTORS)])


def _ranked(htm: HTM, *, windows: bool = True, filters: SearchFilters | None = None) -> list[str]:
    hits = htm.store.vector_search(BagOfWords().embed_query(QUERY), limit=10,
                                   filters=filters or SearchFilters(), windows=windows)
    keys = {m.id: m.key for m in htm.store.get_many([mid for mid, _ in hits])}
    return [keys[mid] for mid, _ in hits]


def test_add_and_add_many_write_windows_for_long_memories_only(htm_factory):
    htm = htm_factory(embedder=BagOfWords())
    _fill(htm)
    other = LONG.replace("laptop", "phone")
    htm.add_many([other, "a short turn"])
    assert htm.store.window_count() == len(split_windows(LONG, 20)) + len(
        split_windows(other, 20))
    assert _ranked(htm)[0] == "long"
    assert _ranked(htm, windows=False).index("long") > len(DISTRACTORS) - 1


def _unit(vector: object) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float64)
    return v / np.linalg.norm(v)


def test_windows_are_scored_with_the_same_centered_query_as_the_memories(htm_factory):
    """Hybrid recall's vector arm carries the query centered on the memories' mean; a long
    memory scores the better cosine of its whole vector and its best window to that very
    vector, on every backend."""
    htm = htm_factory(embedder=BagOfWords())
    _fill(htm)
    htm.add_many([f"Thanks, that sounds good to me {i}." for i in range(8)])
    given = BagOfWords().embed_query(QUERY)
    arm = hybrid_arms(htm.store, QUERY, lambda: given, limit=5, filters=SearchFilters(),
                      config=RetrievalConfig())[0]["vector"]
    query = _unit(arm.vector)
    assert arm.windows and not np.allclose(query, _unit(given))  # centered
    (hits,) = htm.store.search_arms([arm])
    long = htm.get("long")
    assert long is not None
    whole, *windows = (float(query @ _unit(v)) for v in
                       BagOfWords().embed_documents([LONG, *split_windows(LONG, 20)]))
    assert max(windows) > whole + 0.05  # the fact's window decides the long memory's score
    assert abs(dict(hits)[long.id] - max(windows)) < 1e-4


def test_update_replaces_the_windows_and_purge_deletes_them(htm_factory):
    htm = htm_factory(embedder=BagOfWords())
    _fill(htm)
    newer = FILLER * 3 + "The old laptop was sold; now it is a desktop in the attic."
    htm.update("long", newer)
    assert htm.store.window_count() == len(split_windows(newer, 20))
    assert _ranked(htm)[0] != "long"  # the old fact's window is gone with its text
    htm.update("long", "a short text now")
    assert htm.store.window_count() == 0
    htm.update("long", LONG)
    assert htm.store.window_count() > 0
    htm.forget("long", confirm=True)
    assert htm.store.window_count() > 0  # forgotten: hidden, kept
    htm.purge(confirm=True)
    assert htm.store.window_count() == 0


def test_background_embedding_writes_the_windows(htm_factory):
    htm = htm_factory(embedder=BagOfWords(), background_embeddings=True)
    _fill(htm)
    htm.flush(timeout=60)
    assert htm.store.window_count() == len(split_windows(LONG, 20))
    assert _ranked(htm)[0] == "long"


def test_a_forgotten_memorys_windows_are_never_found_also_by_another_object(htm_factory):
    writer = htm_factory(embedder=BagOfWords())
    _fill(writer)
    reader = htm_factory(embedder=BagOfWords(), robot="reader")
    assert _ranked(reader)[0] == "long"
    writer.forget("long", confirm=True)
    assert "long" not in _ranked(reader) and "long" not in _ranked(writer)
    assert "long" not in [h.memory.key for h in reader.recall(QUERY, strategy="vector")]
    writer.restore("long")
    assert _ranked(reader)[0] == "long"


def test_filters_apply_to_windows_exactly_as_to_their_memories(htm_factory, clock):
    htm = htm_factory(embedder=BagOfWords(), robot="ada")
    htm.add(LONG, key="long", tags=["work:laptop"])
    start = clock() + timedelta(hours=1)
    clock.advance(hours=2)
    bob = htm_factory(embedder=BagOfWords(), robot="bob")
    bob.add_many([{"content": d, "key": f"d{i}", "tags": ["home"]}
                  for i, d in enumerate(DISTRACTORS)])
    hidden = [SearchFilters(robot="bob"), SearchFilters(tags=("home",)),
              SearchFilters(start=start), SearchFilters(end=start - timedelta(days=1)),
              SearchFilters(robot="nobody")]
    for filters in hidden:
        found = _ranked(htm, filters=filters)
        assert "long" not in found, filters
        assert sorted(found) == sorted(_ranked(htm, filters=filters, windows=False)), filters
    for filters in [SearchFilters(robot="ada"), SearchFilters(tags=("work",)),
                    SearchFilters(end=start), SearchFilters()]:
        assert _ranked(htm, filters=filters)[0] == "long", filters


def _downgrade_to_v3(url: str) -> None:
    """Take the windows away, as a store of schema version 3 never had them."""
    postgres = url.startswith("postgresql")
    if postgres:
        from htm_core.store.postgres import postgres_url

        engine = create_engine(postgres_url(url))
        drops = ["DROP TRIGGER memories_windows_stale ON memories",
                 "DROP FUNCTION htm_windows_stale()", "DROP TABLE memory_windows"]
    else:
        engine = create_engine(f"sqlite:///{url}")
        drops = ["DROP TRIGGER memories_windows_au", "DROP TRIGGER memories_windows_ad",
                 "DROP TABLE memory_windows",
                 "DELETE FROM htm_meta WHERE key = 'window_generation'"]
    with engine.begin() as conn:
        for statement in drops:
            conn.exec_driver_sql(statement)
        conn.execute(text("UPDATE htm_meta SET value = '3' WHERE key = 'schema_version'"))
    engine.dispose()


def test_a_version_3_store_is_upgraded_and_its_long_memories_get_windows(store_url):
    with HTM(database_url=store_url, embedder=BagOfWords()) as htm:
        _fill(htm)
    _downgrade_to_v3(store_url)
    with HTM(database_url=store_url, embedder=BagOfWords()) as htm:
        assert htm.store.schema_version() == SCHEMA_VERSION
        assert 4 in {op.detail["to"] for op in htm.operations(op="migrate")}
        assert htm.store.window_count() == 0
        assert "long" in _ranked(htm)  # valid meanwhile: scored by its whole vector
        htm.flush()  # the catch-up that embeds memories without vectors makes windows too
        assert htm.store.window_count() == len(split_windows(LONG, 20))
        assert _ranked(htm)[0] == "long"


def test_copy_and_import_keep_what_windows_find(store_url, tmp_path: Path):
    with HTM(database_url=store_url, embedder=BagOfWords()) as htm:
        _fill(htm)
        export_jsonl(htm.store, tmp_path / "out.jsonl")
        for name, load in [("copy", lambda target: copy_store(htm.store, target)),
                           ("import", lambda target: import_jsonl(target,
                                                                  tmp_path / "out.jsonl"))]:
            target = open_store(str(tmp_path / f"{name}.db"))
            try:
                load(target)
                with HTM(store=target, embedder=BagOfWords()) as copied:
                    copied.flush()
                    assert copied.store.window_count() == htm.store.window_count(), name
                    assert _ranked(copied)[0] == "long", name
            finally:
                target.close()
    assert FACT in LONG


def test_a_long_text_of_one_window_is_marked_and_not_windowed_again(htm_factory):
    htm = htm_factory(embedder=BagOfWords())
    one = " ".join(["word"] * 30)  # long, but a single sentence: one window, the whole text
    htm.add(one, key="one")
    assert htm.store.window_count() == 0
    assert htm.store.missing_windows(window_words=20, limit=10) == []
    htm.update("one", one + " and more")
    assert htm.store.missing_windows(window_words=20, limit=10) == []
