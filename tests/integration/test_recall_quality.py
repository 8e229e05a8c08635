"""Recall quality: the dev-set generator, the benchmark's metrics and smoke run,
and the hybrid-retrieval additions (weighted RRF, time expressions, neighbor context,
common full-text terms). Everything runs on real SQLite files with the hashing embedder;
quality thresholds are not asserted here (see docs/recall-quality.md for the numbers).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from benchmarks import locomo
from benchmarks import recall_quality as rq
from benchmarks.data import assistant, generate
from htm_core import HTM, FrozenClock, HashingEmbedder, RetrievalConfig
from htm_core.errors import ValidationError
from htm_core.recall import query_timeframe, reciprocal_rank_fusion, search
from htm_core.store import SearchFilters
from htm_core.store._common import informative_terms

UTC = timezone.utc

# -- generator -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_devset() -> dict[str, Any]:
    return generate.build_devset(seed=3, conversations=2, sessions=8, turns_per_session=14,
                                 per_kind=4)


def _texts(devset: dict[str, Any]) -> dict[str, tuple[str, str, datetime]]:
    return {t["id"]: (f"{t['speaker']}: {t['text']}", s["id"], datetime.fromisoformat(s["date"]))
            for c in devset["conversations"] for s in c["sessions"] for t in s["turns"]}


def test_generator_is_deterministic_and_matches_the_committed_devset() -> None:
    assert generate.build_devset(seed=3, conversations=1) == generate.build_devset(
        seed=3, conversations=1)
    assert generate.build_devset(seed=3, conversations=1) != generate.build_devset(
        seed=4, conversations=1)
    committed = json.loads(generate.DEFAULT_OUT.read_text(encoding="utf-8"))
    assert committed == generate.build_devset(), (
        "benchmarks/data/devset.json is stale: run python -m benchmarks.data.generate")


def test_generated_questions_are_labelled_consistently(small_devset: dict[str, Any]) -> None:
    texts = _texts(small_devset)
    kinds = {q["kind"] for q in small_devset["questions"]}
    assert kinds == set(rq.KINDS)
    for q in small_devset["questions"]:
        assert q["evidence"] and all(e in texts for e in q["evidence"]), q
        assert all(e.startswith(q["conversation"] + "-") for e in q["evidence"])
        now = datetime.fromisoformat(q["now"])
        assert all(texts[e][2] <= now for e in q["evidence"]), "evidence after the question"
        if q["kind"] == "multi-hop":
            assert len({texts[e][1] for e in q["evidence"]}) >= 2, q
        if q["kind"] == "paraphrased":
            conv = next(c for c in small_devset["conversations"] if c["id"] == q["conversation"])
            assert not generate.shares_keywords(q["question"], [texts[e][0] for e in q["evidence"]],
                                                conv["speakers"]), q
        if "timeframe" in q:
            window = query_timeframe(q["question"], now)
            assert window is not None and window.phrase == q["timeframe"]
            assert all(window.start <= texts[e][2] < window.end for e in q["evidence"]), q


def test_shares_keywords_compares_stems_and_ignores_names() -> None:
    assert generate.shares_keywords("Where is the household?", ["Ana: my house"], [])
    assert not generate.shares_keywords("Which vehicle did Ana get?", ["Ana: I bought a car"],
                                        ["Ana"])


@pytest.fixture(scope="module")
def assistant_set() -> dict[str, Any]:
    return assistant.build_assistant_set(seed=5, users=2, sessions=30)


def test_assistant_set_is_deterministic_and_another_kind_of_conversation(
        assistant_set: dict[str, Any]) -> None:
    assert assistant.build_assistant_set(seed=5, users=2, sessions=30) == assistant_set
    assert assistant.build_assistant_set(seed=6, users=2, sessions=30) != assistant_set
    turns = [t for c in assistant_set["conversations"] for s in c["sessions"] for t in s["turns"]]
    assert {t["speaker"] for t in turns} == {"user", "assistant"}
    words = sorted(len(t["text"].split()) for t in turns)
    assert words[len(words) // 2] >= 80, "messages are long (hundreds of tokens)"
    # User and assistant alternate within each session.
    for c in assistant_set["conversations"]:
        for s in c["sessions"]:
            assert [t["speaker"] for t in s["turns"]] == ["user", "assistant"] * (
                len(s["turns"]) // 2)


def test_assistant_questions_are_labelled_consistently(assistant_set: dict[str, Any]) -> None:
    texts = _texts(assistant_set)
    assert {q["kind"] for q in assistant_set["questions"]} == set(assistant.KINDS)
    for q in assistant_set["questions"]:
        assert q["evidence"] and all(e in texts for e in q["evidence"]), q
        assert all(e.startswith(q["conversation"] + "-") for e in q["evidence"])
        now = datetime.fromisoformat(q["now"])
        assert all(texts[e][2] <= now for e in q["evidence"]), "evidence after the question"
        assert all(texts[e][0].startswith("user: ") for e in q["evidence"]), q
        if q["kind"] == "multi-session":
            assert len({texts[e][1] for e in q["evidence"]}) >= 2, q
        if q["kind"] == "paraphrased":
            assert not generate.shares_keywords(q["question"], [texts[e][0] for e in q["evidence"]],
                                                ["user"]), q
        if "timeframe" in q:
            window = query_timeframe(q["question"], now)
            assert window is not None and window.phrase == q["timeframe"]
            assert all(window.start <= texts[e][2] < window.end for e in q["evidence"]), q
    # A latest-value question's evidence is the newest statement of the value: the new
    # value appears in it, and no later message of the user states another one.
    homes = [q for q in assistant_set["questions"] if q["question"] == "Which city do I live in now?"]
    for q in homes:
        (evidence,) = q["evidence"]
        assert "moved" in texts[evidence][0] or "rent" in texts[evidence][0]


# -- metrics and the benchmark script ------------------------------------------------


def test_recall_and_hit_metrics() -> None:
    assert rq.recall_at(["a", "b", "c"], ["c", "z"], 2) == 0.0
    assert rq.recall_at(["a", "b", "c"], ["c", "z"], 3) == 0.5
    assert rq.hit_at(["a", "b"], ["b"], 2) == 1.0
    assert rq.hit_at(["a", "b"], ["b"], 1) == 0.0
    arm = rq.ArmResult("x", ranked={"q1": ["a", "b"], "q2": ["c"]})
    questions = [{"id": "q1", "kind": "single-hop", "evidence": ["b"]},
                 {"id": "q2", "kind": "temporal", "evidence": ["c", "d"]}]
    summary = rq.summarise(arm, questions)
    assert summary["single-hop"]["R@5"] == 1.0
    assert summary["temporal"]["R@5"] == 0.5
    assert summary["all"]["R@5"] == 0.75
    assert summary["all"]["hit@10"] == 1.0
    assert summary["all"]["n"] == 2
    assert "multi-hop" not in summary


def test_benchmark_quick_run_end_to_end(tmp_path: Path, small_devset: dict[str, Any],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The CI smoke run: ``--quick`` on both sets, hashing embedder."""
    devset = tmp_path / "devset.json"
    devset.write_text(json.dumps(small_devset), encoding="utf-8")
    out = tmp_path / "summary.json"
    result = rq.main(["--quick", "--embedder", "hashing", "--devset", str(devset),
                      "--json", str(out)])
    printed = capsys.readouterr().out
    arms = {"htm vector", "htm fulltext", "plain RRF", "htm hybrid (default)",
            "LangChain InMemoryVectorStore", "LlamaIndex VectorStoreIndex"}
    assert set(result) == {"dev", "assistant", "mean"}
    assert json.loads(out.read_text(encoding="utf-8")) == result
    asked = [q for kind in rq.ALL_KINDS for q in small_devset["questions"]
             if q["conversation"] == "c1" and q["kind"] == kind][::4]
    for name in ("dev", "assistant"):
        summaries = result[name]
        assert set(summaries) == arms
        for s in summaries.values():
            for row in s.values():
                assert 0.0 <= row["R@5"] <= row["R@10"] <= row["R@25"] <= 1.0
                assert row["R@10"] <= row["hit@10"] <= 1.0
        if name == "dev":
            # The same embeddings: LangChain's exact search ranks like htm's vector arm
            # (short turns: no windows; the assistant set's long messages have them).
            assert summaries["LangChain InMemoryVectorStore"]["all"]["R@25"] == pytest.approx(
                summaries["htm vector"]["all"]["R@25"])
    assert all(s["all"]["n"] == len(asked) for s in result["dev"].values())
    assert set(result["assistant"]["htm vector"]) == {*assistant.KINDS, "all"}
    # The mean weighs each set equally; "multi" joins multi-hop and multi-session.
    dev, other = result["dev"]["htm fulltext"], result["assistant"]["htm fulltext"]
    mean = result["mean"]["htm fulltext"]
    assert mean["all"]["R@10"] == pytest.approx((dev["all"]["R@10"] + other["all"]["R@10"]) / 2)
    assert mean["multi"]["R@10"] == pytest.approx(
        (dev["multi-hop"]["R@10"] + other["multi-session"]["R@10"]) / 2)
    assert mean["latest-value"]["R@10"] == pytest.approx(other["latest-value"]["R@10"])
    for name in arms:
        assert f"| {name} |" in printed
    assert "**R@10**" in printed and "recall latency" in printed
    assert "**R@10, mean**" in printed and "minus the better single arm" in printed


