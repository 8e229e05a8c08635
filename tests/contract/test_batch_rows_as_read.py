"""What ``add_many`` returns for a batch is what reading it back gives, and a batch's log
lines come in the order of its records (adds and re-adds interleaved), on every backend.

The SQLite writer returns a new row's times without converting them back from the stored
seconds where that conversion is exact (aware UTC within 2**31 s of 1970), and copies a
batch of adds' log lines from the rows it wrote; these tests pin both to the slow way's
results."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from htm_core.clock import to_timestamp
from htm_core.embeddings import HashingEmbedder
from htm_core.store import NewMemory, open_store

EMB = HashingEmbedder(dim=16)
UTC = timezone.utc


def _rec(i: int, when: datetime, *, robot: str = "r1", accessed: datetime | None = None,
         content: str | None = None) -> NewMemory:
    text = content or f"memory number {i} about topic {i % 7}"
    return NewMemory(key=f"k{i}", content=text, robot=robot, importance=1.0 + i % 5,
                     token_count=6, created_at=when, last_accessed=accessed,
                     embedding=EMB.embed_query(text), embedder=EMB.name)


#: Times that are converted, and that are not: UTC at microsecond edges, around 1970 and
#: the 2**31 s limit, beyond it (both ways), other zones, naive (local) times.
WHENS = [
    datetime(2024, 5, 15, 12, 0, 0, 1, tzinfo=UTC),
    datetime(2024, 5, 15, 12, 0, 0, 999_999, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC) - timedelta(microseconds=1),
    datetime(2038, 1, 19, 3, 14, 7, 999_999, tzinfo=UTC),
    datetime(2038, 1, 19, 3, 14, 8, 1, tzinfo=UTC),
    datetime(2240, 2, 29, 23, 59, 59, 123_457, tzinfo=UTC),
    datetime(1901, 12, 13, 20, 45, 51, 654_321, tzinfo=UTC),
    # Far enough out that the stored seconds cannot hold the microsecond: read back as
    # 2500-06-01 00:00:00.000002 (and 1500-06-01 ...000002).
    datetime(2500, 6, 1, 0, 0, 0, 1, tzinfo=UTC),
    datetime(1500, 6, 1, 0, 0, 0, 1, tzinfo=UTC),
    datetime(2024, 3, 31, 2, 30, 0, 500_001, tzinfo=ZoneInfo("Europe/Berlin")),  # in a gap
    datetime(2024, 11, 3, 1, 30, 0, 7, tzinfo=ZoneInfo("America/New_York"), fold=1),
    datetime(2024, 5, 15, 12, 0, 0, 250_000, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2024, 5, 15, 12, 0, 0, 333_333),
]


def test_returned_rows_equal_the_rows_read_back(store_url: str) -> None:
    store = open_store(store_url)
    try:
        records = [_rec(i, when, accessed=WHENS[-1 - i])
                   for i, when in enumerate(WHENS)]
        records.append(_rec(99, WHENS[0]))  # last access defaults to creation
        results = store.add_many(records)
        read = {m.key: m for m in store.get_many([r.memory.id for r in results])}
        for result in results:
            got, back = result.memory, read[result.memory.key]
            for field in ("created_at", "last_accessed"):
                a, b = getattr(got, field), getattr(back, field)
                assert (a, a.tzinfo, a.utcoffset()) == (b, b.tzinfo, b.utcoffset()), field
                assert a.tzinfo == UTC
        by_key = {r.key: r for r in records}
        for result in results:
            rec = by_key[result.memory.key]
            assert result.memory.created_at.timestamp() == to_timestamp(rec.created_at)
    finally:
        store.close()


def test_a_batch_logs_its_lines_in_record_order(store_url: str) -> None:
    store = open_store(store_url)
    try:
        t0 = datetime(2024, 5, 15, 12, tzinfo=UTC)
        store.add_many([_rec(i, t0) for i in range(3)])
        # New rows of two robots, and re-adds of older and of this batch's rows between them.
        batch = [_rec(10, t0), _rec(1, t0), _rec(11, t0, robot="r2"), _rec(10, t0),
                 _rec(12, t0), _rec(2, t0)]
        store.add_many(batch)
        ops = list(reversed(store.operations(limit=len(batch))))
        assert [(o.op, o.key, o.robot) for o in ops] == [
            ("add", "k10", "r1"), ("touch", "k1", "r1"), ("add", "k11", "r2"),
            ("touch", "k10", "r1"), ("add", "k12", "r1"), ("touch", "k2", "r1")]
        # Only new rows (the one-statement copy on SQLite): every line, in record order.
        fresh = [_rec(i, t0, robot="r2" if i % 3 == 0 else "r1") for i in range(20, 30)]
        store.add_many(fresh)
        ops = list(reversed(store.operations(limit=len(fresh))))
        assert [(o.op, o.key, o.robot) for o in ops] == [("add", r.key, r.robot) for r in fresh]
        assert all(o.detail == {} for o in ops)
        if not store_url.startswith("postgresql"):  # SQLite stamps a batch's lines at once
            assert len({o.at for o in ops}) == 1
    finally:
        store.close()


def test_the_embedding_cache_answers_with_the_oldest_copy(store_url: str) -> None:
    """Several memories of one text with different vectors, the hash asked for twice: one
    answer, the vector of the oldest of them (the lookup joins from the list of hashes)."""
    store = open_store(store_url)
    try:
        t0 = datetime(2024, 5, 15, 12, tzinfo=UTC)
        text = "the same text under three keys"
        vectors = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
        store.add_many([NewMemory(key=f"same{i}", content=text, robot="r1", importance=1.0,
                                  token_count=6, created_at=t0, embedding=vec, embedder="e4")
                        for i, vec in enumerate(vectors)])
        digest = NewMemory(key="x", content=text, robot="r1", importance=1.0, token_count=6,
                           created_at=t0).content_hash
        found = store.find_embeddings([digest, "0" * 64, digest], "e4")
        assert list(found) == [digest] and found[digest] == vectors[0]
    finally:
        store.close()
