"""Recall quality on long multi-session conversations.

::

    python -m benchmarks.recall_quality            # the whole dev set, MiniLM
    python -m benchmarks.recall_quality --quick    # one conversation, a few questions
    python -m benchmarks.recall_quality --ablation # each hybrid option switched off in turn
    python -m benchmarks.recall_quality --postgres # htm's arms on a throwaway PostgreSQL
    python -m benchmarks.recall_quality --locomo DIR --ablation  # + LoCoMo conversations in DIR

Every conversation of ``benchmarks/data/devset.json`` goes into its own SQLite store
through :meth:`htm_core.HTM.add_many` (one memory per turn, ``"Speaker: text"``,
``created_at`` = the session date, metadata = conversation / session / turn ids). Each
question is recalled with a :class:`~htm_core.FrozenClock` set to the question's ``now``.
For every arm we report Recall@5/10/25 (the share of a question's evidence turns in the
top k, averaged) and hit@10 (at least one evidence turn in the top 10), per question kind,
plus the mean and p95 recall latency. Arms: htm's ``vector`` and ``fulltext`` strategies,
plain RRF of the two (:meth:`RetrievalConfig.plain`), htm's default ``hybrid``, and as
today's baselines LangChain ``InMemoryVectorStore`` and LlamaIndex ``VectorStoreIndex``
over the same embeddings. ``--locomo DIR`` adds real conversations (LoCoMo, read from DIR,
never copied here: :mod:`benchmarks.locomo`), reported per category with standard errors.

Embeddings are cached in ``benchmarks/data/cache/`` (one ``.npz`` per embedder), so only
the first run pays for MiniLM (about 5 ms per text on two cores).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from htm_core import HTM, FrozenClock, HashingEmbedder, Memory, RetrievalConfig
from htm_core.consolidation import KINDS as MEMORY_KINDS
from htm_core.consolidation import periods_between
from htm_core.embeddings import embedder_name
from htm_core.explain import explain_recall
from htm_core.recall import reciprocal_rank_fusion
from htm_core.recall.tiered import digest_info, is_digest
from htm_core.scoring import evidence_of

DATA = Path(__file__).parent / "data"
DEVSET = DATA / "devset.json"
CACHE = DATA / "cache"
KS = (5, 10, 25)
KINDS = ("single-hop", "multi-hop", "temporal", "paraphrased")
#: Every kind of both sets, in report order.
ALL_KINDS = ("single-hop", "single-fact", "multi-hop", "multi-session", "temporal",
             "open-domain", "paraphrased", "latest-value", "preference", "month-decision",
             "progress", "week", "month-topic", "adversarial")
#: Kinds reported apart, never in the ``all`` row (LoCoMo's category 5: the question names
#: the wrong speaker, so its "evidence" is what the other person said).
APART = ("adversarial",)
#: The kinds compared across the two sets (the goals are on their mean).
GROUPS = {"single": ("single-hop", "single-fact"), "multi": ("multi-hop", "multi-session"),
          "temporal": ("temporal",), "paraphrased": ("paraphrased",),
          "latest-value": ("latest-value",), "preference": ("preference",), "all": ("all",)}
SETS = ("dev", "assistant")
#: The LoCoMo kinds, in report order (categories 1-4; ``all`` is these together).
LOCOMO_KINDS = ("multi-hop", "temporal", "open-domain", "single-hop")

__all__ = ["CachedEmbedder", "evaluate", "experiment_parser", "experiment_sets",
           "experiment_variants", "load_set", "main", "mean_of_sets", "recall_at", "summarise",
           "variant_experiment"]


class CachedEmbedder:
    """An embedder that keeps every vector it has made in ``cache_dir/<name>.npz``.

    ``factory`` builds the real embedder only when a text is not cached, so a warm
    run never loads the model. The name is the real embedder's, so stores match.
    """

    def __init__(self, factory: Callable[[], Any], name: str, cache_dir: Path | None) -> None:
        self._factory = factory
        self._inner: Any = None
        self.name = name
        self._path = cache_dir / (name.replace("/", "_").replace(":", "_") + ".npz") \
            if cache_dir else None
        self._vectors: dict[str, np.ndarray] = {}
        self._dirty = False
        self.computed = 0
        if self._path is not None and self._path.exists():
            with np.load(self._path) as data:
                keys, vectors = data["keys"], data["vectors"]
            self._vectors = {str(k): v for k, v in zip(keys, vectors, strict=True)}

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for ``texts``, computing (in one batch) only the uncached ones."""
        todo = list(dict.fromkeys(t for t in texts if self._key(t) not in self._vectors))
        if todo:
            if self._inner is None:
                self._inner = self._factory()
            for text, vec in zip(todo, self._inner.embed_documents(todo), strict=True):
                self._vectors[self._key(text)] = np.asarray(vec, dtype=np.float32)
            self.computed += len(todo)
            self._dirty = True
        return [self._vectors[self._key(t)].tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """The vector for a query (cached like a document: MiniLM embeds both alike)."""
        return self.embed_documents([text])[0]

    def save(self) -> None:
        """Write the cache if anything new was computed."""
        if self._path is None or not self._dirty:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.asarray(sorted(self._vectors))
        np.savez(self._path, keys=keys, vectors=np.stack([self._vectors[k] for k in keys]))
        self._dirty = False


class CachedWindowEmbedder(CachedEmbedder):
    """:class:`CachedEmbedder` of an embedder with ``embed_windows`` (MiniLM), which it
    passes on: a text's window vectors are cached under the text and its spans."""

    def embed_windows(self, texts: list[str], spans: list[list[tuple[int, int]]]
                      ) -> tuple[list[list[float]], list[list[list[float]]]]:
        keys = [self._key(f"windows {s}\n{t}") for t, s in zip(texts, spans, strict=True)]
        todo = [i for i, k in enumerate(keys) if k + ":0" not in self._vectors
                or self._key(texts[i]) not in self._vectors]
        if todo:
            if self._inner is None:
                self._inner = self._factory()
            whole, windows = self._inner.embed_windows([texts[i] for i in todo],
                                                       [spans[i] for i in todo])
            for i, vec, rows in zip(todo, whole, windows, strict=True):
                self._vectors[self._key(texts[i])] = np.asarray(vec, dtype=np.float32)
                for n, row in enumerate(rows):
                    self._vectors[f"{keys[i]}:{n}"] = np.asarray(row, dtype=np.float32)
            self.computed += len(todo)
            self._dirty = True
        return ([self._vectors[self._key(t)].tolist() for t in texts],
                [[self._vectors[f"{k}:{n}"].tolist() for n in range(len(s))]
                 for k, s in zip(keys, spans, strict=True)])


def make_embedder(kind: str, cache_dir: Path | None, *, pooled: bool = False) -> CachedEmbedder:
    """``"minilm"`` (htm's LocalEmbedder) or ``"hashing"``, behind the cache; with
    ``pooled``, MiniLM's window vectors are pooled from its pass over the whole text
    (``LocalEmbedder(pool_windows=True)``) instead of each window embedded as a text."""
    if kind == "hashing":
        return CachedEmbedder(HashingEmbedder, embedder_name(HashingEmbedder()), None)
    from htm_core.embeddings import LocalEmbedder

    if pooled:
        return CachedWindowEmbedder(lambda: LocalEmbedder(pool_windows=True),
                                    "sentence-transformers:all-MiniLM-L6-v2", cache_dir)
    return CachedEmbedder(LocalEmbedder, "sentence-transformers:all-MiniLM-L6-v2", cache_dir)


# -- metrics -------------------------------------------------------------------------


def recall_at(ranked: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """Share of ``evidence`` found in the first ``k`` of ``ranked``.

    >>> recall_at(["a", "x", "b"], ["a", "b"], 2)
    0.5
    """
    wanted = set(evidence)
    return len(wanted & set(ranked[:k])) / len(wanted)


def hit_at(ranked: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """1.0 when at least one evidence id is in the first ``k`` of ``ranked``, else 0.0."""
    return float(bool(set(evidence) & set(ranked[:k])))


@dataclass
class ArmResult:
    """Per-question rankings and latencies of one arm."""

    name: str
    ranked: dict[str, list[str]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)


def _in_row(kind: str, question: dict[str, Any]) -> bool:
    return question["kind"] == kind or (kind == "all" and question["kind"] not in APART)


def summarise(result: ArmResult, questions: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean R@5/10/25 and hit@10 per kind (and ``all``, without the :data:`APART` kinds)
    for one arm, with ``se@10``, the standard error of R@10 over the questions."""
    out: dict[str, dict[str, float]] = {}
    for kind in (*ALL_KINDS, "all"):
        qs = [q for q in questions if _in_row(kind, q) and q["id"] in result.ranked]
        if not qs:
            continue
        row = {f"R@{k}": statistics.fmean(recall_at(result.ranked[q["id"]], q["evidence"], k)
                                          for q in qs) for k in KS}
        row["hit@10"] = statistics.fmean(hit_at(result.ranked[q["id"]], q["evidence"], 10)
                                         for q in qs)
        at10 = [recall_at(result.ranked[q["id"]], q["evidence"], 10) for q in qs]
        row["se@10"] = statistics.stdev(at10) / len(qs) ** 0.5 if len(qs) > 1 else 0.0
        row["n"] = len(qs)
        out[kind] = row
    return out


def paired_markdown(questions: Sequence[dict[str, Any]], results: dict[str, ArmResult],
                    base: str = "htm hybrid (default)") -> str:
    """Each arm's R@10 less ``base``'s, question by question: the mean difference ± its
    standard error per kind, and how many questions gained and lost."""
    if base not in results:
        return ""
    kinds = [k for k in (*ALL_KINDS, "all") if any(_in_row(k, q) for q in questions)]
    lines = [f"\n**R@10 paired with {base}** (mean difference ± its standard error; "
             "questions gained / lost)\n",
             "| arm | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
    for name, arm in results.items():
        if name == base:
            continue
        cells = []
        for kind in kinds:
            qs = [q for q in questions if _in_row(kind, q) and q["id"] in arm.ranked
                  and q["id"] in results[base].ranked]
            diff = [recall_at(arm.ranked[q["id"]], q["evidence"], 10)
                    - recall_at(results[base].ranked[q["id"]], q["evidence"], 10) for q in qs]
            se = statistics.stdev(diff) / len(diff) ** 0.5 if len(diff) > 1 else 0.0
            cells.append(f"{statistics.fmean(diff) if diff else 0.0:+.3f} ± {se:.3f} "
                         f"({sum(d > 0 for d in diff)}/{sum(d < 0 for d in diff)})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# -- arms ----------------------------------------------------------------------------


def _turns(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """One memory per turn; the turns of a session ``turn_seconds`` apart (default 30)."""
    step = timedelta(seconds=conv.get("turn_seconds", 30))
    items = []
    for session in conv["sessions"]:
        start = datetime.fromisoformat(session["date"])
        for i, turn in enumerate(session["turns"]):
            items.append({
                "content": f"{turn['speaker']}: {turn['text']}", "key": turn["id"],
                "created_at": start + step * i,
                "metadata": {"conversation": conv["id"], "session": session["id"],
                             "turn": turn["id"], "speaker": turn["speaker"]},
            })
    return items


def _expanded(htm: HTM, query: str, hits: list[Any]) -> list[Memory]:
    """Hybrid hits with each digest replaced, in place, by the memories beneath it (down
    the sources to the turns), those ordered by their own relevance to ``query``."""
    vector = htm._embedding.query(query)
    out: dict[int, Memory] = {}
    for hit in hits:
        if not is_digest(hit.memory):
            out.setdefault(hit.memory.id, hit.memory)
            continue
        level = [hit.memory]
        while level and is_digest(level[0]):
            ids = [s["id"] for m in level for s in (digest_info(m) or {}).get("sources", ())]
            level = htm.store.get_many(ids, include_embedding=True)
        level.sort(key=lambda m: -evidence_of(query, m.content, float(np.dot(
            vector, m.embedding)) if m.embedding is not None else None))
        for m in level:
            out.setdefault(m.id, m)
    return list(out.values())


def _consolidated(htm: HTM, conv: dict[str, Any]) -> dict[str, float]:
    """Write the month digests (and their weeks and days) of the conversation's span."""
    first = datetime.fromisoformat(conv["sessions"][0]["date"])
    last = datetime.fromisoformat(conv["sessions"][-1]["date"]) + timedelta(days=1)
    t0 = time.perf_counter()
    written = sum(len(htm.consolidate("month", at=p.start))
                  for p in periods_between(first, last, "month"))
    return {"digests": float(written), "seconds": time.perf_counter() - t0}


def _tiered_arms(facade: HTM, conv: dict[str, Any], questions: list[dict[str, Any]],
                 clock: FrozenClock, depth: int, results: dict[str, ArmResult]) -> None:
    """Consolidate, then ``tiered`` recall and hybrid with the digests as candidates."""
    made = _consolidated(facade, conv)
    COST["consolidation"].append(made)
    for name in TIERED_ARMS:
        results.setdefault(name, ArmResult(name))
    for q in questions:
        clock.set(datetime.fromisoformat(q["now"]))
        t0 = time.perf_counter()
        why = explain_recall(facade, q["question"], limit=depth, strategy="tiered")
        results["htm tiered"].seconds.append(time.perf_counter() - t0)
        results["htm tiered"].ranked[q["id"]] = [h.memory.metadata["turn"] for h in why.fused
                                                 if "turn" in h.memory.metadata]
        tiers = why.tiers
        COST["tiered"].append({"scored": float(sum(len(v) for v in tiers.scored.values()))
                               if tiers else 0.0, "turns": float(tiers.turns if tiers else 0)})
        t0 = time.perf_counter()
        hits = facade.recall(q["question"], limit=depth, kinds=MEMORY_KINDS)  # digests too
        memories = _expanded(facade, q["question"], hits)[:depth]
        results["hybrid with digests"].seconds.append(time.perf_counter() - t0)
        results["hybrid with digests"].ranked[q["id"]] = [m.metadata["turn"] for m in memories
                                                          if "turn" in m.metadata]
        hybrid = results.get("htm hybrid (default)")
        if hybrid is not None and q["id"] in hybrid.ranked:
            fused = reciprocal_rank_fusion({"tiered": results["htm tiered"].ranked[q["id"]],
                                            "hybrid": hybrid.ranked[q["id"]]}, 60)
            results["tiered + hybrid (RRF)"].ranked[q["id"]] = [str(r.id) for r in fused][:depth]
            results["tiered + hybrid (RRF)"].seconds.append(
                results["htm tiered"].seconds[-1] + hybrid.seconds[len(results["htm tiered"].seconds) - 1])


#: The context budgets at which ``--tiered`` measures the coverage of older facts.
CONTEXT_BUDGETS = (1_000, 2_000)
#: ... and the age (days before the question) from which a fact counts as older.
CONTEXT_AGES = (7, 28)


def context_coverage(conv: dict[str, Any], questions: list[dict[str, Any]],
                     embedder: CachedEmbedder) -> None:
    """Both contexts at :data:`CONTEXT_BUDGET` on a fresh store of the conversation (no
    recall has touched it: every turn resident, as written), consolidated, at the
    questions' ``now``; their coverage of each question's evidence goes to :data:`COST`."""
    if not questions:
        return
    clock = FrozenClock(datetime.fromisoformat(questions[0]["now"]))
    with tempfile.TemporaryDirectory(prefix="htm-context-") as tmp, \
            HTM(robot="bench", database_url=str(Path(tmp) / "c.db"), embedder=embedder,
                clock=clock, working_memory_tokens=1_000_000) as htm:
        htm.add_many(_turns(conv))
        _consolidated(htm, conv)
        for budget in CONTEXT_BUDGETS:
            for strategy in ("balanced", "tiered"):
                held = _held(htm, htm.create_context(strategy=strategy, max_tokens=budget))
                for days in CONTEXT_AGES:
                    COST.setdefault(f"context {strategy} {budget} tokens, {days}+ days", []).extend(
                        {"covered": c} for q in questions
                        if (c := _covered(held, conv, q, days)) is not None)


def _held(htm: HTM, ctx: Any) -> dict[str, str]:
    """Each turn a context tells, by turn id: the turn itself, or a digest made (down its
    sources) from it, with the text that tells it."""
    held: dict[str, str] = {}
    for memory in ctx.memories:
        if not is_digest(memory):
            held[memory.metadata.get("turn", memory.key)] = memory.content
            continue
        level, text = [memory], memory.content
        while level and any(is_digest(m) for m in level):
            ids = [s["id"] for m in level for s in (digest_info(m) or {}).get("sources", ())]
            level = htm.store.get_many(ids)
        for turn in level:
            held.setdefault(turn.metadata.get("turn", turn.key), text)
    return held


def _covered(held: dict[str, str], conv: dict[str, Any], question: dict[str, Any],
             days: int) -> float | None:
    """The share of ``question``'s older evidence turns (said ``days`` or more before the
    question) that a context tells (:func:`_held`: the turn, or a digest above it holding
    its text); None when it has none."""
    edge = datetime.fromisoformat(question["now"]) - timedelta(days=days)
    said = {t["id"]: t["text"] for s in conv["sessions"] for t in s["turns"]
            if datetime.fromisoformat(s["date"]) < edge}
    older = [e for e in question["evidence"] if e in said]
    return statistics.fmean(float(e in held and said[e].strip() in held[e])
                            for e in question["evidence"] if e in said) if older else None


#: The arms ``--tiered`` adds, run once the digests are written.
TIERED_ARMS = ("htm tiered", "hybrid with digests", "tiered + hybrid (RRF)")
#: What ``--tiered`` measured of its cost: per conversation and per question.
COST: dict[str, list[dict[str, float]]] = {"consolidation": [], "tiered": []}


def _htm_arms(conv: dict[str, Any], questions: list[dict[str, Any]], embedder: CachedEmbedder,
              url: str, configs: dict[str, tuple[str, RetrievalConfig]], depth: int,
              tiered: bool = False) -> dict[str, ArmResult]:
    clock = FrozenClock(datetime.fromisoformat(conv["sessions"][-1]["date"]))
    results = {name: ArmResult(name) for name in configs}
    with HTM(robot="bench", database_url=url, embedder=embedder, clock=clock,
             working_memory_tokens=1_000_000) as base:
        base.add_many(_turns(conv))
        facades = {name: HTM(robot="bench", store=base.store, embedder=embedder, clock=clock,
                             working_memory_tokens=1_000_000, retrieval=config)
                   for name, (_, config) in configs.items()}
        try:
            for q in questions:
                clock.set(datetime.fromisoformat(q["now"]))
                embedder.embed_query(q["question"])  # warm: latency excludes the model
                for name, (strategy, _) in configs.items():
                    t0 = time.perf_counter()
                    hits = facades[name].recall(q["question"], limit=depth, strategy=strategy)
                    results[name].seconds.append(time.perf_counter() - t0)
                    results[name].ranked[q["id"]] = [h.memory.metadata["turn"] for h in hits]
            if tiered:
                _tiered_arms(base, conv, questions, clock, depth, results)
        finally:
            for facade in facades.values():
                facade.close()
    return results


def _langchain_arm(conv: dict[str, Any], questions: list[dict[str, Any]],
                   embedder: CachedEmbedder, depth: int) -> ArmResult:
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    class Adapter(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedder.embed_documents(texts)

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed_query(text)

    turns = _turns(conv)
    store = InMemoryVectorStore(embedding=Adapter())
    store.add_texts([t["content"] for t in turns], metadatas=[t["metadata"] for t in turns],
                    ids=[t["key"] for t in turns])
    result = ArmResult("langchain")
    for q in questions:
        embedder.embed_query(q["question"])
        t0 = time.perf_counter()
        docs = store.similarity_search(q["question"], k=depth)
        result.seconds.append(time.perf_counter() - t0)
        result.ranked[q["id"]] = [d.metadata["turn"] for d in docs]
    return result


def _llamaindex_arm(conv: dict[str, Any], questions: list[dict[str, Any]],
                    embedder: CachedEmbedder, depth: int) -> ArmResult:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.schema import TextNode

    class Adapter(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return embedder.embed_query(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return embedder.embed_query(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return embedder.embed_documents([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return embedder.embed_documents(texts)

    keys = ["conversation", "session", "turn", "speaker"]
    nodes = [TextNode(text=t["content"], id_=t["key"], metadata=t["metadata"],
                      excluded_embed_metadata_keys=keys, excluded_llm_metadata_keys=keys)
             for t in _turns(conv)]
    index = VectorStoreIndex(nodes=nodes, embed_model=Adapter(model_name=embedder.name,
                                                              embed_batch_size=256))
    retriever = index.as_retriever(similarity_top_k=depth)
    result = ArmResult("llamaindex")
    for q in questions:
        embedder.embed_query(q["question"])
        t0 = time.perf_counter()
        nodes_found = retriever.retrieve(q["question"])
        result.seconds.append(time.perf_counter() - t0)
        result.ranked[q["id"]] = [n.node.metadata["turn"] for n in nodes_found]
    return result


def htm_configs(ablation: bool, rows: Sequence[str] = ()
                ) -> dict[str, tuple[str, RetrievalConfig]]:
    """The htm arms: name -> (strategy, config); with ``rows``, only the default and the
    arms whose name contains one of them."""
    default = RetrievalConfig()
    configs = {
        "htm vector": ("vector", default),
        "htm fulltext": ("fulltext", default),
        "plain RRF": ("hybrid", RetrievalConfig.plain()),
        "htm hybrid (default)": ("hybrid", default),
    }
    if ablation:
        w = dict(default.weights)
        configs.update({
            "hybrid, no centering": ("hybrid", default.with_options(centering=False)),
            "centered vector arm alone": ("hybrid", RetrievalConfig(
                time_boost=False, neighbors=0, coverage=False,
                weights={"vector": 1.0, "fulltext": 0.0})),
            "hybrid, no coverage": ("hybrid", default.with_options(coverage=False)),
            "hybrid, no time boost": ("hybrid", default.with_options(time_boost=False)),
            "hybrid, time arms weight 1": ("hybrid", default.with_options(
                weights={**w, "vector@time": 1.0, "fulltext@time": 1.0})),
            "hybrid, no neighbors": ("hybrid", default.with_options(neighbors=0)),
            "hybrid, neighbors=2": ("hybrid", default.with_options(neighbors=2)),
            "hybrid, neighbor weight 0.5": ("hybrid", default.with_options(neighbor_weight=0.5)),
            "hybrid, neighbor weight 0.8": ("hybrid", default.with_options(neighbor_weight=0.8)),
            "hybrid, vector weight 2": ("hybrid", default.with_options(weights={**w, "vector": 2.0})),
            "hybrid, candidates=2": ("hybrid", default.with_options(candidates=2)),
            "hybrid, no atypical time arm": ("hybrid", default.with_options(
                weights={**w, "atypical@time": 0.0})),
            "hybrid, atypical time arm for rare words too": ("hybrid", default.with_options(
                atypical_only_without_rare_words=False)),
            "hybrid, atypical time arm weight 12": ("hybrid", default.with_options(
                weights={**w, "atypical@time": 12.0})),
            "hybrid, long memories borrow alike": ("hybrid", default.with_options(
                neighbor_words=None)),
            "hybrid, fixed full-text weight": ("hybrid", default.with_options(adaptive=False)),
            "hybrid, fixed full-text weight, no atypical time arm": ("hybrid", default.with_options(
                adaptive=False, weights={**w, "atypical@time": 0.0})),
            "hybrid, no typicality penalty": ("hybrid", default.with_options(typical_penalty=0.0)),
            "hybrid, typicality penalty 0.35": ("hybrid", default.with_options(
                typical_penalty=0.35)),
            "hybrid, no duplicate demotion": ("hybrid", default.with_options(duplicates=None)),
            "hybrid, duplicates at 0.9": ("hybrid", default.with_options(duplicates=0.9)),
            "hybrid, duplicates at 0.8": ("hybrid", default.with_options(duplicates=0.8)),
            "hybrid before round two": ("hybrid", default.with_options(typical_penalty=0.0,
                                                                       duplicates=None)),
            "htm vector, no windows": ("vector", default.with_options(window_words=None)),
            "hybrid, no windows": ("hybrid", default.with_options(window_words=None)),
        })
    if rows:
        configs = {name: arm for name, arm in configs.items()
                   if name == "htm hybrid (default)" or any(r in name for r in rows)}
    return configs


def evaluate(devset: dict[str, Any], *, embedder: CachedEmbedder, quick: bool = False,
             ablation: bool = False, baselines: bool = True, depth: int = 25,
             rows: Sequence[str] = (),
             database: Callable[[str], AbstractContextManager[str]] | None = None,
             tiered: bool = False) -> tuple[list[dict[str, Any]], dict[str, ArmResult]]:
    """Run every arm over the dev set; return the questions asked and each arm's results.

    ``database(conversation_id)`` gives the store URL for one conversation (default: a
    SQLite file in a temporary folder).
    """
    convs = devset["conversations"][:1] if quick else devset["conversations"]
    asked: list[dict[str, Any]] = []
    results: dict[str, ArmResult] = {}
    configs = htm_configs(ablation, rows)
    with tempfile.TemporaryDirectory(prefix="htm-recall-") as tmp:
        for conv in convs:
            questions = [q for q in devset["questions"] if q["conversation"] == conv["id"]]
            if quick:
                questions = [q for kind in ALL_KINDS for q in questions if q["kind"] == kind][::4]
            asked.extend(questions)
            with (database(conv["id"]) if database else
                  nullcontext(str(Path(tmp) / f"{conv['id']}.db"))) as url:
                arms = _htm_arms(conv, questions, embedder, url, configs, depth, tiered)
            if tiered:
                context_coverage(conv, questions, embedder)
            if baselines:
                arms["LangChain InMemoryVectorStore"] = _langchain_arm(conv, questions, embedder,
                                                                       depth)
                arms["LlamaIndex VectorStoreIndex"] = _llamaindex_arm(conv, questions, embedder,
                                                                      depth)
            for name, arm in arms.items():
                total = results.setdefault(name, ArmResult(name))
                total.ranked.update(arm.ranked)
                total.seconds.extend(arm.seconds)
            embedder.save()
    return asked, results


# -- report --------------------------------------------------------------------------


def markdown(questions: Sequence[dict[str, Any]], results: dict[str, ArmResult]) -> str:
    """The tables: one per metric (arms × kinds), then latency."""
    summaries = {name: summarise(r, questions) for name, r in results.items()}
    kinds = [k for k in (*ALL_KINDS, "all") if any(k in s for s in summaries.values())]
    counts = {k: next(int(s[k]["n"]) for s in summaries.values() if k in s) for k in kinds}
    lines = []
    for metric in (*(f"R@{k}" for k in KS), "hit@10"):
        lines.append(f"\n**{metric}**\n")
        lines.append("| arm | " + " | ".join(f"{k} ({counts[k]})" for k in kinds) + " |")
        lines.append("|---|" + "---:|" * len(kinds))
        for name, s in summaries.items():
            lines.append(f"| {name} | " + " | ".join(f"{s[k][metric]:.3f}" if k in s else "-"
                                                     for k in kinds) + " |")
    lines.append("\n**recall latency** (ms per query, query embedding cached)\n")
    lines.append("| arm | mean | p95 |")
    lines.append("|---|---:|---:|")
    for name, r in results.items():
        ms = sorted(x * 1000 for x in r.seconds)
        p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))] if ms else 0.0
        lines.append(f"| {name} | {statistics.fmean(ms) if ms else 0.0:.1f} | {p95:.1f} |")
    return "\n".join(lines) + "\n"


def mean_of_sets(per_set: dict[str, dict[str, dict[str, dict[str, float]]]]
                 ) -> dict[str, dict[str, dict[str, float]]]:
    """Per arm and kind group (:data:`GROUPS`), each metric averaged over the sets that
    have that kind (each set weighs the same, whatever its number of questions)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    arms = [a for a in next(iter(per_set.values())) if all(a in s for s in per_set.values())]
    for arm in arms:
        for group, kinds in GROUPS.items():
            rows = [s[arm][k] for s in per_set.values() for k in kinds if k in s[arm]]
            if rows:
                out.setdefault(arm, {})[group] = {
                    m: statistics.fmean(r[m] for r in rows)
                    for m in (*(f"R@{k}" for k in KS), "hit@10")}
    return out


def _mean_markdown(mean: dict[str, dict[str, dict[str, float]]], sets: Sequence[str]) -> str:
    groups = [g for g in GROUPS if any(g in m for m in mean.values())]
    lines = [f"\n## Mean of the sets ({', '.join(sets)}): each metric averaged over the sets "
             "having the kind (single = single-hop/single-fact, multi = multi-hop/multi-session)"]
    for metric in (*(f"R@{k}" for k in KS), "hit@10"):
        lines.append(f"\n**{metric}, mean**\n")
        lines.append("| arm | " + " | ".join(groups) + " |")
        lines.append("|---|" + "---:|" * len(groups))
        for arm, row in mean.items():
            lines.append(f"| {arm} | " + " | ".join(f"{row[g][metric]:.3f}" if g in row else "-"
                                                    for g in groups) + " |")
    return "\n".join(lines) + "\n"


def _margins(summaries: dict[str, dict[str, dict[str, float]]], arm: str) -> str:
    """Per kind, the hybrid arm's R@10 less the better single arm's (negative: behind)."""
    if arm not in summaries or "htm vector" not in summaries:
        return ""
    own = summaries[arm]
    parts = []
    for kind, row in own.items():
        best = max(summaries["htm vector"][kind]["R@10"], summaries["htm fulltext"][kind]["R@10"])
        parts.append(f"{kind} {row['R@10'] - best:+.3f}")
    return f"\n{arm} R@10 minus the better single arm: " + ", ".join(parts) + "\n"


def option_table(per_set: dict[str, dict[str, dict[str, dict[str, float]]]]) -> str:
    """R@10 ± its standard error per arm: LoCoMo overall and per category (when run), then
    each generated set overall (the table of docs/recall-quality.md)."""
    heads: list[tuple[str, str, str]] = []
    if "locomo" in per_set:
        heads += [("locomo", "all", "locomo all")]
        heads += [("locomo", k, k) for k in (*LOCOMO_KINDS, "adversarial")]
    heads += [(name, "all", f"{name} all") for name in (*SETS, "periods") if name in per_set]
    arms = [a for a in next(iter(per_set.values())) if all(a in s for s in per_set.values())]
    lines = ["\n**R@10 ± standard error (over questions), per option**\n",
             "| arm | " + " | ".join(h for _, _, h in heads) + " |",
             "|---|" + "---:|" * len(heads)]
    for arm in arms:
        cells = []
        for name, kind, _ in heads:
            row = per_set[name][arm].get(kind)
            cells.append(f"{row['R@10']:.3f} ± {row['se@10']:.3f}" if row else "-")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


#: Questions about things neither generator ever mentions (for ``--scores``).
NEVER_STORED = ["What is my favourite opera?", "Did {P} ever go skydiving?",
                "Which violin concerto did {P} perform at the conservatory?",
                "How many goats live on {P}'s farm?", "What is {P}'s blood type?",
                "Which submarine did {P} serve on?", "What colour is {P}'s canoe?",
                "Who won the chess tournament {P} organised?", "What is the wifi password?",
                "Which telescope did {P} buy for astronomy?"]
THRESHOLDS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


def score_report(data: dict[str, Any], embedder: CachedEmbedder, conversations: int = 2) -> str:
    """How ``min_score`` separates: per threshold, the share of questions whose evidence
    survives in the top 10 (R@10 with the floor), how many of the top-10 hits that are
    evidence it drops and how many that are not it removes, and the share of never-stored
    questions that come back empty; default hybrid, the first ``conversations``
    conversations."""
    kept: dict[float, list[float]] = {t: [] for t in (0.0, *THRESHOLDS)}
    empty: dict[float, list[float]] = {t: [] for t in THRESHOLDS}
    cut = {t: [0, 0] for t in THRESHOLDS}  # evidence hits dropped, other hits removed
    seen = [0, 0]  # evidence hits, other hits (top 10, no floor)
    with tempfile.TemporaryDirectory(prefix="htm-scores-") as tmp:
        for conv in data["conversations"][:conversations]:
            clock = FrozenClock(datetime.fromisoformat(conv["sessions"][-1]["date"]))
            person = conv["speakers"][0].title()
            with HTM(robot="bench", database_url=str(Path(tmp) / f"{conv['id']}.db"),
                     embedder=embedder, clock=clock, working_memory_tokens=1_000_000) as htm:
                htm.add_many(_turns(conv))
                for q in (q for q in data["questions"] if q["conversation"] == conv["id"]):
                    clock.set(datetime.fromisoformat(q["now"]))
                    hits = htm.recall(q["question"], limit=10)
                    for t in kept:
                        ranked = [h.memory.metadata["turn"] for h in hits if h.score >= t]
                        kept[t].append(recall_at(ranked, q["evidence"], 10))
                    for h in hits:
                        relevant = h.memory.metadata["turn"] in q["evidence"]
                        seen[not relevant] += 1
                        for t in THRESHOLDS:
                            cut[t][not relevant] += h.score < t
                for text in NEVER_STORED:
                    if person == "User":  # the assistant set: the user asks about themself
                        text = text.replace("{P}'s", "my").replace("{P}", "I")
                    hits = htm.recall(text.format(P=person), limit=10)
                    for t in THRESHOLDS:
                        empty[t].append(float(not [h for h in hits if h.score >= t]))
            embedder.save()
    lines = ["\n**min_score** (default hybrid; R@10 of the questions with the floor; of the "
             f"top-10 hits of the answerable questions, {seen[0]} evidence and {seen[1]} "
             "other: how many the floor drops; share of "
             f"{len(NEVER_STORED)} never-stored questions per conversation returning nothing)\n",
             "| min_score | R@10 | evidence hits dropped | other hits removed "
             "| never-stored: empty |", "|---:|---:|---:|---:|---:|",
             f"| none | {statistics.fmean(kept[0.0]):.3f} | 0 | 0 | 0.000 |"]
    lines += [f"| {t} | {statistics.fmean(kept[t]):.3f} | {cut[t][0]} | {cut[t][1]} "
              f"| {statistics.fmean(empty[t]):.3f} |" for t in THRESHOLDS]
    return "\n".join(lines) + "\n"


def cost_report(cost: dict[str, list[dict[str, float]]], turns: int) -> str:
    """What consolidation wrote and what tiered recall read, per question."""
    made, per = cost["consolidation"], cost["tiered"]
    if not per:
        return ""
    scored = statistics.fmean(p["scored"] for p in per)
    text = (f"\n**tiered cost**: {sum(m['digests'] for m in made):.0f} digests written in "
            f"{sum(m['seconds'] for m in made):.1f} s; per question {scored:.1f} "
            f"digests scored and {statistics.fmean(p['turns'] for p in per):.1f} memories ranked "
            f"beneath them (of {turns} memories)\n")
    text += ("\n**context coverage** (share of each question's evidence turns said N days or "
             "more before it that the context tells: the turn itself, or a digest above it "
             "holding its text; mean over questions): " + ", ".join(
                 f"{name[8:]} {statistics.fmean(c['covered'] for c in rows):.3f}"
                 for name, rows in cost.items() if name.startswith("context ") and rows) + "\n")
    for rows in cost.values():
        rows.clear()
    return text


def load_set(name: str, devset: Path = DEVSET, seed: int | None = None,
             locomo: Path | None = None) -> dict[str, Any]:
    """``"dev"`` (the committed chat set), ``"assistant"`` (built from its seed) or
    ``"locomo"`` (the LoCoMo conversations in the folder ``locomo``)."""
    if name == "locomo":
        if locomo is None:
            raise ValueError("the locomo set is read from a folder: pass --locomo DIR")
        from .locomo import load_locomo

        data, repairs = load_locomo(locomo)
        print(f"# LoCoMo from {locomo}: {repairs.summary()}")
        return data
    if name == "dev":
        data: dict[str, Any] = json.loads(devset.read_text(encoding="utf-8"))
        return data
    if name == "periods":
        from .data.periods import build_periods_set

        return build_periods_set()
    from .data.assistant import build_assistant_set

    return build_assistant_set() if seed is None else build_assistant_set(seed)


def experiment_parser(description: str, variants: Sequence[str] = ()
                      ) -> argparse.ArgumentParser:
    """The options of an experiment on these sets (``benchmarks.context_vectors``,
    ``score_fusion``, ``rerank_headroom``): ``--locomo``, ``--set``, ``--embedder``,
    ``--cache``, and ``--variants`` (all by default) when it has ``variants``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--locomo", type=Path, metavar="DIR")
    parser.add_argument("--set", choices=("dev", "assistant", "both", "none"), default="none")
    if variants:
        parser.add_argument("--variants", default=",".join(variants),
                            help="comma-separated: " + ", ".join(variants))
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--cache", type=Path, default=CACHE)
    return parser


def experiment_variants(parser: argparse.ArgumentParser, args: argparse.Namespace,
                        known: Sequence[str]) -> list[str]:
    """The ``--variants`` an experiment's ``args`` name (the parser's error for one not in
    ``known``)."""
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in known]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {list(known)}")
    return variants


def experiment_sets(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The sets an experiment's ``args`` name, LoCoMo first (the parser's error when none)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sets = {"both": ["dev", "assistant"], "none": []}.get(args.set, [args.set])
    if args.locomo:
        sets = ["locomo", *sets]
    if not sets:
        parser.error("nothing to run: give --locomo DIR or --set")
    return sets


def variant_experiment(description: str, known: Sequence[str],
                       run: Callable[[dict[str, Any], CachedEmbedder, Sequence[str]],
                                     tuple[list[dict[str, Any]], dict[str, ArmResult]]],
                       argv: list[str] | None) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """The command line of an experiment with ``known`` variants: ``run(set, embedder,
    variants)`` on each set named, its tables and its rankings paired with the default's;
    return each set's summaries."""
    parser = experiment_parser(description, known)
    args = parser.parse_args(argv)
    variants = experiment_variants(parser, args, known)
    sets = experiment_sets(parser, args)
    embedder = make_embedder(args.embedder, args.cache)
    per_set: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for name in sets:
        t0, computed = time.perf_counter(), embedder.computed
        questions, results = run(load_set(name, locomo=args.locomo), embedder, variants)
        print(f"# set {name!r}: {len(questions)} questions, {embedder.computed - computed} "
              f"texts embedded, {time.perf_counter() - t0:.0f} s")
        print(markdown(questions, results))
        print(paired_markdown(questions, results), flush=True)
        per_set[name] = {arm: summarise(r, questions) for arm, r in results.items()}
    print(option_table(per_set))
    return per_set


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Recall quality on multi-session conversations")
    parser.add_argument("--quick", action="store_true", help="one conversation of each set, a "
                        "quarter of its questions (the CI smoke run)")
    parser.add_argument("--ablation", action="store_true", help="also run hybrid with each option "
                        "changed")
    parser.add_argument("--rows", type=lambda v: [r for r in v.split(",") if r], default=[],
                        metavar="A,B", help="only the default hybrid and the arms whose name "
                        "contains A or B (e.g. 'atypical,fixed')")
    parser.add_argument("--no-baselines", action="store_true", help="skip LangChain and LlamaIndex")
    parser.add_argument("--tiered", action="store_true", help="also consolidate each "
                        "conversation (month, week and day digests) and run tiered recall and "
                        "hybrid with the digests as candidates (after the other arms)")
    parser.add_argument("--set", choices=(*SETS, "periods", "both", "none"), default="both",
                        help="periods: questions about months, weeks and projects "
                        "(benchmarks/data/periods.py); dev: "
                        "the committed chat set; assistant: long user-assistant sessions built "
                        "from a seed (benchmarks/data/assistant.py); both (default) and their "
                        "mean; none: only the LoCoMo set of --locomo")
    parser.add_argument("--locomo", type=Path, metavar="DIR", help="also run the LoCoMo "
                        "conversations in DIR (one <id>.json each, benchmarks/locomo.py)")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--devset", type=Path, default=DEVSET)
    parser.add_argument("--assistant-seed", type=int, help="seed of the assistant set (default 11)")
    parser.add_argument("--cache", type=Path, default=CACHE, help="embedding cache folder")
    parser.add_argument("--json", type=Path, help="also write the summaries here")
    parser.add_argument("--scores", action="store_true", help="also measure how min_score "
                        "separates answerable from never-stored questions")
    parser.add_argument("--pooled-windows", action="store_true", help="MiniLM's window "
                        "vectors pooled from its pass over the whole text "
                        "(LocalEmbedder(pool_windows=True)), not each window embedded alone")
    parser.add_argument("--keep-common-terms", action="store_true", help="ablation: keep query "
                        "words found in most memories (speaker names) in the full-text arm")
    parser.add_argument("--postgres", nargs="?", const="", metavar="URL",
                        help="run htm's arms on PostgreSQL: the server at URL, or a throwaway "
                        "pgserver when no URL is given (one database per conversation)")
    return parser


def _postgres_databases(stack: ExitStack, url: str | None
                        ) -> Callable[[str], AbstractContextManager[str]] | None:
    """With ``--postgres``, a fresh database per conversation on a server that lives as long
    as ``stack``; without it, ``None`` (a SQLite file each)."""
    if url is None:
        return None
    from ._common import fresh_database, postgres_server

    server = stack.enter_context(postgres_server(url or None, prefix="htm-recall-pg-"))

    def database(_conversation: str) -> AbstractContextManager[str]:
        return fresh_database(server, prefix="htm_recall")
    return database


def _run_set(name: str, args: argparse.Namespace, embedder: CachedEmbedder,
             database: Callable[[str], AbstractContextManager[str]] | None
             ) -> dict[str, dict[str, float]]:
    """Evaluate one set, print its tables and reports; return its per-arm summaries."""
    data = load_set(name, args.devset, args.assistant_seed, args.locomo)
    t0 = time.perf_counter()
    computed = embedder.computed
    questions, results = evaluate(data, embedder=embedder, quick=args.quick,
                                  ablation=args.ablation, rows=args.rows,
                                  baselines=not args.no_baselines, database=database,
                                  tiered=args.tiered)
    turns = sum(len(s["turns"]) for c in data["conversations"][: 1 if args.quick else None]
                for s in c["sessions"])
    print(f"# Recall quality, set {name!r}: {len(questions)} questions over {turns} "
          f"memories, embedder {embedder.name} ({embedder.computed - computed} texts "
          f"embedded, rest cached), {time.perf_counter() - t0:.1f} s")
    print(markdown(questions, results))
    print(paired_markdown(questions, results))
    summary = {arm: summarise(r, questions) for arm, r in results.items()}
    print(_margins(summary, "htm hybrid (default)"))
    if args.tiered:
        print(cost_report(COST, turns))
    if args.scores:
        print(score_report(data, embedder, 1 if args.quick else 2))
    return summary


def main(argv: list[str] | None = None) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """Run the benchmark, print markdown tables; return the per-arm summaries of each set
    (keyed by set name) and, with two sets, their mean (key ``"mean"``)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.keep_common_terms:
        from htm_core.store import _common

        _common.COMMON_TERM_SHARE = 2.0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    generated = SETS if args.set == "both" else () if args.set == "none" else (args.set,)
    generated = tuple(dict.fromkeys(generated))
    sets = (*generated, "locomo") if args.locomo else generated
    if not sets:
        parser.error("--set none needs --locomo DIR")
    embedder = make_embedder(args.embedder, args.cache, pooled=args.pooled_windows)
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    with ExitStack() as stack:
        database = _postgres_databases(stack, args.postgres)
        for name in sets:
            out[name] = _run_set(name, args, embedder, database)
    if len(generated) > 1:
        out["mean"] = mean_of_sets({name: out[name] for name in generated})
        print(_mean_markdown(out["mean"], generated))
    print(option_table({name: out[name] for name in sets}))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    sys.stdout.flush()
    return out


if __name__ == "__main__":
    main()
