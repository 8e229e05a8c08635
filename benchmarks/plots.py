"""Draw the plots in docs/img/ from the JSON results the benchmark scripts wrote.

Each benchmark run without ``--quick`` saves ``benchmarks/results/<name>.json``; this
script turns each into a PNG: latency against size on log axes, htm against baselines.
PostgreSQL rows are merged from every ``postgres_ops*.json`` (runs of different sizes).

Run: ``python -m benchmarks.plots [--out docs/img]``
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._common import RESULTS_DIR

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str, results: Path) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _line_plot(path: Path, title: str, xlabel: str, series: dict[str, tuple[list[float], list[float]]],
               ylabel: str = "median latency (s)") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, (xs, ys) in series.items():
        pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y]
        if not pts:
            continue
        style = "-o" if label.startswith("htm") else "--s"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _working_memory_plots(results: Path, out: Path) -> list[Path]:
    """Add that evicts and context assembly, against the seed's sort-all."""
    wm = _load("working_memory", results)
    if not wm:
        return []
    rows = wm["rows"]
    xs = [r["resident"] for r in rows]
    add = out / "working_memory_add.png"
    _line_plot(add, "Working-memory add that evicts", "resident items",
               {"htm (heap + sorted indexes)": (xs, [r["htm_add"] for r in rows]),
                "seed: sort all on every add": (xs, [r["seed_add"] for r in rows])})
    assemble = out / "working_memory_assemble.png"
    _line_plot(assemble, "Context assembly, 8k-token budget", "resident items",
               {"htm balanced": (xs, [r["htm_assemble_balanced"] for r in rows]),
                "htm important": (xs, [r["htm_assemble_important"] for r in rows]),
                "htm recent": (xs, [r["htm_assemble_recent"] for r in rows]),
                "seed: sort all": (xs, [r["seed_assemble"] for r in rows])})
    return [add, assemble]


def _recall_latency_plots(results: Path, out: Path) -> list[Path]:
    """Top-10 recall latency by size, htm against exact numpy and the in-memory stores."""
    rl = _load("recall_latency", results)
    if not rl:
        return []
    rows = rl["rows"]
    xs = [r["size"] for r in rows]
    path = out / "recall_latency.png"
    _line_plot(path, "Top-10 recall latency (query embedding excluded)", "memories", {
        "htm hybrid (SQLite)": (xs, [r["htm_hybrid"] for r in rows]),
        "htm hybrid, plain RRF": (xs, [r.get("htm_hybrid_plain") for r in rows]),
        "htm vector arm": (xs, [r["htm_vector"] for r in rows]),
        "htm HTM.recall end to end": (xs, [r["htm_recall"] for r in rows]),
        "numpy exact": (xs, [r["numpy_exact"] for r in rows]),
        "LangChain InMemoryVectorStore": (xs, [r.get("langchain") for r in rows]),
        "LlamaIndex SimpleVectorStore": (xs, [r.get("llamaindex") for r in rows]),
    })
    return [path]


def _store_plots(results: Path, out: Path) -> list[Path]:
    """Opening a SQLite store with its first recall, and the memory it holds after."""
    so = _load("store_ops", results)
    if not so:
        return []
    opens = so["opens"]
    xs = [o["size"] for o in opens]
    opened = out / "store_open.png"
    _line_plot(opened, "Open an existing SQLite store + first hybrid recall", "memories",
               {"htm open + first recall": (xs, [o["open_first_recall"] for o in opens])})
    rss = out / "store_rss.png"
    _line_plot(rss, "Resident memory after open and 5 recalls", "memories",
               {"htm RSS": (xs, [o["rss_mb"] for o in opens]),
                "Python + imports before open": (xs, [o["rss_before_open_mb"] for o in opens])},
               ylabel="RSS (MB)")
    return [opened, rss]


def _postgres_plots(results: Path, out: Path) -> list[Path]:
    """PostgreSQL latencies by size, merged from every ``postgres_ops*.json``."""
    pg_rows: dict[int, dict[str, Any]] = {}
    for path in sorted(results.glob("postgres_ops*.json")):
        for row in json.loads(path.read_text())["rows"]:
            pg_rows[row["size"]] = row
    if not pg_rows:
        return []
    rows = [pg_rows[k] for k in sorted(pg_rows)]
    xs = [r["size"] for r in rows]
    path = out / "postgres_recall.png"
    _line_plot(path, "PostgreSQL + pgvector HNSW, top-10 (query embedding excluded)",
               "memories", {
                   "htm hybrid (default config)": (xs, [r["hybrid"] for r in rows]),
                   "htm hybrid, plain RRF": (xs, [r["hybrid_plain"] for r in rows]),
                   "htm vector arm (HNSW)": (xs, [r["vector"] for r in rows]),
                   "htm single add + commit": (xs, [r["single_add"] for r in rows]),
               })
    return [path]


def _embedding_plots(results: Path, out: Path) -> list[Path]:
    """End-to-end latencies with MiniLM, one bar each."""
    emb = _load("embedding", results)
    if not emb:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"add_single": "add (one text)", "add_many_per_item": "add_many, per text",
              "add_cached": "add (cache hit)", "add_background": "add (background mode)",
              "recall_hybrid": "recall hybrid", "recall_fulltext": "recall full-text",
              "embed_query": "embed one query"}
    keys = [k for k in labels if k in emb]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.barh([labels[k] for k in keys], [emb[k] * 1e3 for k in keys])
    ax.set_xscale("log")
    ax.set_xlabel("median latency (ms, log)")
    ax.set_title("End to end with MiniLM on CPU")
    fig.tight_layout()
    path = out / "embedding.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def plot_all(results: Path, out: Path) -> list[Path]:
    """Write every plot whose results exist; return the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for plots in (_working_memory_plots, _recall_latency_plots, _store_plots, _postgres_plots,
                  _embedding_plots):
        written += plots(results, out)
    return written


def main(argv: Sequence[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=str(RESULTS_DIR))
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    args = parser.parse_args(argv)
    written = plot_all(Path(args.results), Path(args.out))
    for path in written:
        print(path)
    return written


if __name__ == "__main__":
    main()
