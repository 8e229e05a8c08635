"""Many users in one PostgreSQL store: scoped recall and the vector arm's recall per user.

``--memories`` memories (default 1,000,000) of ``--users`` users (default 1,000) with a
Zipf spread (user of rank k holds a share proportional to 1/k**s: a few heavy users, many
light ones), loaded into one store with ``PostgresStore.bulk_load`` (binary COPY, the HNSW
and GIN indexes built once at the end), interleaved in time as a service writes them.
Each memory carries its user's scope tag and key (``ChatScope.of(user_id=...)``, as the
adapters write them). Vectors are clustered 384-d unit vectors: a pool of topic centres
shared by all users, each user talking about a few of them (so other users' memories
crowd every query's neighbourhood, as in a real service); texts name their topic's rare
words (so the full-text arm has work).

For a sample of heavy, medium and light users it measures, on the big store and on a
store holding only that user's memories (same rows, same queries):

- scoped hybrid recall (``HTM.recall(query, tags=[scope tag])``, as every adapter
  scopes it): p50 / p95, the big store and the store alone timed pass by pass in turn
  (their ratio: the median of the passes'), so that both see the same load;
- the vector arm (``store.vector_search`` with the scope's tag filter): recall@10
  against the exact top 10 of the user's own vectors, and how many searches the store
  answered exactly;
- the plain filtered HNSW scan at several ``ef_search`` (rows it returns, recall@10),
  and the exact scan (``enable_indexscan = off``): what the store's strategy chooses
  between.

Plus the load: COPY phase, the index builds (HNSW build time, ``maintenance_work_mem``,
the building backends' peak memory, index and table sizes).

Run: ``python -m benchmarks.scale [--memories 1000000] [--users 1000] [--database-url URL]``;
``--m`` / ``--ef-construction`` are the HNSW build parameters (``PostgresStore(hnsw_m=,
hnsw_ef_construction=)``); ``--passes N`` times each user's queries N times over and reports
the medians of the passes' p50 and p95 (the one-minute load average is recorded with each
user). ``--smoke`` (or ``--quick``) is a few-second run (used by the test suite). Without
``--database-url`` (or ``HTM_BENCH_DATABASE_URL``) it starts a throwaway pgserver.
``--keep`` / ``--load-only`` keep the loaded database, ``--reuse URL`` measures on it
again (with the same sizes), ``--exact-scope-rows`` overrides the store's threshold (a
huge value reads every scope whole, as the store did before it counted scopes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from ._common import (
    _SUBJECTS,
    _VERBS,
    _WORDS,
    DIM,
    _topic_words,
    fmt_time,
    fresh_database,
    goal_line,
    markdown_table,
    postgres_server,
    save_results,
    shared_buffers_mb,
)

ROBOT = "service"
EMBEDDER = "clustered-384"
TOPIC_POOL = 2000
K = 10
RECALL_GOAL = 0.95
LATENCY_GOAL = 2.0


# -- data ----------------------------------------------------------------------------


def zipf_counts(n: int, users: int, s: float = 1.0) -> np.ndarray:
    """Memories per user, heaviest first: shares proportional to 1/rank**s, each >= 1,
    summing to ``n``."""
    weights = 1.0 / np.arange(1, users + 1) ** s
    counts = np.maximum(1, np.floor(n * weights / weights.sum())).astype(np.int64)
    counts[0] += n - int(counts.sum())
    return counts


@dataclass(frozen=True)
class Tenants:
    """The memories of every user, in load (time) order."""

    counts: np.ndarray          # memories per user rank (0: heaviest)
    owner: np.ndarray           # the user of each memory
    topics: np.ndarray          # the topic of each memory
    vectors: np.ndarray         # (n, DIM) float32 unit vectors
    texts: list[str]
    centers: np.ndarray
    user_topics: list[np.ndarray]
    created: list[datetime]

    def rows_of(self, user: int) -> np.ndarray:
        return np.flatnonzero(self.owner == user)


def user_id(user: int) -> str:
    return f"user{user:05d}"


def tenants(n: int, users: int, *, s: float = 1.0, seed: int = 11) -> Tenants:
    """A reproducible multi-tenant dataset (see the module docstring)."""
    rng = np.random.default_rng(seed)
    counts = zipf_counts(n, users, s)
    centers = rng.standard_normal((TOPIC_POOL, DIM)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    owner = rng.permutation(np.repeat(np.arange(users), counts))
    per_user = np.clip(np.log2(counts + 1).astype(int), 2, 12)
    user_topics = [rng.choice(TOPIC_POOL, size=int(k), replace=False) for k in per_user]
    table = np.zeros((users, 12), dtype=np.int64)
    for u, chosen in enumerate(user_topics):
        table[u, :len(chosen)] = chosen
    pick = (rng.random(n) * per_user[owner]).astype(np.int64)
    topics = table[owner, pick]
    vectors = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        part = topics[start:start + 100_000]
        block = centers[part] + (0.8 / np.sqrt(DIM)) * rng.standard_normal(
            (len(part), DIM)).astype(np.float32)
        vectors[start:start + len(part)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    subj, verb, extra = (rng.integers(0, len(v), n) for v in (_SUBJECTS, _VERBS, _WORDS))
    texts = []
    for i in range(n):
        a, b, c = _topic_words(int(topics[i]))
        texts.append(f"{_SUBJECTS[subj[i]]} {_VERBS[verb[i]]} the {a} {b} and {c} "
                     f"with {_WORDS[extra[i]]}")
    start_at = datetime(2025, 1, 1, tzinfo=timezone.utc)
    created = [start_at + timedelta(seconds=int(x)) for x in np.linspace(0, 3e7, n)]
    return Tenants(counts, owner, topics, vectors, texts, centers, user_topics, created)


def queries(data: Tenants, user: int, count: int, *, seed: int = 5) -> tuple[list[str], np.ndarray]:
    """``count`` queries about ``user``'s topics: texts (unique) and unit vectors."""
    rng = np.random.default_rng([seed, user])
    chosen = rng.choice(data.user_topics[user], size=count)
    vectors = data.centers[chosen] + (0.9 / np.sqrt(DIM)) * rng.standard_normal(
        (count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [f"what about the {_topic_words(int(t))[0]} {_topic_words(int(t))[2]} "
             f"(q{user}x{j})" for j, t in enumerate(chosen)]
    return texts, vectors


class QueryEmbedder:
    """The query vectors by text (documents come with their vectors), named as the store's."""

    name = EMBEDDER

    def __init__(self) -> None:
        self.by_text: dict[str, list[float]] = {}

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        self.by_text.update({t: v.tolist() for t, v in zip(texts, vectors, strict=True)})

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.by_text[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.by_text[text]


def records(data: Tenants, rows: np.ndarray) -> list[Any]:
    from htm_core.scope import ChatScope
    from htm_core.store import NewMemory

    scopes: dict[int, Any] = {}
    out = []
    for i in rows.tolist():
        u = int(data.owner[i])
        scope = scopes.get(u) or scopes.setdefault(u, ChatScope.of(user_id=user_id(u)))
        out.append(NewMemory(
            key=scope.own_key(f"m{i}"), content=data.texts[i], robot=ROBOT, importance=1.0,
            token_count=len(data.texts[i]) // 4 + 1, created_at=data.created[i],
            tags=(scope.tag,), embedding=data.vectors[i], embedder=EMBEDDER,
            explicit_key=True))
    return out


# -- the server side -----------------------------------------------------------------


def _rss_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, RssShmem) of a local process in kB; zeros when it is not readable here."""
    found = {"VmRSS": 0, "RssShmem": 0}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key = line.split(":", 1)[0]
                if key in found:
                    found[key] = int(line.split()[1])
    except OSError:
        pass
    return found["VmRSS"], found["RssShmem"]


class BuildWatcher:
    """Samples, twice a second, the backends building an index in ``url``'s database: when
    each index build ran, and their resident memory (when the server is on this machine)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.builds: dict[str, list[float]] = {}
        self.peak_rss_mb = 0.0
        self.peak_shmem_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BuildWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(0.5):
                rows = conn.execute(
                    "SELECT pid, coalesce(leader_pid, pid), query FROM pg_stat_activity "
                    "WHERE datname = current_database() AND state = 'active' "
                    "AND query ILIKE 'CREATE INDEX%'").fetchall()
                now = time.perf_counter()
                total_rss = 0
                for pid, _leader, query in rows:
                    kind = "hnsw" if "hnsw" in query.lower() else "gin"
                    self.builds.setdefault(kind, [now, now])[1] = now
                    rss, shmem = _rss_kb(int(pid))
                    total_rss += rss - shmem
                    self.peak_shmem_mb = max(self.peak_shmem_mb, shmem / 1024)
                self.peak_rss_mb = max(self.peak_rss_mb, total_rss / 1024 + self.peak_shmem_mb)

    def seconds(self, kind: str) -> float | None:
        span = self.builds.get(kind)
        return None if span is None else span[1] - span[0]


def sizes(store: Any) -> dict[str, float]:
    """The table's and its search indexes' sizes in MB."""
    from sqlalchemy import text

    from htm_core.store.postgres._schema import _GIN_INDEX, _HNSW_INDEX

    with store.engine.connect() as conn:
        def mb(rel: str) -> float:
            return float(conn.execute(text("SELECT pg_total_relation_size(to_regclass(:r))"),
                                      {"r": rel}).scalar() or 0) / 2**20
        return {"table_mb": float(conn.execute(text(
                    "SELECT pg_table_size('memories')")).scalar() or 0) / 2**20,
                "hnsw_mb": mb(_HNSW_INDEX), "gin_mb": mb(_GIN_INDEX)}


def pgvector_version(store: Any) -> str:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        return str(conn.execute(text(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar())


def load(url: str, data: Tenants, rows: np.ndarray, *, memory_mb: int, batch: int,
         m: int, ef_construction: int) -> tuple[Any, dict[str, Any], np.ndarray]:
    """A store at ``url`` holding ``rows`` of ``data`` (bulk loaded): the store, the load's
    figures, and each row's memory id."""
    from htm_core.store.postgres import PostgresStore

    store = PostgresStore(url, hnsw_m=m, hnsw_ef_construction=ef_construction)
    ids = np.zeros(len(data.owner), dtype=np.int64)
    with BuildWatcher(url.replace("postgresql+psycopg", "postgresql")) as watch:
        t0 = time.perf_counter()
        with store.bulk_load(maintenance_work_mem_mb=memory_mb):
            for start in range(0, len(rows), batch):
                part = rows[start:start + batch]
                done = store.add_many(records(data, part))
                ids[part] = [r.memory.id for r in done]
            t1 = time.perf_counter()
        t2 = time.perf_counter()
    figures = {"memories": len(rows), "load_s": t1 - t0, "load_per_s": len(rows) / (t1 - t0),
               "indexes_s": t2 - t1, "hnsw_build_s": watch.seconds("hnsw"),
               "gin_build_s": watch.seconds("gin"), "maintenance_work_mem_mb": memory_mb,
               "build_peak_rss_mb": round(watch.peak_rss_mb),
               "build_peak_shmem_mb": round(watch.peak_shmem_mb),
               "hnsw_m": m, "hnsw_ef_construction": ef_construction, **sizes(store)}
    return store, figures, ids


# -- measuring -----------------------------------------------------------------------


def exact_top(vectors: np.ndarray, query: np.ndarray, k: int = K) -> set[int]:
    """Positions of the exact cosine top ``k`` (unit vectors)."""
    scores = vectors @ query
    if len(scores) <= k:
        return set(range(len(scores)))
    return set(np.argpartition(-scores, k)[:k].tolist())


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def plain_scan(store: Any, unit: np.ndarray, tag: str, ef: int | None) -> tuple[list[int], float]:
    """The scope's vector search as one statement, without the store's choice or its
    re-run: through the HNSW index at ``ef`` (the tag tested on each row the scan
    gives; iterative where the store uses iterative scans) or, with None, exactly
    (index scans off); its ids and its time."""
    from sqlalchemy import text

    from htm_core.store import SearchFilters

    sql, params = store.searcher.vector_sql(unit, K, SearchFilters(tags=(tag,)), False,
                                            ef is not None)
    with store.engine.connect() as conn, conn.begin():
        if ef is None:
            conn.execute(text("SELECT set_config('enable_indexscan', 'off', true)"))
        else:
            conn.execute(text("SELECT set_config('hnsw.ef_search', :v, true)"), {"v": str(ef)})
            if store.searcher.iterative:
                conn.execute(text("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)"))
        t = time.perf_counter()
        found = [int(r[0]) for r in conn.execute(text(sql), params)]
        return found, time.perf_counter() - t


class PathCounter:
    """Counts the searches the store sends through the HNSW index (a scope at least
    ``exact_scope_rows`` large) and those it re-runs exactly (came back short)."""

    def __init__(self, searcher: Any) -> None:
        self.indexed = self.rerun = 0
        fenced, exact = searcher._fenced, searcher._exact_vector_search

        def counted_fenced(*args: Any) -> bool:
            through = bool(fenced(*args))
            self.indexed += through
            return through

        def counted_exact(*args: Any) -> Any:
            self.rerun += 1
            return exact(*args)

        searcher._fenced, searcher._exact_vector_search = counted_fenced, counted_exact
        self._undo = (searcher, fenced, exact)

    def close(self) -> None:
        searcher, fenced, exact = self._undo
        searcher._fenced, searcher._exact_vector_search = fenced, exact


def hybrid_times(htm: Any, texts: Sequence[str], tag: str, passes: int) -> tuple[float, float]:
    """Scoped hybrid recall of each of ``texts``, ``passes`` times over: the median of the
    passes' p50 and of their p95."""
    p50s, p95s = [], []
    for _ in range(passes):
        times = []
        for t in texts:
            t0 = time.perf_counter()
            htm.recall(t, tags=[tag], limit=K)
            times.append(time.perf_counter() - t0)
        p50s.append(statistics.median(times))
        p95s.append(percentile(times, 0.95))
    return statistics.median(p50s), statistics.median(p95s)


def paired_times(pair: Sequence[Any], texts: Sequence[str], tag: str,
                 passes: int) -> dict[str, Any]:
    """Scoped hybrid recall of ``texts`` on each ``HTM`` of ``pair`` (the shared store,
    the store alone), a pass on one then a pass on the other, so that both sides see the
    same load: each side's median p50 and p95 over the passes, and the median of the
    passes' p50 ratios (shared / alone)."""
    for htm in pair:  # warm both: the connections, the plans, the pages
        for t in texts:
            htm.recall(t, tags=[tag], limit=K)
    load_before = os.getloadavg()[0]
    runs: list[list[tuple[float, float]]] = [[], []]
    for _ in range(max(1, passes)):
        for side, htm in enumerate(pair):
            runs[side].append(hybrid_times(htm, texts, tag, 1))
    ratios = [s[0] / a[0] for s, a in zip(runs[0], runs[1], strict=True) if a[0]]
    return {"shared_p50_s": statistics.median(p50 for p50, _ in runs[0]),
            "shared_p95_s": statistics.median(p95 for _, p95 in runs[0]),
            "alone_p50_s": statistics.median(p50 for p50, _ in runs[1]),
            "alone_p95_s": statistics.median(p95 for _, p95 in runs[1]),
            "ratio": statistics.median(ratios) if ratios else None,
            "load_average": (load_before + os.getloadavg()[0]) / 2}


def measure_user(htm: Any, store: Any, data: Tenants, user: int, ids: np.ndarray, *,
                 n_queries: int, efs: Sequence[int], plain: bool,
                 passes: int = 1) -> dict[str, Any]:
    """One user's figures on ``store`` (see the module docstring)."""
    from htm_core.scope import ChatScope
    from htm_core.store import SearchFilters

    tag = ChatScope.of(user_id=user_id(user)).recall_tag
    rows = data.rows_of(user)
    own_ids = ids[rows]
    texts, vectors = queries(data, user, n_queries)
    htm.embedder.add(texts, vectors)
    truths = [{int(own_ids[p]) for p in exact_top(data.vectors[rows], q)} for q in vectors]
    want = [min(K, len(rows))] * n_queries
    for t in texts[:2]:  # warm the connection, the caches and the plan
        htm.recall(t, tags=[tag], limit=K)
    load_before = os.getloadavg()[0]
    hybrid_p50, hybrid_p95 = hybrid_times(htm, texts, tag, passes)
    counter = PathCounter(store.searcher)
    arm, arm_recall = [], []
    try:
        for q, truth, w in zip(vectors, truths, want, strict=True):
            t0 = time.perf_counter()
            hits = store.vector_search(q, limit=K, filters=SearchFilters(tags=(tag,)))
            arm.append(time.perf_counter() - t0)
            arm_recall.append(len({h[0] for h in hits} & truth) / w)
    finally:
        counter.close()
    out: dict[str, Any] = {
        "user": user, "memories": len(rows), "share": len(rows) / len(data.owner),
        "hybrid_p50_s": hybrid_p50, "hybrid_p95_s": hybrid_p95,
        "load_average": (load_before + os.getloadavg()[0]) / 2,
        "vector_p50_s": statistics.median(arm), "vector_recall": statistics.mean(arm_recall),
        "vector_recall_min": min(arm_recall), "indexed_share": counter.indexed / n_queries,
        "rerun_share": counter.rerun / n_queries}
    if plain:
        out["plain"] = {str(ef): _plain_figures(store, vectors, truths, want, tag, ef)
                        for ef in [*efs, None]}
    return out


def _plain_figures(store: Any, vectors: np.ndarray, truths: list[set[int]], want: list[int],
                   tag: str, ef: int | None) -> dict[str, float]:
    got, times, recalls = [], [], []
    for q, truth, w in zip(vectors, truths, want, strict=True):
        found, seconds = plain_scan(store, q, tag, ef)
        got.append(len(found))
        times.append(seconds)
        recalls.append(len(set(found) & truth) / w)
    return {"rows": statistics.mean(got), "short_share": sum(g < w for g, w in zip(
        got, want, strict=True)) / len(got), "recall": statistics.mean(recalls),
        "p50_s": statistics.median(times)}


def sample_users(counts: np.ndarray, heavy: int, medium: int, light: int) -> dict[str, list[int]]:
    """User ranks by class: the heaviest, some around rank users/30, the lightest."""
    users = len(counts)
    mid = max(heavy, users // 30)
    picks = {"heavy": list(range(min(heavy, users))),
             "medium": list(range(mid, min(users, mid + medium))),
             "light": list(range(max(0, users - light), users))}
    seen: set[int] = set()
    for cls in ("heavy", "medium", "light"):
        picks[cls] = [u for u in picks[cls] if u not in seen]
        seen.update(picks[cls])
    return picks


# -- the run -------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    memories: int
    users: int
    zipf: float
    queries: int
    heavy: int
    medium: int
    light: int
    efs: tuple[int, ...]
    memory_mb: int
    batch: int
    m: int
    ef_construction: int
    solo: bool
    exact_scope_rows: int | None = None
    passes: int = 1


def run(server: str, plan: Plan, *, keep: bool = False, reuse: str | None = None,
        load_only: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    data = tenants(plan.memories, plan.users, s=plan.zipf)
    print(f"data: {plan.memories:,} memories of {plan.users:,} users in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    result: dict[str, Any] = {"plan": plan.__dict__, "users": {}, "solo": {}}
    with contextlib.ExitStack() as stack:
        if reuse:
            url = reuse
            store, result["load"], ids = reopen(url, data)
        else:
            url = stack.enter_context(fresh_database(server, prefix="htm_bench_scale",
                                                     keep=keep or load_only))
            if keep or load_only:
                print(f"database kept: {url}", flush=True)
            store, result["load"], ids = load(
                url, data, np.arange(plan.memories), memory_mb=plan.memory_mb,
                batch=plan.batch, m=plan.m, ef_construction=plan.ef_construction)
        result["pgvector"] = pgvector_version(store)
        print(f"loaded: {result['load']}", flush=True)
        if load_only:
            store.close()
            return result
        _checkpoint(store)
        if plan.exact_scope_rows is not None:
            store.searcher.exact_scope_rows = plan.exact_scope_rows
        result["strategy"] = {"exact_scope_rows": store.searcher.exact_scope_rows,
                              "scoped_ef_search": store.searcher.scoped_ef_search,
                              "iterative_scan": store.searcher.iterative}
        measure_all(server, store, data, plan, ids, result)
    return result


def measure_all(server: str, store: Any, data: Tenants, plan: Plan, ids: np.ndarray,
                result: dict[str, Any]) -> None:
    """Every sampled user's figures on the shared ``store``, then (``plan.solo``) on a
    store of that user alone, timed in turn with the shared one."""
    from htm_core import HTM

    picks = sample_users(data.counts, plan.heavy, plan.medium, plan.light)
    with HTM(robot=ROBOT, store=store, embedder=QueryEmbedder()) as htm:
        for cls, users in picks.items():
            for u in users:
                result["users"][str(u)] = {"class": cls, **measure_user(
                    htm, store, data, u, ids, n_queries=plan.queries, efs=plan.efs,
                    plain=True, passes=plan.passes)}
                print(f"{cls} {u}: {result['users'][str(u)]}", flush=True)
        if not plan.solo:
            return
        for cls, users in picks.items():
            for u in users:
                result["solo"][str(u)] = solo(server, data, u, plan, htm)
                print(f"solo {cls} {u}: {result['solo'][str(u)]}", flush=True)


def reopen(url: str, data: Tenants) -> tuple[Any, dict[str, Any], np.ndarray]:
    """A store loaded by an earlier run (``--keep``) with the same data: its sizes, and each
    row's memory id (read back from the keys, which end in ``m<row>``)."""
    from sqlalchemy import text

    from htm_core.store.postgres import PostgresStore

    store = PostgresStore(url)
    ids = np.zeros(len(data.owner), dtype=np.int64)
    with store.engine.connect() as conn:
        for mid, key in conn.execute(text("SELECT id, key FROM memories")):
            ids[int(key.rsplit(":m", 1)[1])] = int(mid)
        built = json.loads(conn.execute(text(
            "SELECT value FROM htm_meta WHERE key = 'hnsw'")).scalar() or "{}")
    return store, {"memories": len(data.owner), "reused": True,
                   "hnsw_m": built.get("m"), "hnsw_ef_construction": built.get("ef_construction"),
                   **sizes(store)}, ids


def _checkpoint(store: Any) -> None:
    """Write the build's dirty pages out before timing (else a checkpoint lands in the queries)."""
    with store.engine.connect() as conn:
        conn.exec_driver_sql("CHECKPOINT")
        conn.commit()


def solo(server: str, data: Tenants, user: int, plan: Plan, shared: Any) -> dict[str, Any]:
    """The same figures on a store holding only ``user``'s memories, and the scoped
    hybrid recall timed in turn on it and on the ``shared`` store's ``HTM``
    (:func:`paired_times`)."""
    from htm_core import HTM
    from htm_core.scope import ChatScope

    with fresh_database(server, prefix="htm_bench_solo") as url:
        store, figures, ids = load(url, data, data.rows_of(user), memory_mb=min(
            plan.memory_mb, 1024), batch=plan.batch, m=plan.m,
            ef_construction=plan.ef_construction)
        _checkpoint(store)
        if plan.exact_scope_rows is not None:
            store.searcher.exact_scope_rows = plan.exact_scope_rows
        try:
            with HTM(robot=ROBOT, store=store, embedder=QueryEmbedder()) as htm:
                out = measure_user(htm, store, data, user, ids, n_queries=plan.queries,
                                   efs=(), plain=False, passes=plan.passes)
                texts, _ = queries(data, user, plan.queries)
                out["paired"] = paired_times(
                    (shared, htm), texts, ChatScope.of(user_id=user_id(user)).recall_tag,
                    plan.passes)
        finally:
            store.close()
    return {**out, "load_s": figures["load_s"], "indexes_s": figures["indexes_s"]}


# -- the report ----------------------------------------------------------------------


def report(result: dict[str, Any]) -> list[str]:
    """Print the tables and the goal lines; return the goal lines."""
    load_ = result["load"]
    plan = result["plan"]
    strategy = result.get("strategy", {})
    print(f"\n## {plan['memories']:,} memories of {plan['users']:,} users (Zipf s = "
          f"{plan['zipf']}), one PostgreSQL store, pgvector {result['pgvector']}\n")
    print(f"(scopes of {strategy.get('exact_scope_rows', '?'):,} memories or more through the "
          f"HNSW index at ef_search >= {strategy.get('scoped_ef_search')}; iterative scans: "
          f"{'on' if strategy.get('iterative_scan') else 'off'})\n")
    if not load_.get("reused"):
        print(markdown_table(
            ["COPY phase", "index builds (GIN + HNSW)", "HNSW build", "maintenance_work_mem",
             "build peak memory", "table", "HNSW index", "GIN index"],
            [[f"{fmt_time(load_['load_s'])} ({load_['load_per_s']:,.0f}/s)",
              fmt_time(load_["indexes_s"]), fmt_time(load_["hnsw_build_s"]),
              f"{load_['maintenance_work_mem_mb']:,} MB", f"{load_['build_peak_rss_mb']:,} MB",
              f"{load_['table_mb']:,.0f} MB", f"{load_['hnsw_mb']:,.0f} MB",
              f"{load_['gin_mb']:,.0f} MB"]]))
    else:
        print(f"(measured on a store loaded earlier: table {load_['table_mb']:,.0f} MB, "
              f"HNSW index {load_['hnsw_mb']:,.0f} MB, GIN index {load_['gin_mb']:,.0f} MB)")
    print(f"(HNSW m = {load_.get('hnsw_m')}, ef_construction = {load_.get('hnsw_ef_construction')}; "
          f"load average during the timed recalls {_load_span(result)}; hybrid p50 / p95: "
          f"medians of {plan.get('passes', 1)} pass(es) over each user's queries"
          + ("; the shared store's and the store alone's in turn, the ratio the passes' "
             "median)" if any("paired" in f for f in result["solo"].values()) else ")"))
    rows, goals = [], []
    for key, fig in result["users"].items():
        own = result["solo"].get(key)
        pair = hybrid_pair(fig, own)
        rows.append([fig["class"], key, f"{fig['memories']:,}", f"{fig['share']:.3%}",
                     f"{fmt_time(pair['shared_p50_s'])} / {fmt_time(pair['shared_p95_s'])}",
                     f"{fmt_time(pair['alone_p50_s'])} / {fmt_time(pair['alone_p95_s'])}"
                     if own else "–", f"{pair['ratio']:.2f}×" if pair["ratio"] else "–",
                     f"{fig['vector_recall']:.3f}", f"{own['vector_recall']:.3f}" if own else "–",
                     f"{fig['indexed_share']:.0%} / {fig['rerun_share']:.0%}", fmt_time(fig["vector_p50_s"])])
    print("\n### Scoped recall per user (big store against a store of that user alone)\n")
    print(markdown_table(
        ["class", "user", "memories", "share", "hybrid p50 / p95", "alone p50 / p95",
         "p50 ratio", "vector recall@10", "alone recall@10", "through HNSW / re-run exactly",
         "vector arm p50"], rows))
    _print_plain(result)
    for cls in ("heavy", "medium", "light"):
        figs = [(k, f) for k, f in result["users"].items() if f["class"] == cls]
        if not figs:
            continue
        worst = min(f["vector_recall"] for _, f in figs)
        goals.append(goal_line(f"{cls} users, vector recall@10 (worst user)", worst,
                               RECALL_GOAL, lower_is_better=False, unit=lambda x: f"{x:.3f}"))
        ratios = [hybrid_pair(f, result["solo"][k])["ratio"] for k, f in figs
                  if k in result["solo"]]
        if ratios:
            goals.append(goal_line(f"{cls} users, hybrid p50 against alone (worst user)",
                                   max(ratios), LATENCY_GOAL, unit=lambda x: f"{x:.2f}×"))
    print("\n" + "\n".join(goals))
    return goals


def hybrid_pair(shared: dict[str, Any], alone: dict[str, Any] | None) -> dict[str, Any]:
    """A user's hybrid p50 / p95 shared and alone, and their ratio: the passes timed in
    turn (:func:`paired_times`) where the run has them, else each store's own passes."""
    if alone is not None and "paired" in alone:
        return dict(alone["paired"])
    return {"shared_p50_s": shared["hybrid_p50_s"], "shared_p95_s": shared["hybrid_p95_s"],
            "alone_p50_s": alone["hybrid_p50_s"] if alone else None,
            "alone_p95_s": alone["hybrid_p95_s"] if alone else None,
            "ratio": shared["hybrid_p50_s"] / alone["hybrid_p50_s"] if alone else None}


def _load_span(result: dict[str, Any]) -> str:
    """The one-minute load average while the users were measured: lowest–highest."""
    seen = [f["load_average"] for part in ("users", "solo") for f in result[part].values()
            if "load_average" in f]
    seen += [f["paired"]["load_average"] for f in result["solo"].values() if "paired" in f]
    return f"{min(seen):.1f}–{max(seen):.1f}" if seen else "not recorded"


def _print_plain(result: dict[str, Any]) -> None:
    efs = [k for k in next(iter(result["users"].values()))["plain"] if k != "None"]
    header = ["class", "user", "share"] + [f"HNSW, ef {e}: rows / recall / p50" for e in efs] + [
        "exact scan p50"]
    rows = []
    for key, fig in result["users"].items():
        plain = fig["plain"]
        rows.append([fig["class"], key, f"{fig['share']:.3%}"] + [
            f"{plain[e]['rows']:.1f} / {plain[e]['recall']:.3f} / {fmt_time(plain[e]['p50_s'])}"
            for e in efs] + [fmt_time(plain["None"]["p50_s"])])
    print("\n### The two paths, each alone (one statement, no re-run)\n")
    print(markdown_table(header, rows))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("HTM_BENCH_DATABASE_URL"),
                        help="the PostgreSQL server (default: a throwaway pgserver)")
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--zipf", type=float, default=1.0, help="the Zipf exponent s")
    parser.add_argument("--queries", type=int, default=20, help="queries per sampled user")
    parser.add_argument("--passes", type=int, default=1,
                        help="passes over each user's queries; the hybrid p50 / p95 are the "
                             "medians of the passes'")
    parser.add_argument("--heavy", type=int, default=3)
    parser.add_argument("--medium", type=int, default=2)
    parser.add_argument("--light", type=int, default=5)
    parser.add_argument("--ef-search", default="64,200,400,1000",
                        help="ef_search values of the plain filtered HNSW scans")
    parser.add_argument("--maintenance-work-mem", type=int, default=4096, help="MB")
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--exact-scope-rows", type=int, default=None,
                        help="the store's exact_scope_rows (default: the store's own; a huge "
                             "value reads every scope whole, as the store did before)")
    parser.add_argument("--no-solo", action="store_true",
                        help="skip the stores holding one user alone")
    parser.add_argument("--keep", action="store_true", help="keep the big database")
    parser.add_argument("--load-only", action="store_true",
                        help="load (and keep) the big database, measure nothing")
    parser.add_argument("--reuse", default=None,
                        help="measure on a database an earlier --keep run loaded (same sizes)")
    parser.add_argument("--smoke", "--quick", dest="smoke", action="store_true",
                        help="a few-second run (the test suite's)")
    args = parser.parse_args(argv)
    plan = Plan(memories=args.memories, users=args.users, zipf=args.zipf, queries=args.queries,
                heavy=args.heavy, medium=args.medium, light=args.light,
                efs=tuple(int(x) for x in args.ef_search.split(",")),
                memory_mb=args.maintenance_work_mem, batch=args.batch, m=args.m,
                ef_construction=args.ef_construction, solo=not args.no_solo,
                exact_scope_rows=args.exact_scope_rows, passes=args.passes)
    if args.smoke:
        plan = Plan(memories=3000, users=30, zipf=args.zipf, queries=4, heavy=1, medium=1,
                    light=1, efs=(40,), memory_mb=64, batch=1000, m=args.m,
                    ef_construction=args.ef_construction, solo=True)
    with postgres_server(args.database_url, shared_buffers=shared_buffers_mb()) as server:
        result = run(server, plan, keep=args.keep, reuse=args.reuse, load_only=args.load_only)
    if args.load_only:
        return result
    result["goals"] = report(result)
    if not args.smoke:
        save_results(f"scale-{plan.memories}", result)
    return result


if __name__ == "__main__":
    main()
