"""Context vectors: each turn also embedded with its neighbour turn, searched as a window.

::

    python -m benchmarks.context_vectors --locomo /work/shared/data/locomo-dev --set none
    python -m benchmarks.context_vectors --locomo DIR --set both --variants prev,short
    python -m benchmarks.context_vectors --locomo DIR --cache /tmp/emb

An experiment, not a library option. Many chat turns only make sense with the turn before
them ("Yeah, it went great, I talked about my journey" answering "How did the school event
go?"). Each conversation is loaded as :mod:`benchmarks.recall_quality` loads it (one
SQLite store, ``HTM.add_many``, windows for long turns), the default hybrid recall is
run, then each variant gives every memory (or only the short ones) one or two more window
vectors through the store's window API (``set_windows``: the memory's own windows plus
the context vectors), and the same questions are asked again through the real recall
path, where the vector arms score a memory by the best of its whole vector and its
windows. The context text of a turn, in the same session:

- ``prev``: the last sentences of the previous turn (up to :data:`EDGE_WORDS` words),
  a newline, then the first sentences of this turn (up to :data:`EDGE_WORDS` words);
- ``next``: the last sentences of this turn, a newline, the first sentences of the next;
- ``prev-full``: the whole previous turn, a newline, the whole turn (the embedder's 256
  word pieces cut what is longer).

- ``blend``: no text: the turn's own vector plus half its previous turn's, made unit
  (:func:`blended`; the context pulls less than a vector of the two texts).

Variants (``--variants``): ``prev``, ``short`` (``prev`` only for turns under the window
size, which get no windows), ``next``, ``both`` (``prev`` and ``next``), ``prev-full``,
``blend``.
The report is the R@10 table per category with standard errors and the paired
difference of each variant against the default, question by question.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from htm_core import HTM, FrozenClock, RetrievalConfig
from htm_core._windows import DEFAULT_WINDOW_WORDS, _sentences, is_long, windows_for

from .recall_quality import (
    ArmResult,
    CachedEmbedder,
    _turns,
    variant_experiment,
)

__all__ = ["VARIANTS", "context_texts", "main"]

#: Words of a neighbour turn (and of this turn) a context text keeps, in whole sentences.
EDGE_WORDS = DEFAULT_WINDOW_WORDS
#: The variants: name -> (context kinds, only turns without windows).
VARIANTS: dict[str, tuple[tuple[str, ...], bool]] = {
    "prev": (("prev",), False), "short": (("prev",), True), "next": (("next",), False),
    "both": (("prev", "next"), False), "prev-full": (("prev-full",), False),
    "blend": (("blend",), False)}
#: The previous turn's share of a ``blend`` vector.
BLEND = 0.5
BASE = "htm hybrid (default)"
#: The control: the default asked again on the same store after the variants.
AGAIN = "default, asked again"


def _edge(text: str, words: int, *, tail: bool) -> str:
    """The first (or last, ``tail``) whole sentences of ``text`` up to ``words`` words,
    at least one sentence."""
    sentences = _sentences(text)
    if tail:
        sentences = sentences[::-1]
    kept: list[str] = []
    count = 0
    for sentence in sentences:
        size = len(sentence.split())
        if kept and count + size > words:
            break
        kept.append(sentence)
        count += size
    return " ".join(kept[::-1] if tail else kept)


def context_texts(conv: dict[str, Any], kind: str) -> dict[str, str]:
    """Each turn's context text of ``kind`` (``prev``, ``next``, ``prev-full``), by turn
    id; a turn with no such neighbour in its session has none."""
    out: dict[str, str] = {}
    for session in conv["sessions"]:
        said = [(t["id"], f"{t['speaker']}: {t['text']}") for t in session["turns"]]
        for i, (tid, text) in enumerate(said):
            if kind == "prev" and i > 0:
                out[tid] = (f"{_edge(said[i - 1][1], EDGE_WORDS, tail=True)}\n"
                            f"{_edge(text, EDGE_WORDS, tail=False)}")
            elif kind == "prev-full" and i > 0:
                out[tid] = f"{said[i - 1][1]}\n{text}"
            elif kind == "next" and i + 1 < len(said):
                out[tid] = (f"{_edge(text, EDGE_WORDS, tail=True)}\n"
                            f"{_edge(said[i + 1][1], EDGE_WORDS, tail=False)}")
    return out


def blended(conv: dict[str, Any], embedder: CachedEmbedder) -> dict[str, list[float]]:
    """Each turn's own vector plus :data:`BLEND` times its previous turn's (in the same
    session), made unit: no text embedded beyond the turns themselves."""
    out: dict[str, list[float]] = {}
    for session in conv["sessions"]:
        said = [(t["id"], f"{t['speaker']}: {t['text']}") for t in session["turns"]]
        rows = np.asarray(embedder.embed_documents([text for _, text in said]))
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        for i in range(1, len(said)):
            mix = rows[i] + BLEND * rows[i - 1]
            out[said[i][0]] = (mix / np.linalg.norm(mix)).tolist()
    return out


def _ask(facade: HTM, clock: FrozenClock, questions: Sequence[dict[str, Any]],
         result: ArmResult, depth: int) -> None:
    for q in questions:
        clock.set(datetime.fromisoformat(q["now"]))
        hits = facade.recall(q["question"], limit=depth)
        result.ranked[q["id"]] = [h.memory.metadata["turn"] for h in hits]


def _conversation(conv: dict[str, Any], questions: list[dict[str, Any]],
                  embedder: CachedEmbedder, url: str, variants: Sequence[str],
                  depth: int) -> dict[str, ArmResult]:
    """The default, then each variant's context windows set on the same store."""
    clock = FrozenClock(datetime.fromisoformat(conv["sessions"][-1]["date"]))
    results = {name: ArmResult(name) for name in (BASE, *variants, AGAIN)}
    with HTM(robot="bench", database_url=url, embedder=embedder, clock=clock,
             working_memory_tokens=1_000_000, retrieval=RetrievalConfig()) as htm:
        memories = htm.add_many(_turns(conv))
        own = {mid: vectors for mid, _, vectors in windows_for(
            [(m.id, m.content_hash, m.content, m.metadata) for m in memories],
            embedder.embed_documents, DEFAULT_WINDOW_WORDS)}
        _ask(htm, clock, questions, results[BASE], depth)
        kinds = sorted({k for v in variants for k in VARIANTS[v][0]} - {"blend"})
        texts = {k: context_texts(conv, k) for k in kinds}
        vectors = {k: dict(zip(t, embedder.embed_documents(list(t.values())), strict=True))
                   for k, t in texts.items()}
        vectors["blend"] = blended(conv, embedder)
        embedder.save()
        for name in variants:
            ctx_kinds, short_only = VARIANTS[name]
            items = []
            for m in memories:
                turn = m.metadata["turn"]
                extra = [] if short_only and is_long(m.content, DEFAULT_WINDOW_WORDS) else [
                    vectors[k][turn] for k in ctx_kinds if turn in vectors[k]]
                items.append((m.id, m.content_hash, [*own.get(m.id, []), *extra]))
            htm.store.set_windows(items)
            _ask(htm, clock, questions, results[name], depth)
        # the control: the memories' own windows back, the default asked again
        htm.store.set_windows([(m.id, m.content_hash, own.get(m.id, [])) for m in memories])
        _ask(htm, clock, questions, results[AGAIN], depth)
    return results


def run(data: dict[str, Any], embedder: CachedEmbedder, variants: Sequence[str],
        depth: int = 25) -> tuple[list[dict[str, Any]], dict[str, ArmResult]]:
    """Every conversation of ``data``: the questions asked and each arm's rankings."""
    asked: list[dict[str, Any]] = []
    results: dict[str, ArmResult] = {}
    with tempfile.TemporaryDirectory(prefix="htm-context-vectors-") as tmp:
        for conv in data["conversations"]:
            questions = [q for q in data["questions"] if q["conversation"] == conv["id"]]
            asked.extend(questions)
            arms = _conversation(conv, questions, embedder, str(Path(tmp) / f"{conv['id']}.db"),
                                 variants, depth)
            for name, arm in arms.items():
                results.setdefault(name, ArmResult(name)).ranked.update(arm.ranked)
    return asked, results


def main(argv: list[str] | None = None) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """Run the variants on each set, print the tables; return each set's summaries."""
    return variant_experiment("Context vectors as windows (experiment)", list(VARIANTS), run, argv)


if __name__ == "__main__":
    main()
