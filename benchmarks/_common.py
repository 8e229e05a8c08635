"""Shared helpers for the benchmark scripts: seeded data, timing, tables, result files.

Data is reproducible from a seed: sentences of common words plus three rare words per
topic (so the full-text arm has real term overlap: a query's informative words match
about 0.2% of the memories, its common words most of them) paired with clustered 384-d
unit vectors (one cluster per topic, so nearest neighbors are meaningful; uniform random
vectors are the worst case of every ANN index and say nothing about real use).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
TOPICS = 500
RESULTS_DIR = Path(__file__).resolve().parent / "results"
CACHE_DIR = Path(os.environ.get("HTM_BENCH_CACHE", Path(tempfile.gettempdir()) / "htm-bench"))

_SUBJECTS = ["the user", "Alice", "Bob", "the team", "our client", "the robot", "Carol", "the agent"]
_VERBS = ["prefers", "asked about", "fixed", "mentioned", "scheduled", "reviewed", "disliked",
          "deployed", "planned", "documented"]
_WORDS = [
    "kernel", "python", "garden", "invoice", "tokyo", "violin", "database", "sailing", "pasta",
    "budget", "kubernetes", "tennis", "novel", "printer", "vaccine", "bicycle", "espresso",
    "telescope", "mortgage", "hiking", "compiler", "jazz", "laptop", "salary", "wedding",
    "router", "yoga", "museum", "spreadsheet", "camera", "chess", "airport", "firmware",
    "recipe", "dentist", "podcast", "keyboard", "contract", "orchid", "satellite", "pottery",
    "marathon", "backup", "insurance", "volcano", "sushi", "painting", "migration", "birthday",
    "password", "thermostat", "library", "concert", "gradient", "tractor", "lantern", "harbor",
    "quartz", "meadow", "ferry", "glacier", "canyon", "pixel", "socket", "lambda", "vector",
]


@dataclass(frozen=True)
class Dataset:
    """``n`` texts with unit vectors, topic labels and creation times; plus queries."""

    texts: list[str]
    vectors: np.ndarray
    topics: np.ndarray
    created: list[datetime]
    query_texts: list[str]
    query_vectors: np.ndarray


_SYLLABLES = ["ka", "lo", "mi", "ru", "sen", "ta", "vo", "zel", "pa", "dri", "mon", "qui", "bel",
              "nor", "gas", "tew", "yun", "hap", "lix", "cor"]


def _pseudo_word(i: int) -> str:
    a, b, c = i % 20, (i // 20) % 20, (i // 400) % 20
    return _SYLLABLES[a] + _SYLLABLES[b] + _SYLLABLES[c]


def _topic_words(topic: int) -> tuple[str, str, str]:
    # Three words of its own per topic (a vocabulary of 1,500 rare words), so a query's
    # informative words match about 1/500 of the memories, as names and jargon do.
    return (_pseudo_word(3 * topic), _pseudo_word(3 * topic + 1), _pseudo_word(3 * topic + 2))


def dataset(n: int, *, queries: int = 50, seed: int = 7) -> Dataset:
    """A reproducible clustered dataset of ``n`` memories and ``queries`` queries."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((TOPICS, DIM)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    topics = rng.integers(0, TOPICS, n)
    vectors = centers[topics] + (0.8 / np.sqrt(DIM)) * rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    subj = rng.integers(0, len(_SUBJECTS), n)
    verb = rng.integers(0, len(_VERBS), n)
    extra = rng.integers(0, len(_WORDS), n)
    texts = []
    for i in range(n):
        a, b, c = _topic_words(int(topics[i]))
        texts.append(f"{_SUBJECTS[subj[i]]} {_VERBS[verb[i]]} the {a} {b} and {c} "
                     f"with {_WORDS[extra[i]]} (note {i})")
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    created = [start + timedelta(minutes=int(m)) for m in np.sort(rng.integers(0, 200_000, n))]
    q_topics = topics[rng.integers(0, n, queries)] if n else rng.integers(0, TOPICS, queries)
    q_vectors = centers[q_topics] + (0.9 / np.sqrt(DIM)) * rng.standard_normal(
        (queries, DIM)).astype(np.float32)
    q_vectors /= np.linalg.norm(q_vectors, axis=1, keepdims=True)
    q_texts = [f"what about the {_topic_words(int(t))[0]} {_topic_words(int(t))[2]}?" for t in q_topics]
    return Dataset(texts, vectors, topics, created, q_texts, q_vectors)


