"""Recall's answers, written out exactly, to check that a change of code changes no result.

::

    python -m benchmarks.recall_dump /tmp/before.txt                 # dev, assistant, LoCoMo
    python -m benchmarks.recall_dump /tmp/after.txt && cmp /tmp/before.txt /tmp/after.txt
    python -m benchmarks.recall_dump OUT --sets dev --quick          # a few questions only
    python -m benchmarks.recall_dump OUT --sets dev --writer         # another robot writes too

Every conversation of the generated development sets (``dev``: ``benchmarks/data/devset.json``;
``assistant``: built from its seed) and of the LoCoMo conversations in ``--locomo DIR``
(default ``/work/shared/data/locomo-dev``, read from there, never copied:
:mod:`benchmarks.locomo`) goes into its own SQLite file through :meth:`HTM.add_many`, with
the dependency-free hashing embedder (deterministic, no model to load) and each turn tagged
with its speaker. Each question is then recalled under a fixed set of calls: every strategy
at several limits, several :class:`~htm_core.RetrievalConfig` variants (plain RRF, each
ranking step switched off or changed, a replaced fusion function), filters (tags, robot,
timeframes), ``neighbors``, ``min_score``, a reranker and ``include_history``, and once
through :func:`htm_core.explain.explain_recall` (each arm's list, the fused RRF scores and
ranks). Each answer is one line: the call, then the ordered hits as ``key`` and ``repr`` of
every score, so two dumps are byte-identical exactly when recall answered the same.

Only public entry points are used (``HTM.recall``, ``explain_recall``), so the script runs
unchanged on the code before and after a reorganisation of recall's modules.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from htm_core import HTM, FrozenClock, HashingEmbedder, RetrievalConfig
from htm_core.explain import explain_recall

from .recall_quality import _turns, load_set

LOCOMO = Path("/work/shared/data/locomo-dev")
LIMITS = (1, 5, 10, 25)
STRATEGIES = ("vector", "fulltext", "hybrid")

__all__ = ["configs", "dump", "main"]


def _rerank(query: str, texts: Sequence[str]) -> list[float]:
    """A reranker whose scores fall outside 0..1 (squashed), ties included (stable order)."""
    return [float((len(t) + len(query)) % 7) - 3.0 for t in texts]


def configs() -> dict[str, RetrievalConfig]:
    """The configurations each question is recalled under (hybrid), by name."""
    default = RetrievalConfig()
    w = dict(default.weights)
    rrf = default.fusion

    def weighted_fusion(arms: Any, k: int) -> Any:
        return rrf(arms, k, {"vector": 2.0})  # type: ignore[call-arg]

    return {
        "plain": RetrievalConfig.plain(),
        "no-centering": default.with_options(centering=False),
        "no-coverage": default.with_options(coverage=False),
        "no-time": default.with_options(time_boost=False),
        "neighbors-2": default.with_options(neighbors=2, neighbor_weight=0.8),
        "no-neighbors": default.with_options(neighbors=0),
        "borrow-alike": default.with_options(neighbor_words=None),
        "fixed-weights": default.with_options(adaptive=False),
        "atypical-12": default.with_options(weights={**w, "atypical@time": 12.0}),
        "penalty-0.35": default.with_options(typical_penalty=0.35),
        "no-duplicates": default.with_options(duplicates=None),
        "duplicates-0.8": default.with_options(duplicates=0.8),
        "no-windows": default.with_options(window_words=None),
        "candidates-2": default.with_options(candidates=2),
        "fusion-fn": default.with_options(fusion=weighted_fusion),
        "fusion-fn-no-neighbors": default.with_options(fusion=weighted_fusion, neighbors=0),
    }


def _hits(hits: Sequence[Any]) -> str:
    return repr([(h.memory.key, h.score, sorted(h.ranks.items())) for h in hits])


def _calls(q: dict[str, Any], i: int, speakers: Sequence[str], first: datetime,
           last: datetime) -> Iterator[tuple[str, dict[str, Any]]]:
    """The default facade's calls for question ``i``: (label, recall's keyword arguments)."""
    for strategy in STRATEGIES:
        for limit in LIMITS:
            yield f"{strategy} limit={limit}", {"strategy": strategy, "limit": limit}
    if i % 2:
        return
    middle = first + (last - first) / 2
    tag = f"speaker:{speakers[i // 2 % len(speakers)]}" if speakers else "speaker:nobody"
    for strategy in STRATEGIES:
        yield f"{strategy} tags={tag}", {"strategy": strategy, "tags": [tag]}
        yield f"{strategy} first-half", {"strategy": strategy, "timeframe": (first, middle)}
    yield "hybrid last-30-days", {"timeframe": "last 30 days"}
    yield "hybrid last-week", {"timeframe": "last week", "limit": 5}
    yield "hybrid robot=bench", {"robot": "bench"}
    yield "hybrid robot=other", {"robot": "other"}
    yield "hybrid tags+second-half", {"tags": [tag], "timeframe": (middle, last)}
    for n in (0, 2, 3):
        yield f"hybrid neighbors={n}", {"neighbors": n, "limit": 25}
    for strategy in STRATEGIES:
        yield f"{strategy} min_score=0.2", {"strategy": strategy, "min_score": 0.2}
    yield "hybrid rerank", {"rerank": _rerank, "limit": 5}
    yield "vector rerank", {"rerank": _rerank, "strategy": "vector", "limit": 5}
    yield "hybrid history", {"include_history": True}


def _explained(htm: HTM, question: str) -> str:
    why = explain_recall(htm, question, limit=10)
    arms = {name: [(a.memory.key, a.score) for a in got] for name, got in sorted(why.arms.items())}
    fused = [(h.memory.key, h.score, sorted(h.ranks.items()), h.relevance) for h in why.fused]
    return repr((arms, fused, why.query_time))


def _writer_step(writer: HTM, items: Sequence[dict[str, Any]], i: int, gone: list[str]) -> None:
    """Between two questions, another robot's writes on the same store: it adds a note,
    forgets a turn and restores the turn it forgot the time before (deterministic, so two
    dumps still compare line by line)."""
    n = len(items)
    writer.add(f"a note about {items[(i * 3) % n]['content']}", key=f"other-{i}")
    if gone:
        writer.restore(gone.pop())
    key = items[(i * 7 + 1) % n]["key"]
    if writer.store.get(key) is not None:
        writer.forget(key, confirm=True)
        gone.append(key)


def _conversation(conv: dict[str, Any], questions: list[dict[str, Any]], folder: Path,
                  write: Callable[[str], None], quick: bool, writer: bool = False) -> None:
    items = _turns(conv)
    for item in items:
        item["tags"] = [f"speaker:{item['metadata']['speaker']}"]
    first, last = items[0]["created_at"], items[-1]["created_at"]
    speakers = sorted({item["metadata"]["speaker"] for item in items})
    clock = FrozenClock(datetime.fromisoformat(conv["sessions"][-1]["date"]))
    url = f"sqlite:///{folder / (conv['id'] + '.db')}"
    embedder = HashingEmbedder()
    with HTM(robot="bench", database_url=url, embedder=embedder, clock=clock,
             working_memory_tokens=1_000_000) as base:
        base.add_many(items)
        base.update(items[len(items) // 2]["key"], items[len(items) // 3]["content"])
        facades = {name: HTM(robot="bench", store=base.store, embedder=embedder, clock=clock,
                             working_memory_tokens=1_000_000, retrieval=config)
                   for name, config in configs().items()}
        other = HTM(robot="other", store=base.store, embedder=embedder, clock=clock)
        gone: list[str] = []
        try:
            for i, q in enumerate(questions[:3] if quick else questions):
                clock.set(datetime.fromisoformat(q["now"]))
                if writer:
                    _writer_step(other, items, i, gone)
                head = f"{conv['id']} {q['id']}"
                for label, kwargs in _calls(q, i, speakers, first, last):
                    write(f"{head} default {label}: {_hits(base.recall(q['question'], **kwargs))}")
                write(f"{head} explain: {_explained(base, q['question'])}")
                if i % 3 == 0:
                    for name, facade in facades.items():
                        write(f"{head} {name}: {_hits(facade.recall(q['question'], limit=10))}")
        finally:
            for facade in (*facades.values(), other):
                facade.close()


def dump(out: Path, sets: Sequence[str], locomo: Path, quick: bool = False,
         writer: bool = False) -> int:
    """Write the answers of every set in ``sets`` to ``out``; return how many lines."""
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="htm-recall-dump-") as tmp:
        for name in sets:
            data = load_set(name, locomo=locomo if name == "locomo" else None)
            for conv in data["conversations"]:
                questions = [q for q in data["questions"] if q["conversation"] == conv["id"]]
                folder = Path(tmp) / name
                folder.mkdir(exist_ok=True)
                prefix = f"{name} "
                _conversation(conv, questions, folder,
                              lambda s, prefix=prefix: lines.append(prefix + s), quick, writer)
                if quick:
                    break
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="file to write (keep it outside the repository)")
    parser.add_argument("--sets", default="dev,assistant,locomo",
                        help="comma-separated: dev, assistant, locomo")
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="folder of LoCoMo *.json")
    parser.add_argument("--quick", action="store_true", help="one conversation, 3 questions")
    parser.add_argument("--writer", action="store_true",
                        help="another robot adds, forgets and restores between questions")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    n = dump(args.out, args.sets.split(","), args.locomo, args.quick, args.writer)
    print(f"{n} recalls written to {args.out} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
