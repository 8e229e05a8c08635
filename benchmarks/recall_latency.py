"""Recall latency: htm on SQLite against LangChain, LlamaIndex and exact numpy search.

For each size the same seeded clustered vectors and sentences are loaded into htm's SQLite
store (cached between runs), LangChain's ``InMemoryVectorStore``, LlamaIndex's
``SimpleVectorStore`` and a plain numpy matrix. Query vectors are precomputed, so every
figure excludes the time to embed the query (see ``benchmarks.embedding`` for that).

Columns: htm vector arm (top-10); htm full-text arm; htm hybrid search with the default
``RetrievalConfig`` (both arms fused by RRF plus the quality extras: time-phrase arms and
neighbor scores) and with ``RetrievalConfig.plain()`` (both arms fused by RRF only); the
full ``HTM.recall`` (hybrid search, fetching the memories, recording the access and
updating working memory, all committed); exact numpy top-10 (the floor of exact search);
and the two in-memory stores. Ratios are baseline time / htm hybrid time.
``recall@10`` compares htm's vector arm with exact search.

Run: ``python -m benchmarks.recall_latency [--quick] [--sizes 1000,10000,100000]``
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._common import (
    VectorTableEmbedder,
    dataset,
    fmt_ratio,
    fmt_time,
    goal_line,
    hybrid_searcher,
    markdown_table,
    median_time,
    save_results,
)
from .store_ops import _LCEmbeddings, store_path


def _cycle(items: Sequence[Any]):  # type: ignore[no-untyped-def]
    state = {"i": 0}

    def nxt() -> Any:
        item = items[state["i"] % len(items)]
        state["i"] += 1
        return item
    return nxt


def _htm_searches(store: Any, nxt: Callable[[], Any], queries: int) -> dict[str, float]:
    """htm's vector arm, hybrid search (default and plain RRF) and full-text arm."""
    from htm_core.recall import RetrievalConfig
    from htm_core.store.base import SearchFilters

    out: dict[str, float] = {}
    out["htm_vector"] = median_time(
        lambda: store.vector_search(nxt()[1], limit=10, filters=SearchFilters()), runs=queries)

    hybrid = hybrid_searcher(store, nxt)
    out["htm_hybrid"] = median_time(hybrid, runs=queries)
    plain = getattr(RetrievalConfig, "plain", None)
    if plain is not None:  # plain RRF of the two arms, without the quality extras
        out["htm_hybrid_plain"] = median_time(lambda: hybrid(plain()), runs=queries)

    def fulltext() -> None:
        store.fulltext_search(nxt()[0], limit=20, filters=SearchFilters())
    out["htm_fulltext"] = median_time(fulltext, runs=queries)
    return out


def _exact(store: Any, ds: Any, qs: list[tuple[str, list[float]]], queries: int
           ) -> dict[str, float]:
    """The floor, exact numpy top-10, and the recall@10 of htm's vector arm against it."""
    from htm_core.store.base import SearchFilters

    matrix = ds.vectors
    # The floor: exact top-10 over the same matrix, single-threaded (einsum), which is
    # steadier than a BLAS call on busy cores.
    qcycle = _cycle(list(ds.query_vectors))
    numpy_exact = median_time(
        lambda: np.argpartition(-np.einsum("ij,j->i", matrix, qcycle()), 10)[:10], runs=queries)
    hits = 0
    for _text, vec in qs:
        got = {m for m, _ in store.vector_search(vec, limit=10, filters=SearchFilters())}
        exact = np.argsort(-(matrix @ np.asarray(vec, dtype=np.float32)))[:10]
        hits += len(got & {int(i) + 1 for i in exact})  # store ids are 1-based in load order
    return {"numpy_exact": numpy_exact, "recall_at_10": hits / (10 * len(qs))}


def _langchain(ds: Any, n: int, nxt: Callable[[], Any], runs: int) -> float | None:
    """LangChain's InMemoryVectorStore, top-10 by vector (``None`` when not installed)."""
    try:
        from langchain_core.documents import Document
        from langchain_core.vectorstores import InMemoryVectorStore

        table = VectorTableEmbedder(ds.texts, ds.vectors)
        lc = InMemoryVectorStore(embedding=_LCEmbeddings(table))
        for begin in range(0, n, 5_000):
            lc.add_documents([Document(page_content=t) for t in ds.texts[begin:begin + 5_000]])
        return median_time(lambda: lc.similarity_search_by_vector(nxt()[1], k=10), runs=runs)
    except ImportError:
        return None


