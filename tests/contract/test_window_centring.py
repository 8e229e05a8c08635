"""Windows centred on their own mean direction (issue 24, boilerplate windows).

Hybrid recall centres the query on the store's mean direction of whole memories. The
windows of long memories have a mean of their own: boilerplate that closes many replies
("let me know how it goes...") is typical of windows, not of memories, so the memories'
mean does not push it down. ``RetrievalConfig(window_centring=True)`` scores the windows
with the query centred on the windows' own mean instead, on every backend (off by default:
it cost the real LoCoMo conversations 0.011 R@10 and gained the generated sets nothing).
"""

from __future__ import annotations

import numpy as np

from htm_core import HTM, RetrievalConfig
from htm_core._windows import split_windows
from htm_core.recall import hybrid_arms
from htm_core.recall.centring import centre
from htm_core.store import SearchFilters
from htm_core.store.base import ArmQuery
from tests.unit.test_windows import BagOfWords

BOILERPLATE = "Let me know how it goes and paste the error message here if something fails."
TOPICS = ["The build uses a cache for the compiled assets of every package in the repo.",
          "Rename the column first and then migrate the table in a second deploy step.",
          "A retry with backoff keeps the worker from hammering the queue after an outage.",
          "Pin the version of the driver so the container image stays reproducible later.",
          "Split the handler in two so each part can be tested without the network stack."]
SMALL_TALK = ["Thanks a lot!", "Sounds good to me.", "Okay, will try.", "Great, cheers.",
              "Sure thing."]
EVIDENCE = ("I am planning a trip and want to know about places to visit in Lisbon this "
            "spring. We have four days there and like food markets and old trams.")
#: Shares "know how ... goes" with the boilerplate and "places trip" with the evidence.
QUERY = "know how places trip goes"
#: The centred vector arm alone decides the order.
VECTOR_ONLY = {"weights": {"vector": 1.0, "fulltext": 0.0}, "neighbors": 0,
               "time_boost": False, "duplicates": None}


def _replies() -> list[str]:
    return [f"{t} {t.replace('the', 'a')} {BOILERPLATE}" for t in TOPICS]


def _fill(htm: HTM) -> None:
    htm.add_many([{"content": r, "key": f"reply{i}"} for i, r in enumerate(_replies())])
    # Many short turns: the memories' mean is small talk, the windows' is boilerplate.
    htm.add_many([{"content": s, "key": f"s{i}"} for i, s in enumerate(SMALL_TALK * 8)])
    htm.add(EVIDENCE, key="evidence")


def _keys(htm: HTM, config: RetrievalConfig) -> list[str]:
    with HTM(store=htm.store, embedder=BagOfWords(), retrieval=config) as view:
        return [h.memory.key or "" for h in view.recall(QUERY, limit=6)]


def test_boilerplate_windows_give_way_when_windows_are_centred_on_their_own_mean(htm_factory):
    htm = htm_factory(embedder=BagOfWords())
    _fill(htm)
    assert not RetrievalConfig().window_centring
    on = _keys(htm, RetrievalConfig(**VECTOR_ONLY, window_centring=True))  # type: ignore[arg-type]
    off = _keys(htm, RetrievalConfig(**VECTOR_ONLY, window_centring=False))  # type: ignore[arg-type]
    assert on[0] == "evidence"
    # Centred on the memories' mean, every boilerplate reply passes the evidence.
    assert off[:5] == [f"reply{i}" for i in range(5)] and off[5] == "evidence"
    assert _keys(htm, RetrievalConfig(**VECTOR_ONLY)) == off  # type: ignore[arg-type]


def _window_mean() -> np.ndarray:
    texts = [w for t in [*_replies(), EVIDENCE] for w in split_windows(t, 20)]
    units = [v / np.linalg.norm(v) for v in
             (np.asarray(x, dtype=np.float64) for x in BagOfWords().embed_documents(texts))]
    total = np.sum(units, axis=0)
    return total / np.linalg.norm(total)


def test_the_store_scores_windows_with_the_query_recentred_on_their_mean(htm_factory):
    htm = htm_factory(embedder=BagOfWords())
    _fill(htm)
    seen: list[np.ndarray] = []
    target = np.asarray(BagOfWords().embed_query("Lisbon food markets trams"), np.float64)

    def recentre(mean: np.ndarray) -> np.ndarray:
        seen.append(np.asarray(mean, dtype=np.float64))
        return target

    # A query like nothing stored: every score comes from the windows' recentred query.
    nothing = BagOfWords().embed_query("zebra")
    arm = ArmQuery(vector=nothing, limit=5, filters=SearchFilters(), recentre=recentre)
    (hits,) = htm.store.search_arms([arm])
    assert seen and np.allclose(seen[0], _window_mean(), atol=1e-5)
    evidence = htm.get("evidence")
    assert evidence is not None and hits[0][0] == evidence.id
    unit = target / np.linalg.norm(target)
    best = max(float(unit @ (np.asarray(v) / np.linalg.norm(v))) for v in
               BagOfWords().embed_documents(split_windows(EVIDENCE, 20)))
    assert abs(hits[0][1] - best) < 1e-4
    # A None answer, or no recentre: the windows are scored with the arm's own vector.
    plain = ArmQuery(vector=nothing, limit=5, filters=SearchFilters())
    declined = ArmQuery(vector=nothing, limit=5, filters=SearchFilters(),
                        recentre=lambda mean: None)
    assert htm.store.search_arms([declined]) == htm.store.search_arms([plain])


def test_hybrid_arms_recentre_only_centred_window_searches(htm_factory):
    htm = htm_factory(embedder=BagOfWords())
    _fill(htm)
    given = BagOfWords().embed_query(QUERY)
    config = RetrievalConfig(window_centring=True)

    def arms(cfg: RetrievalConfig) -> dict[str, ArmQuery]:
        return hybrid_arms(htm.store, QUERY, lambda: given, limit=5, filters=SearchFilters(),
                           config=cfg)[0]

    recentre = arms(config)["vector"].recentre
    assert recentre is not None and arms(config)["fulltext"].recentre is None
    mean = _window_mean()
    expected = centre(np.asarray(given, np.float64), mean, config.typical_penalty)
    assert expected is not None and np.allclose(recentre(mean), expected)
    assert arms(config.with_options(window_centring=False))["vector"].recentre is None
    assert arms(config.with_options(centering=False))["vector"].recentre is None