class VectorTableEmbedder:
    """An embedder that returns precomputed vectors, so timings exclude embedding cost.

    Documents are looked up by text; queries by text too (falling back to the first query
    vector), which keeps the benchmark about the store, not a model.
    """

    def __init__(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        self._by_text = {t: vectors[i] for i, t in enumerate(texts)}
        self.dim = vectors.shape[1]

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        for i, t in enumerate(texts):
            self._by_text[t] = vectors[i]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._by_text[t].tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._by_text[text].tolist()

    def __repr__(self) -> str:
        return "VectorTableEmbedder()"


def median_time(fn: Callable[[], Any], *, runs: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``runs`` calls after ``warmup``."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def hybrid_searcher(store: Any, nxt: Callable[[], tuple[str, Sequence[float]]]
                    ) -> Callable[..., None]:
    """A function running one hybrid top-10 search of ``store`` (the recall pipeline, no
    facade) for the next query ``nxt()`` gives, with the ``config`` it is passed."""
    from htm_core.recall import search
    from htm_core.store.base import SearchFilters

    def hybrid(config: Any = None) -> None:
        text, vec = nxt()
        search(store, query=text, query_vector=lambda: vec, strategy="hybrid", limit=10,
               filters=SearchFilters(), config=config)
    return hybrid


def fmt_time(seconds: float | None) -> str:
    """Seconds as a short human figure (µs / ms / s)."""
    if seconds is None:
        return "–"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(x: float | None) -> str:
    """A speed-up ratio, e.g. ``370×``."""
    if x is None:
        return "–"
    return f"{x:,.0f}×" if x >= 10 else f"{x:.1f}×"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def rss_mb() -> float:
    """Current resident set size of this process in MB (Linux /proc, else peak)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def machine() -> dict[str, Any]:
    """What the figures were taken on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = -1.0
    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpu": cpu,
            "cores": os.cpu_count(), "load_1min": round(load, 2),
            "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def save_results(name: str, payload: dict[str, Any]) -> Path:
    """Write ``payload`` (plus the machine) to ``benchmarks/results/<name>.json``
    (or to the folder in ``HTM_BENCH_RESULTS``)."""
    folder = Path(os.environ.get("HTM_BENCH_RESULTS", RESULTS_DIR))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2))
    return path


def goal_line(label: str, value: float, goal: float, *, lower_is_better: bool = True,
              unit: Callable[[float], str] = fmt_time) -> str:
    """``label: value (goal …) met`` or ``missed by …``."""
    met = value <= goal if lower_is_better else value >= goal
    if met:
        verdict = "met"
    elif lower_is_better:
        ratio = value / goal
        verdict = f"missed by {ratio:.2f}×" if ratio < 1.1 else f"missed by {ratio:.1f}×"
    else:
        verdict = f"missed: {value / goal:.0%} of the goal"
    sign = "≤" if lower_is_better else "≥"
    return f"- {label}: {unit(value)} (goal {sign} {unit(goal)}): **{verdict}**"


def shared_buffers_mb() -> int:
    """A quarter of this machine's memory, at most 8 GB (PostgreSQL's usual starting point)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError):
        return 128
    return max(128, min(8_192, total // 4))


@contextmanager
def postgres_server(url: str | None = None, *, prefix: str = "htm-bench-pg-",
                    shared_buffers: int | None = None) -> Iterator[str]:
    """A PostgreSQL server URL: ``url`` when given, else a throwaway pgserver (PostgreSQL 16
    with pgvector) started for the run and stopped afterwards. ``shared_buffers`` (MB), when
    given, is set on the throwaway server (pgserver keeps PostgreSQL's 128 MB default, in
    which a 100k store's table and HNSW graph no longer fit)."""
    if url:
        yield url
        return
    try:
        import pgserver
    except ImportError:
        raise SystemExit("pgserver is not installed: pip install pgserver, or pass a URL") from None
    pgdata = Path(tempfile.mkdtemp(prefix=prefix))
    srv = pgserver.get_server(str(pgdata), cleanup_mode="stop")
    try:
        if shared_buffers:
            import psycopg
            from pgserver._commands import pg_ctl

            with psycopg.connect(srv.get_uri(), autocommit=True) as conn:
                conn.execute(f"ALTER SYSTEM SET shared_buffers = '{int(shared_buffers)}MB'")
            pg_ctl(["-w", "-m", "fast", "restart"], pgdata=srv.pgdata, user=srv.system_user,
                   timeout=120)
        yield srv.get_uri()
    finally:
        srv.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)


@contextmanager
def fresh_database(server_url: str, *, prefix: str = "htm_bench",
                   keep: bool = False) -> Iterator[str]:
    """A uniquely named database on ``server_url``, dropped afterwards unless ``keep``."""
    import psycopg
    from sqlalchemy.engine import make_url

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    base = make_url(server_url.replace("postgresql+psycopg", "postgresql"))
    admin = base.set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        if not keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