def test_benchmark_quick_run_on_postgres(tmp_path: Path, small_devset: dict[str, Any],
                                        postgres_server_url: str) -> None:
    """``--postgres URL`` runs htm's arms on that server, one fresh database per
    conversation, and ranks like the SQLite run on the same (hashing) vectors."""
    devset = tmp_path / "devset.json"
    devset.write_text(json.dumps(small_devset), encoding="utf-8")
    common = ["--quick", "--embedder", "hashing", "--devset", str(devset), "--no-baselines",
              "--set", "dev"]
    on_postgres = rq.main([*common, "--postgres", postgres_server_url])["dev"]
    on_sqlite = rq.main(common)["dev"]
    assert set(on_postgres) == {"htm vector", "htm fulltext", "plain RRF", "htm hybrid (default)"}
    assert on_postgres["htm vector"]["all"]["R@25"] == pytest.approx(
        on_sqlite["htm vector"]["all"]["R@25"], abs=0.1)


# -- LoCoMo conversations (a made-up one in the same layout: the real files stay outside) --


def _made_up_locomo() -> dict[str, Any]:
    """Two people, three dated sessions (one without turns), an image shared, and the
    evidence quirks of the real files: a missing ``D`` digit, a leading zero, two ids in
    one string, a bare ``D``, a turn that does not exist, a question with no evidence."""
    def turn(speaker: str, dia: str, text: str, **extra: Any) -> dict[str, Any]:
        return {"speaker": speaker, "dia_id": dia, "text": text, **extra}

    return {
        "speaker_a": "Ada", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [turn("Ada", "D1:1", "I adopted a beagle called Biscuit!"),
                      turn("Bo", "D1:2", "Look at my new bike.", img_url=["x"],
                           blip_caption="a photo of a red bicycle", query="bike")],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [],
        "session_3_date_time": "7:30 pm on 1 June, 2023",
        "session_3": [turn("Bo", "D3:1", "I ran my first marathon in Lisbon."),
                      turn("Ada", "D3:2", "Biscuit chewed my running shoes.")],
        "session_4_date_time": "9:00 am on 2 July, 2023",
        "events_session_1": [],
        "qa": [
            {"question": "What did Ada name the beagle?", "answer": "Biscuit",
             "evidence": ["D1:1"], "category": 4},
            {"question": "When did Bo run a marathon?", "answer": "June 2023",
             "evidence": ["D:3:1"], "category": 2},
            {"question": "What pets and sports?", "answer": "x",
             "evidence": ["D1:01; D3:1", "D3:9"], "category": 1},
            {"question": "Would Ada like dogs?", "answer": "yes", "evidence": [], "category": 3},
            {"question": "What did Bo name the beagle?", "adversarial_answer": "Biscuit",
             "evidence": ["D1:1", "D"], "category": 5},
            {"question": "What is Bo's bike like?", "answer": "red",
             "evidence": ["D1:2"], "category": 3},
        ],
    }


