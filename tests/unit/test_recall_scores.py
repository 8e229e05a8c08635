"""Scores a user can use: every strategy scores hits from 0 to 1 on one scale,
``recall(min_score=...)`` drops weak hits, and ``recall(rerank=...)`` lets a cross-encoder
or a LangChain document compressor reorder the candidates. Both backends, real stores,
the hashing embedder; the rerankers are small deterministic stand-ins for a model (no
model can be downloaded here)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from htm_core import HTM
from htm_core.errors import ValidationError

UNRELATED = [
    "I parked my bicycle next to the central station this morning.",
    "The sourdough starter needs feeding twice a day with rye flour.",
    "Our quarterly tax return is due at the end of April.",
    "The cello teacher wants me to practise scales for twenty minutes.",
    "My sister's wedding is in Porto in September.",
    "The dishwasher makes a grinding noise when it drains.",
    "We booked a campsite near the lake for the long weekend.",
    "The router firmware update broke the guest network.",
    "Grandma's lemon cake recipe uses three eggs and a lot of zest.",
    "The dentist appointment moved to Thursday at nine.",
    "I am reading a history of the Hanseatic League.",
    "The kids want a trampoline for the garden.",
]
STRATEGIES = ("hybrid", "vector", "fulltext")


def _store(make: Callable[..., HTM]) -> HTM:
    htm = make()
    start = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)
    # Two hours apart: no memory is another's neighbor.
    htm.add_many([{"content": text, "key": f"m{i}", "created_at": start + timedelta(hours=2 * i)}
                  for i, text in enumerate(UNRELATED)])
    return htm


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_scores_are_relevance_from_zero_to_one_never_increasing(
        htm_factory: Callable[..., HTM], strategy: str) -> None:
    htm = _store(htm_factory)
    for query in ("Where did I park the bicycle?", "lemon cake recipe", "wedding in Porto",
                  "anything about the dentist"):
        hits = htm.recall(query, strategy=strategy, limit=12)
        assert hits, (strategy, query)
        scores = [h.score for h in hits]
        assert all(0.0 <= s <= 1.0 for s in scores), scores
        assert scores == sorted(scores, reverse=True), scores
    # Every word of the query in the memory: full coverage, 0.8 and more with similarity
    # (also for the vector strategy: a memory's evidence is its similarity and coverage).
    top = htm.recall("lemon cake recipe", strategy=strategy, limit=3)[0]
    assert top.memory.key == "m8"
    assert 0.8 <= top.score < 1.0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_min_score_leaves_a_question_about_nothing_stored_empty(
        htm_factory: Callable[..., HTM], strategy: str) -> None:
    htm = _store(htm_factory)
    nonsense = "zorblax quimmity vexillograph"
    if strategy != "fulltext":  # without a floor the vector arms always return something
        assert htm.recall(nonsense, strategy=strategy, limit=5)
    assert htm.recall(nonsense, strategy=strategy, limit=5, min_score=0.3) == []
    assert htm.recall("How do I fix the lawnmower carburettor?", strategy=strategy, limit=5,
                      min_score=0.3) == []
    related = htm.recall("Where did I leave my bicycle?", strategy=strategy, limit=5,
                         min_score=0.3)
    assert [h.memory.key for h in related][:1] == ["m0"]
    assert all(h.score >= 0.3 for h in related)


def test_min_score_zero_and_none_keep_every_hit(htm_factory: Callable[..., HTM]) -> None:
    htm = _store(htm_factory)
    every = [h.memory.key for h in htm.recall("garden trampoline", limit=12)]
    assert [h.memory.key for h in htm.recall("garden trampoline", limit=12, min_score=0)] == every
    assert [h.memory.key for h in htm.recall("garden trampoline", limit=12,
                                             min_score=None)] == every


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), float("inf"), "0.3", True, [0.3]])
def test_min_score_rejects_what_is_not_a_relevance(htm_factory: Callable[..., HTM],
                                                   bad: Any) -> None:
    htm = _store(htm_factory)
    with pytest.raises(ValidationError, match="min_score must be a number from 0 to 1"):
        htm.recall("bicycle", min_score=bad)


class LengthReranker:
    """A deterministic cross-encoder stand-in: longer texts score higher (as logits)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, list[str]]] = []

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        self.seen.append((query, list(texts)))
        return [len(t) / 10.0 for t in texts]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_callable_reranker_reorders_the_candidates(htm_factory: Callable[..., HTM],
                                                     strategy: str) -> None:
    htm = _store(htm_factory)
    reranker = LengthReranker()
    query = "weekend lake garden wedding cake"
    hits = htm.recall(query, strategy=strategy, limit=3, rerank=reranker)
    (seen, texts), = reranker.seen
    assert seen == query
    assert len(texts) > 3  # it saw more candidates than the limit
    assert [h.memory.content for h in hits] == sorted(texts, key=len, reverse=True)[:3]
    # Logits (outside 0..1) are squashed: the scale and its order are kept.
    assert all(0.5 < h.score < 1.0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert htm.recall(query, strategy=strategy, limit=3, rerank=reranker,
                      min_score=1.0) == []


def test_reranker_scores_in_range_are_kept_and_min_score_applies(
        htm_factory: Callable[..., HTM]) -> None:
    htm = _store(htm_factory)

    def probability(query: str, texts: Sequence[str]) -> list[float]:
        return [0.9 if "bicycle" in t else 0.1 for t in texts]

    hits = htm.recall("where did I go this morning", limit=5, rerank=probability)
    assert hits[0].memory.key == "m0" and hits[0].score == pytest.approx(0.9)
    only = htm.recall("where did I go this morning", limit=5, rerank=probability, min_score=0.5)
    assert [h.memory.key for h in only] == ["m0"]


class ReversingCompressor:
    """A document compressor by duck typing (no langchain): keeps the last three of what it
    is given, in reverse order, copying them with a relevance score."""

    def compress_documents(self, documents: Sequence[Any], query: str,
                           callbacks: Any = None) -> list[Any]:
        kept = list(documents)[::-1][:3]
        return [type(d)(d.page_content, {**d.metadata, "relevance_score": 3.0 - i})
                for i, d in enumerate(kept)]


def test_a_document_compressor_reranks_and_filters(htm_factory: Callable[..., HTM]) -> None:
    htm = _store(htm_factory)
    before = [h.memory.key for h in htm.recall("the weekend", limit=20)]
    hits = htm.recall("the weekend", limit=5, rerank=ReversingCompressor())
    assert [h.memory.key for h in hits] == before[::-1][:3]
    assert [round(h.score, 4) for h in hits] == [round(1 / (1 + 2.718281828459045 ** -s), 4)
                                                 for s in (3.0, 2.0, 1.0)]


def test_a_langchain_document_compressor_works(htm_factory: Callable[..., HTM]) -> None:
    langchain_core = pytest.importorskip("langchain_core")
    from langchain_core.documents import BaseDocumentCompressor, Document

    class KeywordReranker(BaseDocumentCompressor):
        """Keeps the documents holding the query's last word, like a cross-encoder
        reranker with ``top_n`` would keep the best."""

        def compress_documents(self, documents: Sequence[Any], query: str,
                               callbacks: Any = None) -> list[Document]:
            word = query.split()[-1]
            return [Document(page_content=d.page_content,
                             metadata={**d.metadata, "relevance_score": 0.8})
                    for d in documents if word in d.page_content]

    assert langchain_core
    htm = _store(htm_factory)
    hits = htm.recall("tell me about the cello", limit=5, rerank=KeywordReranker())
    assert [h.memory.key for h in hits] == ["m3"]
    assert hits[0].score == pytest.approx(0.8)


@pytest.mark.parametrize(("bad", "message"), [
    (42, "rerank must be a callable"),
    (lambda q, texts: [1.0], "scores for"),
    (lambda q, texts: [float("nan")] * len(texts), "finite number"),
    (lambda q, texts: ["high"] * len(texts), "finite number"),
])
def test_bad_rerankers_are_refused(htm_factory: Callable[..., HTM], bad: Any,
                                   message: str) -> None:
    htm = _store(htm_factory)
    with pytest.raises(ValidationError, match=message):
        htm.recall("bicycle", rerank=bad)