def _llamaindex(ds: Any, n: int, nxt: Callable[[], Any], runs: int) -> float | None:
    """LlamaIndex's SimpleVectorStore, top-10 by vector (``None`` when not installed)."""
    try:
        from llama_index.core.schema import TextNode
        from llama_index.core.vector_stores import SimpleVectorStore, VectorStoreQuery

        li = SimpleVectorStore()
        for begin in range(0, n, 5_000):
            li.add([TextNode(text=ds.texts[i], id_=f"n{i}", embedding=ds.vectors[i].tolist())
                    for i in range(begin, min(n, begin + 5_000))])
        return median_time(
            lambda: li.query(VectorStoreQuery(query_embedding=nxt()[1], similarity_top_k=10)),
            runs=runs)
    except ImportError:
        return None


def bench_size(n: int, *, queries: int, baseline_queries: int, baselines: bool) -> dict[str, Any]:
    """Time every contender at size ``n``; returns medians in seconds."""
    from htm_core import HTM
    from htm_core.store.sqlite import SQLiteStore

    ds = dataset(n, queries=queries)
    path = store_path(n)
    store = SQLiteStore(path)
    index = store.mirror.index
    if index is not None and hasattr(index, "ensure_graph"):
        index.ensure_graph()
    qs = [(ds.query_texts[i], ds.query_vectors[i].tolist()) for i in range(queries)]
    out: dict[str, Any] = {"size": n}
    nxt = _cycle(qs)
    out.update(_htm_searches(store, nxt, queries))
    emb = VectorTableEmbedder(ds.query_texts, ds.query_vectors)
    with HTM(robot="bench-recall", store=store, embedder=emb, working_memory_tokens=8_000) as htm:
        out["htm_recall"] = median_time(lambda: htm.recall(nxt()[0], limit=10), runs=queries)
    out.update(_exact(store, ds, qs, queries))
    out["ann_rows"] = getattr(index, "graph_rows", 0)
    store.close()
    if baselines:  # each baseline's index is freed before the next one is built
        out["langchain"] = _langchain(ds, n, nxt, baseline_queries)
        gc.collect()
        out["llamaindex"] = _llamaindex(ds, n, nxt, baseline_queries)
        gc.collect()
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for CI smoke runs")
    parser.add_argument("--sizes", default=None, help="comma-separated store sizes")
    parser.add_argument("--no-baselines", action="store_true",
                        help="skip LangChain/LlamaIndex (slow at 100k)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [500] if args.quick else [1_000, 10_000, 100_000])
    rows = []
    for n in sizes:
        rows.append(bench_size(n, queries=5 if args.quick else 30,
                               baseline_queries=3 if args.quick or n >= 100_000 else 7,
                               baselines=not args.no_baselines))
        gc.collect()
    print("## Recall latency, top-10, SQLite (medians; query embedding excluded)\n")
    print(markdown_table(
        ["memories", "htm vector", "htm full-text", "htm hybrid", "htm hybrid (plain RRF)",
         "HTM.recall (end to end)",
         "numpy exact", "LangChain InMemory", "LlamaIndex Simple", "LangChain / htm hybrid",
         "LlamaIndex / htm hybrid", "recall@10 vs exact"],
        [[f"{r['size']:,}", fmt_time(r["htm_vector"]), fmt_time(r["htm_fulltext"]),
          fmt_time(r["htm_hybrid"]), fmt_time(r.get("htm_hybrid_plain")),
          fmt_time(r["htm_recall"]), fmt_time(r["numpy_exact"]),
          fmt_time(r.get("langchain")), fmt_time(r.get("llamaindex")),
          fmt_ratio(r["langchain"] / r["htm_hybrid"]) if r.get("langchain") else "–",
          fmt_ratio(r["llamaindex"] / r["htm_hybrid"]) if r.get("llamaindex") else "–",
          f"{r['recall_at_10']:.3f}"] for r in rows]))
    big = next((r for r in rows if r["size"] == 100_000), None)
    if big:
        print()
        print(goal_line("hybrid recall top-10, SQLite, 100k", big["htm_hybrid"], 5e-3))
        for name in ("langchain", "llamaindex"):
            if big.get(name):
                print(goal_line(f"{name} / htm hybrid at 100k", big[name] / big["htm_hybrid"], 100,
                                lower_is_better=False, unit=lambda v: f"{v:,.0f}×"))
    if not args.quick:
        save_results("recall_latency", {"rows": rows})
    return {"rows": rows}


if __name__ == "__main__":
    main()