@pytest.fixture
def locomo_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "locomo"
    folder.mkdir()
    (folder / "7.json").write_text(json.dumps(_made_up_locomo()), encoding="utf-8")
    return folder


def test_locomo_loader_reads_turns_as_the_held_out_measurement_does(locomo_dir: Path) -> None:
    data, repairs = locomo.load_locomo(locomo_dir)
    (conv,) = data["conversations"]
    assert conv["speakers"] == ["Ada", "Bo"]
    assert [s["id"] for s in conv["sessions"]] == ["S1", "S3"]  # S2 has no turns
    items = rq._turns(conv)
    assert [i["key"] for i in items] == ["D1:1", "D1:2", "D3:1", "D3:2"]
    assert items[1]["content"] == ("Bo: Look at my new bike. [shares image: a photo of a red "
                                   "bicycle]")
    # Every turn of a session at the session's date and time.
    assert [i["created_at"] for i in items] == [datetime(2023, 5, 8, 13, 56)] * 2 + [
        datetime(2023, 6, 1, 19, 30)] * 2
    by_question = {q["question"]: q for q in data["questions"]}
    assert by_question["When did Bo run a marathon?"]["evidence"] == ["D3:1"]
    assert by_question["What pets and sports?"]["evidence"] == ["D1:1", "D3:1"]
    assert by_question["What did Bo name the beagle?"]["evidence"] == ["D1:1"]
    assert [q["kind"] for q in data["questions"]] == ["single-hop", "temporal", "multi-hop",
                                                      "adversarial", "open-domain"]
    assert {q["now"] for q in data["questions"]} == {"2023-06-01T19:30:00"}
    assert repairs.repaired == {"7": ["D:3:1", "D1:01; D3:1"]}
    assert repairs.dropped == {"7": ["D3:9", "D"]}
    assert repairs.no_evidence == {"7": 1}
    assert repairs.summary() == ("2 malformed evidence ids repaired, 2 dropped (no such "
                                 "turn, or no id), 1 questions without evidence skipped")


def test_locomo_loader_needs_conversation_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no LoCoMo conversation"):
        locomo.load_locomo(tmp_path)


def test_adversarial_questions_are_reported_apart() -> None:
    arm = rq.ArmResult("x", ranked={"q1": ["a"], "q2": ["b"], "q3": ["z"]})
    questions = [{"id": "q1", "kind": "single-hop", "evidence": ["a"]},
                 {"id": "q2", "kind": "temporal", "evidence": ["z"]},
                 {"id": "q3", "kind": "adversarial", "evidence": ["z"]}]
    summary = rq.summarise(arm, questions)
    assert summary["all"]["n"] == 2 and summary["all"]["R@10"] == 0.5
    assert summary["adversarial"]["R@10"] == 1.0
    assert summary["all"]["se@10"] == pytest.approx(0.5)  # stdev 0.707 over sqrt(2)


def test_benchmark_runs_the_locomo_set_from_a_folder(locomo_dir: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    result = rq.main(["--set", "none", "--locomo", str(locomo_dir), "--embedder", "hashing",
                      "--no-baselines"])
    printed = capsys.readouterr().out
    assert set(result) == {"locomo"}
    hybrid = result["locomo"]["htm hybrid (default)"]
    assert hybrid["all"]["n"] == 4 and hybrid["adversarial"]["n"] == 1
    # Four turns: every evidence turn is in the top 10.
    assert hybrid["all"]["R@10"] == 1.0
    assert "1 questions without evidence skipped" in printed
    assert "| htm hybrid (default) | 1.000 ± 0.000 |" in printed


def test_rows_keep_the_default_and_the_named_ablation_rows(locomo_dir: Path) -> None:
    """``--rows`` narrows ``--ablation`` to the default and the rows naming one of its parts."""
    rows = ["no atypical", "fixed full-text"]
    assert list(rq.htm_configs(True, rows)) == [
        "htm hybrid (default)", "hybrid, no atypical time arm", "hybrid, fixed full-text weight",
        "hybrid, fixed full-text weight, no atypical time arm"]
    assert len(rq.htm_configs(True)) > 20  # no rows: every arm
    result = rq.main(["--set", "none", "--locomo", str(locomo_dir), "--embedder", "hashing",
                      "--no-baselines", "--ablation", "--rows", ",".join(rows)])
    assert list(result["locomo"]) == list(rq.htm_configs(True, rows))


def test_session_reranks_reorder_by_session() -> None:
    from benchmarks import session_rerank as sr

    hits = [("a1", "A", 1.0), ("a2", "A", 0.95), ("b1", "B", 0.9), ("c1", "C", 0.5)]
    # Diversity: a2 (0.95 × 0.9 = 0.855) falls below b1 (0.9), not below c1.
    assert [h[0] for h in sr.diversify(hits, 0.9, 1)] == ["a1", "b1", "a2", "c1"]
    assert sr.diversify(hits, 0.9, 2) == hits  # two hits of a session go free
    # Expansion over the first 3 (floor 0.9): a2 borrows 0.5 × (1.0 - 0.9) from a1.
    expanded = dict((t, s) for t, _, s in sr.expand(hits, 0.5, total=False, pool=3))
    assert expanded["a2"] == pytest.approx(1.0) and expanded["b1"] == 0.9
    assert expanded["c1"] == 0.5


def test_cached_embedder_reuses_vectors_across_instances(tmp_path: Path) -> None:
    calls: list[int] = []

    class Counting(HashingEmbedder):
        def embed_documents(self, texts: Any) -> list[list[float]]:
            calls.append(len(texts))
            return super().embed_documents(texts)

    first = rq.CachedEmbedder(Counting, "counting", tmp_path)
    vectors = first.embed_documents(["a b", "c d", "a b"])
    first.save()
    second = rq.CachedEmbedder(Counting, "counting", tmp_path)
    assert second.embed_documents(["c d", "a b"]) == [vectors[1], vectors[0]]
    assert calls == [2]
    assert second.computed == 0


# -- retrieval -----------------------------------------------------------------------


def test_weighted_rrf_changes_the_order() -> None:
    arms = {"vector": [1, 2], "fulltext": [2, 1]}
    assert [r.id for r in reciprocal_rank_fusion(arms)] == [1, 2]
    weighted = reciprocal_rank_fusion(arms, 60, {"vector": 1.0, "fulltext": 2.0})
    assert [r.id for r in weighted] == [2, 1]
    assert weighted[0].score == pytest.approx(1 / 62 + 2 / 61)


@pytest.mark.parametrize(("query", "now", "start", "end"), [
    ("What did Ana do last May?", datetime(2024, 3, 1, tzinfo=UTC), "2023-05-01", "2023-06-01"),
    ("What did Ana do last May?", datetime(2024, 7, 1, tzinfo=UTC), "2024-05-01", "2024-06-01"),
    ("what happened in june 2023", datetime(2025, 1, 1, tzinfo=UTC), "2023-06-01", "2023-07-01"),
    ("anything in March?", datetime(2024, 3, 20, tzinfo=UTC), "2024-03-01", "2024-04-01"),
    ("What was Bo up to last month?", datetime(2024, 1, 10, tzinfo=UTC), "2023-12-01",
     "2024-01-01"),
    ("trip last summer", datetime(2024, 2, 1, tzinfo=UTC), "2023-06-01", "2023-09-01"),
    ("what did we do in 2022", datetime(2024, 2, 1, tzinfo=UTC), "2022-01-01", "2023-01-01"),
    ("the talk yesterday", datetime(2024, 2, 10, 9, tzinfo=UTC), "2024-02-09", "2024-02-10"),
])
def test_query_timeframe_resolves_phrases(query: str, now: datetime, start: str, end: str) -> None:
    found = query_timeframe(query, now)
    assert found is not None
    assert (found.start.date().isoformat(), found.end.date().isoformat()) == (start, end)
    assert found.phrase.lower() in query.lower()


def test_query_timeframe_relative_ago_and_no_expression() -> None:
    now = datetime(2024, 5, 15, 12, tzinfo=UTC)
    found = query_timeframe("the dinner two weeks ago", now)
    assert found is not None
    assert found.start < now - timedelta(weeks=2) < found.end <= now
    assert query_timeframe("May I ask what Ana adopted?", now) is None
    assert query_timeframe("What is the name of Ana's dog?", now) is None


def test_retrieval_config_rejects_bad_values() -> None:
    with pytest.raises(ValidationError, match="neighbors"):
        RetrievalConfig(neighbors=-1)
    with pytest.raises(ValidationError, match="weights"):
        RetrievalConfig(weights={"vector": -1.0})
    with pytest.raises(ValidationError, match="candidates"):
        RetrievalConfig(candidates=0)
    assert RetrievalConfig().with_options(neighbors=0).neighbors == 0


def test_informative_terms_drops_common_words_only_when_something_is_left() -> None:
    counts = {"ana": 900, "vehicle": 2, "the": 950}
    assert informative_terms(["ana", "vehicle"], 1000, lambda t, cap: counts[t]) == ["vehicle"]
    assert informative_terms(["ana", "the"], 1000, lambda t, cap: counts[t]) == ["ana", "the"]
    assert informative_terms(["ana"], 1000, lambda t, cap: counts[t]) == ["ana"]
    assert informative_terms(["ana", "vehicle"], 50, lambda t, cap: counts[t]) == ["ana", "vehicle"]


FILLER = ["How have you been?", "Work is busy.", "The weather is awful.", "Talk soon!",
          "Same here, honestly.", "We ordered pizza again.", "Traffic was terrible today.",
          "My phone cracked again.", "Good night!", "I need more coffee."]


def _chat(htm: HTM, start: datetime, lines: list[str], *, prefix: str,
          every: timedelta = timedelta(minutes=1)) -> list[str]:
    items = [{"content": line, "key": f"{prefix}{i}", "created_at": start + i * every}
             for i, line in enumerate(lines)]
    htm.add_many(items)
    return [item["key"] for item in items]


def test_fulltext_ignores_a_name_found_in_most_memories(sqlite_url: str, clock: FrozenClock) -> None:
    with HTM(database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock) as htm:
        start = datetime(2024, 1, 1, tzinfo=UTC)
        _chat(htm, start, [f"Ana: {FILLER[i % 10]} ({i})" for i in range(240)], prefix="f")
        _chat(htm, start + timedelta(days=1), ["Bo: I bought a used vehicle"], prefix="v")
        hits = htm.recall("Ana vehicle", strategy="fulltext", limit=10)
        assert [h.memory.key for h in hits] == ["v0"]
        only_name = htm.recall("Ana", strategy="fulltext", limit=5)
        assert len(only_name) == 5


def test_time_expression_lifts_memories_from_that_time(sqlite_url: str) -> None:
    clock = FrozenClock(datetime(2024, 2, 1, 12, tzinfo=UTC))
    with HTM(database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock) as htm:
        # The May memory shares no word with the query: only the time boost can lift it.
        _chat(htm, datetime(2023, 5, 10, tzinfo=UTC), ["Ana: climbed a mountain trail"],
              prefix="may")
        _chat(htm, datetime(2023, 8, 10, tzinfo=UTC), ["Ana: went hiking up the big hill",
                                                       "Ana: went hiking up a hill again"],
              prefix="aug")
        hits = htm.recall("Where did Ana go hiking last May?", limit=3)
        assert hits[0].memory.key == "may0"
        assert "vector@time" in hits[0].ranks
        flat = HTM(store=htm.store, embedder=htm.embedder, clock=clock,
                   retrieval=RetrievalConfig(time_boost=False))
        assert flat.recall("Where did Ana go hiking last May?", limit=3)[0].memory.key != "may0"


def _neighbor_store(htm: HTM) -> None:
    start = datetime(2024, 3, 1, 18, tzinfo=UTC)
    # Notes two hours apart: not each other's neighbors (neighbor_gap is one hour).
    _chat(htm, start - timedelta(days=10), [f"Bo: {line} {i}" for i, line in
                                            enumerate(FILLER * 6)], prefix="f",
          every=timedelta(hours=2))
    _chat(htm, start, ["Ana: we adopted a puppy from the rescue shelter!",
                       "Bo: no way! what is his name?",
                       "Ana: Biscuit, he already owns the couch."], prefix="pup")


def _ranked_keys(htm: HTM, query: str, config: RetrievalConfig, **filters: Any) -> list[str]:
    ranked = search(htm.store, query=query, query_vector=lambda: htm.embedder.embed_query(query),
                    strategy="hybrid", limit=10, filters=SearchFilters(**filters), config=config,
                    now=datetime(2024, 4, 1, tzinfo=UTC))
    return [m.key for m in htm.store.get_many([r.id for r in ranked])]


def test_neighbor_context_brings_in_the_reply(sqlite_url: str, clock: FrozenClock) -> None:
    with HTM(database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock) as htm:
        _neighbor_store(htm)
        query = "puppy adopted from the rescue shelter"
        with_context = _ranked_keys(htm, query, RetrievalConfig())
        assert with_context[:2] == ["pup0", "pup1"]
        assert "pup1" not in _ranked_keys(htm, query, RetrievalConfig(neighbors=0))
        assert set(_ranked_keys(htm, query, RetrievalConfig(neighbors=2))[:3]) == {
            "pup0", "pup1", "pup2"}
        # Neighbors obey the filters: the reply is outside this timeframe.
        end = datetime(2024, 3, 1, 18, 0, 30, tzinfo=UTC)
        filtered = _ranked_keys(htm, query, RetrievalConfig(), end=end)
        assert "pup0" in filtered and "pup1" not in filtered


def test_neighbors_must_be_close_in_time(sqlite_url: str, clock: FrozenClock) -> None:
    with HTM(database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock) as htm:
        _neighbor_store(htm)
        keys = _ranked_keys(htm, "puppy adopted from the rescue shelter",
                            RetrievalConfig(neighbor_gap=30.0))
        assert keys[0] == "pup0" and "pup1" not in keys


def test_recall_neighbors_option(sqlite_url: str, clock: FrozenClock) -> None:
    with HTM(database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock) as htm:
        _neighbor_store(htm)
        query = "puppy adopted from the rescue shelter"
        assert [h.memory.key for h in htm.recall(query, limit=3)][:2] == ["pup0", "pup1"]
        assert "pup1" not in [h.memory.key for h in htm.recall(query, limit=10, neighbors=0)]
        found = htm.recall(query, limit=3, neighbors=2)
        assert {h.memory.key for h in found} == {"pup0", "pup1", "pup2"}
        for bad in (-1, 21, True, 1.5, "2"):
            with pytest.raises(ValidationError, match="neighbors must be an integer"):
                htm.recall(query, neighbors=bad)


def test_coverage_weighs_full_text_hits_by_their_share_of_query_words(
        sqlite_url: str, clock: FrozenClock) -> None:
    from htm_core.recall import coverage

    assert coverage(["beagle", "adopted"], "Ana: we adopt a Beagle") == 1.0
    assert coverage(["beagle", "adopted"], "Ana: my family") == 0.0
    assert coverage([], "anything") == 0.0
    with HTM(database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock) as htm:
        start = datetime(2024, 1, 1, tzinfo=UTC)
        _chat(htm, start, ["family family family", "which companion joined the family household"],
              prefix="c", every=timedelta(hours=2))
        query = "companion joined household family"
        config = RetrievalConfig(neighbors=0)
        ranked = search(htm.store, query=query, query_vector=lambda: htm.embedder.embed_query(query),
                        strategy="hybrid", limit=2, filters=SearchFilters(), config=config)
        top = htm.store.get_many([ranked[0].id])[0]
        assert top.key == "c1"
        assert ranked[0].score > ranked[1].score * 1.5


def test_atypical_time_arm_lifts_the_events_of_the_window(sqlite_url: str) -> None:
    """"What happened last May?" shares nothing with the event; inside May the memories
    least like the average memory (the event, not the small talk) rise."""
    clock = FrozenClock(datetime(2024, 2, 1, 12, tzinfo=UTC))
    with HTM(database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock) as htm:
        for month in (3, 5, 7):
            _chat(htm, datetime(2023, month, 2, tzinfo=UTC),
                  [f"Ana: {FILLER[i % 10]}" for i in range(70)], prefix=f"chat{month}-",
                  every=timedelta(hours=2))
        _chat(htm, datetime(2023, 5, 20, tzinfo=UTC),
              ["Ana: Finally climbed Kilimanjaro with my cousin, summit at sunrise"], prefix="event")
        query = "What happened last May?"
        # Without the arm (and without the typicality penalty and the demotion of the
        # repeated filler, which also lift the event), small talk fills the top 10.
        off = RetrievalConfig().with_options(weights={**RetrievalConfig().weights,
                                                      "atypical@time": 0.0},
                                             typical_penalty=0.0, duplicates=None)
        on = RetrievalConfig()
        assert on.weights["atypical@time"] > 0
        with_arm = search(htm.store, query=query, query_vector=lambda: htm.embedder.embed_query(query),
                          strategy="hybrid", limit=10, filters=SearchFilters(), config=on,
                          now=clock())
        without = search(htm.store, query=query, query_vector=lambda: htm.embedder.embed_query(query),
                         strategy="hybrid", limit=10, filters=SearchFilters(), config=off,
                         now=clock())
        event = htm.store.get("event0")
        assert event is not None
        assert "atypical@time" in next(r.ranks for r in with_arm if r.id == event.id)
        assert [r.id for r in with_arm].index(event.id) < 3
        assert event.id not in [r.id for r in without]  # small talk fills the top 10
        # No time phrase, no such arm.
        plain = search(htm.store, query="Kilimanjaro", query_vector=lambda: htm.embedder.embed_query(
            "Kilimanjaro"), strategy="hybrid", limit=5, filters=SearchFilters(), config=on)
        assert all("atypical@time" not in r.ranks for r in plain)


def test_long_memories_borrow_less_from_their_neighbors(sqlite_url: str, clock: FrozenClock
                                                         ) -> None:
    long_reply = "Bo: " + " ".join(["there are many ways to think about this"] * 15)
    with HTM(database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock) as htm:
        _neighbor_store(htm)
        _chat(htm, datetime(2024, 3, 5, 18, tzinfo=UTC),
              ["Ana: the kitten from the rescue shelter came home!", long_reply], prefix="kit")
        query = "kitten from the rescue shelter"

        def scored(config: RetrievalConfig) -> dict[str, float]:
            ranked = search(htm.store, query=query,
                            query_vector=lambda: htm.embedder.embed_query(query),
                            strategy="hybrid", limit=20, filters=SearchFilters(), config=config)
            keys = {m.id: m.key for m in htm.store.get_many([r.id for r in ranked])}
            return {keys[r.id]: r.score for r in ranked}

        every = scored(RetrievalConfig(neighbor_words=None))
        short_only = scored(RetrievalConfig(neighbor_words=20))
        # 120 words borrow a sixth of the loan: no longer enough to enter the top 20.
        assert "kit1" in every
        assert short_only.get("kit1", 0.0) < every["kit1"]
        assert short_only["kit0"] == pytest.approx(every["kit0"])
    with pytest.raises(ValidationError, match="neighbor_words"):
        RetrievalConfig(neighbor_words=0)


def test_periods_set_is_deterministic_and_labelled_consistently() -> None:
    """Every question of the periods set has evidence turns that exist, come before it,
    are the user's, and lie in the month or ISO week the question names."""
    from benchmarks.data import periods

    data = periods.build_periods_set()
    assert data == periods.build_periods_set()
    assert data != periods.build_periods_set(seed=8)
    turns = {t["id"]: (t, datetime.fromisoformat(s["date"])) for c in data["conversations"]
             for s in c["sessions"] for t in s["turns"]}
    kinds = {q["kind"] for q in data["questions"]}
    assert kinds == set(periods.KINDS)
    for q in data["questions"]:
        now = datetime.fromisoformat(q["now"])
        said = [turns[e] for e in q["evidence"]]
        assert said and all(at < now and t["speaker"] != "Assistant" for t, at in said)
        assert all(e.startswith(q["conversation"] + "-") for e in q["evidence"])
        named = next((m for m in periods.MONTHS if f"in {m}" in q["question"]), None)
        if q["kind"] in ("month-decision", "month-topic") and named:
            assert all(periods.MONTHS[at.month - 1] == named for _, at in said)
        if q["kind"] == "week":
            weeks = {at.isocalendar()[:2] for _, at in said}
            assert len(weeks) == 1


def test_benchmark_tiered_arms_on_the_periods_set(capsys: pytest.CaptureFixture[str]) -> None:
    """``--set periods --tiered``: the tiered arms beside hybrid, their cost and the
    contexts' coverage, hashing embedder, one conversation."""
    result = rq.main(["--quick", "--embedder", "hashing", "--set", "periods", "--tiered",
                      "--no-baselines", "--rows", "none"])
    printed = capsys.readouterr().out
    assert set(result["periods"]) == {"htm hybrid (default)", "htm tiered",
                                      "hybrid with digests", "tiered + hybrid (RRF)"}
    for s in result["periods"].values():
        for row in s.values():
            assert 0.0 <= row["R@5"] <= row["R@10"] <= row["R@25"] <= 1.0
    assert "**tiered cost**" in printed and "digests scored" in printed
    assert "tiered 1000 tokens, 28+ days" in printed and "balanced 2000 tokens, 7+ days" in printed


def test_context_texts_join_a_turn_with_its_neighbour_in_the_same_session() -> None:
    from benchmarks import context_vectors as cv

    long = "One two three four five six seven eight nine ten. " * 3  # 30 words, 3 sentences
    conv = {"sessions": [
        {"turns": [{"id": "a", "speaker": "Ada", "text": "How did the school event go?"},
                   {"id": "b", "speaker": "Bo", "text": "It went great."}]},
        {"turns": [{"id": "c", "speaker": "Ada", "text": long.strip()},
                   {"id": "d", "speaker": "Bo", "text": "Nice."}]}]}
    prev = cv.context_texts(conv, "prev")
    assert set(prev) == {"b", "d"}  # no neighbour across sessions
    assert prev["b"] == "Ada: How did the school event go?\nBo: It went great."
    # A long neighbour gives its last whole sentences, up to 20 words: two of its three.
    ten = "One two three four five six seven eight nine ten."
    assert prev["d"] == f"{ten} {ten}\nBo: Nice."
    after = cv.context_texts(conv, "next")
    assert set(after) == {"a", "c"}
    assert after["c"].startswith("One two three") and after["c"].endswith("\nBo: Nice.")
    assert cv.context_texts(conv, "prev-full")["d"] == f"Ada: {long.strip()}\nBo: Nice."


def test_context_vectors_benchmark_runs_each_variant_and_the_control(locomo_dir: Path) -> None:
    from benchmarks import context_vectors as cv

    result = cv.main(["--locomo", str(locomo_dir), "--embedder", "hashing",
                      "--variants", "prev,short,blend"])
    arms = result["locomo"]
    assert list(arms) == [cv.BASE, "prev", "short", "blend", cv.AGAIN]
    assert arms[cv.AGAIN] == arms[cv.BASE]


def test_score_normalisations_put_the_best_hit_at_one_whatever_the_sign() -> None:
    from benchmarks import score_fusion as sf

    bm25 = [(1, -4.0), (2, -3.0), (3, -2.0)]  # SQLite's bm25: lower is better
    assert sf.normalised(bm25, "min-max") == {1: 1.0, 2: 0.5, 3: 0.0}
    assert sf.normalised([(1, 0.8), (2, 0.4), (3, -0.1)], "max") == {1: 1.0, 2: 0.5, 3: 0.0}
    assert sf.normalised([(5, 0.3)], "min-max") == {5: 1.0}
    with pytest.raises(ValueError, match="unknown normalisation"):
        sf.normalised(bm25, "z")


def test_score_fusion_swaps_the_rank_term_only_inside_its_block(tmp_path: Path) -> None:
    """With no score term the experiment's fusion is the default's, hit for hit; a
    score-only variant reorders; the library's fusion is back after the block."""
    from benchmarks import score_fusion as sf
    from htm_core.recall import pipeline
    from htm_core.recall.fusion import coverage_scores

    run_arms = pipeline.run_arms
    clock = FrozenClock(datetime(2024, 5, 1, 12, tzinfo=UTC))
    texts = ["Ada adopted a grey cat named Miso", "The cat Miso sleeps all day",
             "Bo painted a sunset over the lake", "Ada painted the cat for Bo",
             "We talked about the weather", "Miso knocked a cup off the table"]
    with HTM(robot="r", database_url=f"sqlite:///{tmp_path / 'f.db'}",
             embedder=HashingEmbedder(), clock=clock) as htm:
        htm.add_many(texts)

        def order(query: str) -> list[tuple[str, float]]:
            return [(h.memory.content, h.score) for h in htm.recall(query, limit=6)]

        default = order("what did Ada paint of the cat")
        with sf.fusing(sf.Variant("min-max", 0.0, mix=0.0)):
            assert order("what did Ada paint of the cat") == default
        with sf.fusing(sf.Variant("max", 1.0)):
            by_score = order("what did Ada paint of the cat")
        assert [t for t, _ in by_score] != [t for t, _ in default]
        assert order("what did Ada paint of the cat") == default
    assert pipeline.coverage_scores is coverage_scores and pipeline.run_arms is run_arms


def test_score_fusion_benchmark_runs_the_default_and_each_variant(locomo_dir: Path) -> None:
    from benchmarks import score_fusion as sf

    result = sf.main(["--locomo", str(locomo_dir), "--embedder", "hashing",
                      "--variants", "cc max,rrf + 0.2 min-max"])
    assert list(result["locomo"]) == [sf.BASE, "cc max", "rrf + 0.2 min-max"]


def test_rerank_headroom_counts_the_evidence_a_reranker_could_put_first() -> None:
    from benchmarks import rerank_headroom as rh

    questions = [{"id": "q1", "kind": "multi-hop", "evidence": ["a", "b", "c", "d"]},
                 {"id": "q2", "kind": "temporal", "evidence": ["e"]},
                 {"id": "q3", "kind": "adversarial", "evidence": ["f"]}]
    filler = [f"x{i}" for i in range(30)]
    ranked = {"q1": ["a", *filler[:9], "b", *filler[9:25], "c", *filler[25:]],
              "q2": [*filler[:12], "e"], "q3": ["f"]}
    table = rh.headroom(questions, ranked, depths=(10, 25, 50))
    assert table["multi-hop"] == {10: 0.25, 25: 0.5, 50: 0.75}  # "d" is never found
    assert table["temporal"] == {10: 0.0, 25: 1.0, 50: 1.0}
    assert table["all"] == {10: 0.125, 25: 0.75, 50: 0.875}  # adversarial kept apart
    # More than ten evidence turns: the first ten places are all a reranker has.
    many = [{"id": "m", "kind": "single-hop", "evidence": [f"e{i}" for i in range(20)]}]
    assert rh.headroom(many, {"m": [f"e{i}" for i in range(20)]}, depths=(25,)) == {
        "single-hop": {25: 0.5}, "all": {25: 0.5}}


def test_rerank_headroom_benchmark_prints_each_depth(locomo_dir: Path) -> None:
    from benchmarks import rerank_headroom as rh

    table = rh.main(["--locomo", str(locomo_dir), "--embedder", "hashing"])["locomo"]
    rows = list(table.values())
    assert rows and all(list(row) == list(rh.DEPTHS) for row in rows)
    assert all(row[10] <= row[20] <= row[25] <= row[50] <= row[100] for row in rows)
