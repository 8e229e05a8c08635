"""The ``htm`` command, run in-process through ``main(argv)`` and as a real subprocess.

Every command runs against a real SQLite file with ``--embedder hashing`` (fast, offline).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.cli import build_parser, main
from htm_core.store.base import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]


class Run:
    """Runs ``htm`` in-process on one database and keeps the last output."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.out = ""
        self.err = ""

    def __call__(self, *argv: str, db: bool = True) -> int:
        out, err = io.StringIO(), io.StringIO()
        prefix = ["--db", str(self.db), "--embedder", "hashing"] if db else []
        code = main([*prefix, *argv], stdout=out, stderr=err)
        self.out, self.err = out.getvalue(), err.getvalue()
        return code


@pytest.fixture
def htm_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    for name in ("HTM_DATABASE_URL", "HTM_ROBOT", "HTM_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)
    run = Run(tmp_path / "cli.db")
    assert run("migrate") == 0  # the store exists: commands that only read never create one
    return run


def test_add_recall_context_stats(htm_cli: Run) -> None:
    assert htm_cli("add", "User prefers Vim keybindings", "--importance", "9", "--key",
                   "pref-vim", "--tag", "user:preferences", "--metadata", '{"source": "cli"}') == 0
    assert htm_cli.out.startswith("pref-vim\t")
    assert htm_cli("add", "Lunch was noodles", "--robot", "bob") == 0
    assert htm_cli("recall", "vim keybindings", "--limit", "5") == 0
    lines = htm_cli.out.splitlines()
    assert lines[0].split() == ["score", "age", "importance", "robot", "text"]
    assert "User prefers Vim keybindings" in lines[1] and " 9 " in lines[1]
    assert "default" in lines[1]
    assert htm_cli("recall", "noodles", "--robot", "bob", "--json") == 0
    hits = [json.loads(line) for line in htm_cli.out.splitlines()]
    assert [h["robot"] for h in hits] == ["bob"]
    assert htm_cli("recall", "vim", "--tag", "user", "--json", "--strategy", "fulltext") == 0
    assert [json.loads(x)["key"] for x in htm_cli.out.splitlines()] == ["pref-vim"]
    assert htm_cli("context", "--strategy", "important", "--max-tokens", "100") == 0
    # bob's memory entered default's working memory when default recalled it
    assert htm_cli.out.strip().split("\n\n") == ["User prefers Vim keybindings",
                                                  "Lunch was noodles"]
    assert "2 memories" in htm_cli.err
    assert htm_cli("stats", "--json") == 0
    stats = json.loads(htm_cli.out)
    assert stats["long_term_total"] == 2 and stats["robots"] == 2
    assert stats["embedder"].startswith("hashing")
    assert htm_cli("stats") == 0 and "2 memories" in htm_cli.out
    with HTM(database_url=htm_cli.db, embedder=HashingEmbedder()) as htm:
        memory = htm.retrieve("pref-vim")
        assert memory is not None and memory.tags == ("user:preferences",)
        assert memory.metadata == {"source": "cli"} and memory.importance == 9.0


def test_global_options_work_before_and_after_the_subcommand(htm_cli: Run) -> None:
    assert main(["add", "after", "--db", str(htm_cli.db), "--embedder", "hashing",
                 "--robot", "r2"], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    assert htm_cli("--robot", "r3", "add", "before") == 0
    with HTM(database_url=htm_cli.db, embedder=HashingEmbedder()) as htm:
        counts = {r.name: r.memory_count for r in htm.robots()}
    assert counts == {"default": 0, "r2": 1, "r3": 1}


def test_environment_variables_choose_database_robot_and_embedder(
        htm_cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTM_DATABASE_URL", str(htm_cli.db))
    monkeypatch.setenv("HTM_ROBOT", "envbot")
    monkeypatch.setenv("HTM_EMBEDDER", "hashing")
    assert htm_cli("add", "from the environment", db=False) == 0
    assert htm_cli("stats", "--json", db=False) == 0
    stats = json.loads(htm_cli.out)
    assert stats["robot"] == "envbot" and stats["database"].endswith("cli.db")


def test_forget_restore_purge_need_confirmation(htm_cli: Run) -> None:
    htm_cli("add", "secret", "--key", "s1")
    assert htm_cli("forget", "s1") == 1
    assert "--yes" in htm_cli.err and "Traceback" not in htm_cli.err
    assert htm_cli("forget", "s1", "--yes") == 0
    assert htm_cli("recall", "secret", "--json") == 0 and htm_cli.out == ""
    assert htm_cli("restore", "s1") == 0
    assert htm_cli("recall", "secret", "--json") == 0 and "s1" in htm_cli.out
    htm_cli("forget", "s1", "--yes")
    assert htm_cli("purge") == 1 and "--yes" in htm_cli.err
    assert htm_cli("purge", "--yes") == 0 and "purged 1" in htm_cli.out
    assert htm_cli("restore", "s1") == 1 and "s1" in htm_cli.err


def test_log_filters_by_op_and_robot(htm_cli: Run) -> None:
    htm_cli("add", "one", "--robot", "a")
    htm_cli("add", "two", "--robot", "b", "--key", "k2")
    htm_cli("forget", "k2", "--yes", "--robot", "b")
    assert htm_cli("log", "--op", "forget") == 0
    rows = htm_cli.out.splitlines()[1:]
    assert len(rows) == 1 and "forget" in rows[0] and "k2" in rows[0]
    assert htm_cli("log", "--robot", "a", "--op", "add") == 0
    assert len(htm_cli.out.splitlines()) == 2
    assert htm_cli("log", "--limit", "0") == 1


def test_export_import_round_trip_through_the_cli(htm_cli: Run, tmp_path: Path) -> None:
    for i in range(30):
        htm_cli("add", f"memory number {i} about topic {i % 4}", "--key", f"k{i}",
                "--importance", str(i % 10), "--tag", f"t:{i % 3}")
    htm_cli("forget", "k3", "--yes")
    path = tmp_path / "dump.jsonl"
    assert htm_cli("export", str(path), "--with-embeddings") == 0
    assert "exported 30" in htm_cli.out
    target = Run(tmp_path / "target.db")
    assert target("import", str(path), "--batch-size", "7") == 0
    assert "imported 30 memories (0 already there" in target.out
    assert target("import", str(path)) == 0
    assert "imported 0 memories (30 already there" in target.out
    target_dump = tmp_path / "again.jsonl"
    assert target("export", str(target_dump), "--with-embeddings") == 0
    a = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()[1:-1]]
    b = [json.loads(x) for x in target_dump.read_text(encoding="utf-8").splitlines()[1:-1]]
    for rec in a + b:
        rec["embedding"] = [round(x, 6) for x in rec["embedding"]]
    assert a == b


def test_copy_and_migrate(htm_cli: Run, tmp_path: Path) -> None:
    for i in range(12):
        htm_cli("add", f"fact {i}", "--key", f"f{i}")
    dst = tmp_path / "copy.db"
    assert htm_cli("copy", str(htm_cli.db), str(dst), "--batch-size", "5", db=False) == 0
    assert "copied 12 memories" in htm_cli.out and "verified" in htm_cli.out
    assert htm_cli("copy", str(htm_cli.db), str(dst), db=False) == 0
    assert "copied 0 memories (12 already there)" in htm_cli.out
    assert htm_cli("copy", str(htm_cli.db), str(htm_cli.db), db=False) == 1
    assert "same database" in htm_cli.err
    assert htm_cli("migrate") == 0 and f"schema version {SCHEMA_VERSION}" in htm_cli.out


@pytest.mark.parametrize(("argv", "code", "text"), [
    (["recall"], 2, "required: query"),
    (["frobnicate"], 2, "invalid choice"),
    (["recall", "x", "--strategy", "magic"], 2, "invalid choice"),
    (["recall", "x", "--timeframe", "whenever"], 1, "timeframe"),
    (["recall", "x", "--limit", "0"], 1, "limit"),
    (["add", "   "], 1, "empty"),
    (["add", "x", "--importance", "11"], 1, "importance"),
    (["add", "x", "--metadata", "{nope"], 1, "--metadata is not valid JSON"),
    (["add", "x", "--tag", "bad tag!"], 1, "tag"),
    (["import", "/no/such/file.jsonl"], 1, "cannot open"),
    (["add", "x", "--nonsense"], 2, "unrecognized arguments: --nonsense"),
])
def test_bad_input_gives_a_message_and_an_exit_code(htm_cli: Run, argv: list[str], code: int,
                                                    text: str) -> None:
    assert htm_cli(*argv) == code
    assert text in htm_cli.err
    assert "Traceback" not in htm_cli.err


def test_help_is_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert main(["--help"]) == 0
    for name in commands:
        assert main([name, "--help"]) == 0, name
        assert f"usage: htm {name}" in capsys.readouterr().out


def test_demo_command_runs_the_demo() -> None:
    out = io.StringIO()
    code = main(["--embedder", "hashing", "demo", "--fast"], stdout=out, stderr=io.StringIO())
    assert code == 0
    text = out.getvalue()
    assert "Recall brings the evicted fact back" in text
    assert "the allergy fact in working memory now: True" in text


def test_mcp_without_the_extra_names_it(htm_cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """``find_spec`` is patched to pretend the ``mcp`` package is absent (it is installed here)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mcp" else real(name, *a))
    assert htm_cli("mcp") == 1
    assert 'pip install "htm-memory[mcp]"' in htm_cli.err


def _subprocess(*argv: str, env_db: Path, stdin: int | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HTM_DATABASE_URL": str(env_db), "HTM_EMBEDDER": "hashing",
           "HTM_ROBOT": "proc"}
    return subprocess.run([sys.executable, "-m", "htm_core.cli", *argv], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=timeout, stdin=stdin)


def test_as_a_subprocess_exit_codes_and_stderr(tmp_path: Path) -> None:
    db = tmp_path / "proc.db"
    done = _subprocess("add", "Deploys happen on Tuesdays", "--key", "deploy", env_db=db)
    assert done.returncode == 0, done.stderr
    done = _subprocess("recall", "when do deploys happen", env_db=db)
    assert done.returncode == 0 and "Deploys happen on Tuesdays" in done.stdout
    assert "proc" in done.stdout
    done = _subprocess("forget", "deploy", env_db=db)
    assert done.returncode == 1 and "--yes" in done.stderr and "Traceback" not in done.stderr
    done = _subprocess("recall", env_db=db)
    assert done.returncode == 2 and "usage:" in done.stderr


def test_mcp_delegates_to_the_server(tmp_path: Path) -> None:
    """The real MCP server on stdio: with stdin closed it starts, sees EOF and stops."""
    pytest.importorskip("mcp")
    pytest.importorskip("htm_integrations.mcp.server")
    done = _subprocess("mcp", env_db=tmp_path / "mcp.db", stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mcp.db").exists()


def test_demo_really_evicts_then_recalls_and_stays_in_budget(tmp_path: Path) -> None:
    from htm_core.demo import DEMO_BUDGET, load_corpus, run

    out = io.StringIO()
    report = run(out=out, embedder="hashing", pause=0.0, database=tmp_path / "demo.db")
    assert report.turns == len(load_corpus()["turns"]) == report.long_term_total
    assert report.recalled_key in report.evicted
    assert report.was_evicted_before_recall and report.back_in_working_memory
    assert report.max_working_tokens_seen <= DEMO_BUDGET
    assert report.recalled_key in report.context_keys
    assert 0 < report.context_tokens <= 72
    text = out.getvalue()
    for step in ("1. A conversation", "2. Eviction only clears a flag", "3. Recall",
                 "4. The context", "5. Never forget", "6. Stats"):
        assert step in text


def test_python_m_demo_runs_offline_in_a_throwaway_database(tmp_path: Path) -> None:
    """``scripts/demo.sh``'s entry point, as a subprocess with no HTM_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTM_")}
    env["HOME"] = str(tmp_path)  # the user data dir must stay untouched
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    done = subprocess.run([sys.executable, "-m", "htm_core.demo", "--embedder", "hashing",
                           "--fast"], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "the allergy fact in working memory now: True" in done.stdout
    assert not (tmp_path / "data").exists()


def test_copy_interrupted_exits_130_and_resumes(htm_cli: Run, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C half-way through ``htm copy``: the progress bar is swapped for a callback that
    raises KeyboardInterrupt after 1,000 of 2,000 memories (a real SIGINT lands the same way,
    between two batches); the copy itself is the real one."""
    from contextlib import contextmanager

    import htm_core.cli as cli

    with HTM(database_url=htm_cli.db, embedder=HashingEmbedder()) as htm:
        for start in range(0, 2000, 500):
            htm.add_many([{"content": f"fact number {i}", "key": f"f{i}"}
                          for i in range(start, start + 500)])
    real_progress = cli._progress

    @contextmanager
    def interrupting(args, label, err):  # type: ignore[no-untyped-def]
        def progress(done: int, total: int | None) -> None:
            if done >= 1000:
                raise KeyboardInterrupt
        yield progress

    dst = tmp_path / "copy.db"
    monkeypatch.setattr(cli, "_progress", interrupting)
    assert htm_cli("copy", str(htm_cli.db), str(dst), "--batch-size", "250", db=False) == 130
    assert "interrupted (run the same command again to resume)" in htm_cli.err
    monkeypatch.setattr(cli, "_progress", real_progress)
    assert htm_cli("copy", str(htm_cli.db), str(dst), "--batch-size", "250", "--progress",
                   db=False) == 0
    assert "copied 1000 memories (1000 already there)" in htm_cli.out
    assert "verified" in htm_cli.out
    assert "copy: 100%" in htm_cli.err and "2000/2000" in htm_cli.err  # the tqdm bar
    with HTM(database_url=dst, embedder=HashingEmbedder()) as htm:
        assert htm.stats().long_term_total == 2000


def test_reembed_switches_the_store_to_another_embedder(htm_cli: Run) -> None:
    for i in range(5):
        htm_cli("add", f"fact {i} about vim and postgres", "--key", f"f{i}")
    # a 64-dimension hashing embedder is a different embedder: opening the store with it fails
    argv = ["--db", str(htm_cli.db), "--embedder", "hashing:64"]
    err = io.StringIO()
    assert main([*argv, "recall", "vim"], stdout=io.StringIO(), stderr=err) == 1
    assert "reembed" in err.getvalue()
    out = io.StringIO()
    assert main([*argv, "reembed", "--batch-size", "2"], stdout=out, stderr=io.StringIO()) == 0
    assert "re-embedded 5 memories" in out.getvalue()
    out = io.StringIO()
    assert main([*argv, "stats", "--json"], stdout=out, stderr=io.StringIO()) == 0
    assert json.loads(out.getvalue())["embedding_dim"] == 64
    out = io.StringIO()
    assert main([*argv, "recall", "vim", "--json", "--strategy", "vector"], stdout=out,
                stderr=io.StringIO()) == 0
    assert len(out.getvalue().splitlines()) == 5


def test_the_installed_htm_script(tmp_path: Path) -> None:
    """The console script pyproject declares (``htm = "htm_core.cli:main"``)."""
    script = Path(sys.executable).parent / "htm"
    if not script.exists():
        pytest.skip("the package is not installed in this environment (no htm script)")
    env = {**os.environ, "HTM_DATABASE_URL": str(tmp_path / "s.db"), "HTM_EMBEDDER": "hashing"}
    done = subprocess.run([str(script), "add", "installed", "--key", "k"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("k\t"), done.stderr
    done = subprocess.run([str(script), "purge"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 1 and "--yes" in done.stderr


class _OtherEmbedder:
    """Vectors from an embedder the command line cannot make (one a program chose)."""

    name = "another-embedder"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, float(len(t) % 5), 0.5] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0, 0.5]


def test_commands_that_never_embed_open_a_store_of_another_embedder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: ``htm stats`` (and forget, context...) on a store whose vectors came from
    another embedder exited with an embedder-mismatch error: the store could not even be
    inspected from the command line. Now they work and stats reports the mismatch."""
    for name in ("HTM_DATABASE_URL", "HTM_ROBOT", "HTM_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)
    db = tmp_path / "other.db"
    with HTM(database_url=str(db), embedder=_OtherEmbedder()) as htm:
        htm.add("the deploy is on friday", key="deploy")
        htm.add("the standup moved to ten", key="standup")
    run = Run(db)
    for embedder in ([], ["--embedder", "hashing"]):  # auto (picks another one) or asked for
        assert run("--db", str(db), *embedder, "stats", db=False) == 0, run.err
        assert "another-embedder" in run.out and "htm reembed" in run.out
        assert "2 memories" in run.out
    assert run("--db", str(db), "stats", "--json", db=False) == 0
    assert json.loads(run.out)["extra"]["embedder_mismatch"] is True
    assert run("--db", str(db), "context", db=False) == 0
    assert run("--db", str(db), "log", db=False) == 0 and "add" in run.out
    assert run("--db", str(db), "forget", "deploy", "--yes", db=False) == 0
    assert run("--db", str(db), "restore", "deploy", db=False) == 0
    assert run("--db", str(db), "export", str(tmp_path / "out.jsonl"), db=False) == 0
    with HTM(database_url=str(db), embedder=_OtherEmbedder()) as htm:  # vectors untouched
        assert htm.store.embedding_info() == ("another-embedder", 3)
        assert htm.recall("deploy friday")[0].memory.key == "deploy"


def test_kinds_on_the_command_line(htm_cli: Run) -> None:
    """``htm add --kind --source --confidence``, the kind the rules give without one, and
    ``--kind`` filters of ``htm recall`` and ``htm list`` (also inside a user's scope)."""
    assert htm_cli("add", "The venue is the old mill", "--kind", "fact", "--source",
                   "meeting", "--confidence", "0.8", "--key", "venue") == 0
    assert "\tfact\t" in htm_cli.out
    assert htm_cli("add", "I prefer the old mill as a venue", "--key", "pref") == 0
    assert "\tpreference\t" in htm_cli.out
    assert htm_cli("add", "we talked about the venue at the mill", "--key", "talk") == 0
    assert htm_cli("add", "Ada: the venue is the mill", "--kind", "fact", "--user", "Ada") == 0
    assert htm_cli("add", "ada: the venue is the barn", "--kind", "fact", "--user", "ada") == 0
    assert htm_cli("recall", "venue mill", "--kind", "fact", "--json", "--min-score", "0") == 0
    found = [json.loads(line) for line in htm_cli.out.splitlines()]
    assert {f["key"] for f in found} >= {"venue"} and {f["kind"] for f in found} == {"fact"}
    assert htm_cli("recall", "venue mill", "--kind", "fact", "--user", "ada", "--json",
                   "--min-score", "0") == 0
    assert [json.loads(line)["content"] for line in htm_cli.out.splitlines()] == [
        "ada: the venue is the barn"]
    assert htm_cli("list", "--kind", "preference", "--kind", "fact", "--json") == 0
    listed = [json.loads(line) for line in htm_cli.out.splitlines()]
    assert [(m["key"], m["kind"], m["source"]) for m in listed][:2] == [
        ("venue", "fact", "meeting"), ("pref", "preference", None)]
    assert len(listed) == 4 and listed[0]["confidence"] == 0.8
    assert htm_cli("list", "--kind", "fact", "--user", "Ada") == 0
    assert "Ada: the venue" in htm_cli.out and "barn" not in htm_cli.out
    assert htm_cli("add", "x", "--kind", "facts") == 2
    assert htm_cli("add", "x", "--confidence", "2") == 1 and "confidence" in htm_cli.err


def test_source_and_confidence_filters_on_the_command_line(htm_cli: Run) -> None:
    """``--source`` (repeatable, exact) and ``--min-confidence`` on ``htm recall`` and
    ``htm list``, also inside each of the users ``Ada`` and ``ada``; a bad value refused."""
    for user, source, confidence in [("Ada", "user", "0.9"), ("ada", "user", "0.9"),
                                     ("Ada", "User", "0.9"), ("Ada", "user", "0.2"),
                                     ("Ada", "user:x", "1")]:
        assert htm_cli("add", f"{user} {source} {confidence}: the venue is the mill",
                       "--user", user, "--source", source, "--confidence", confidence) == 0
    assert htm_cli("add", "Ada unsure: the venue is the mill", "--user", "Ada",
                   "--source", "user", "--kind", "episodic") == 0
    assert htm_cli("recall", "venue mill", "--source", "user", "--min-confidence", "0.5",
                   "--user", "Ada", "--json", "--min-score", "0") == 0
    assert [json.loads(line)["content"] for line in htm_cli.out.splitlines()] == [
        "Ada user 0.9: the venue is the mill"]
    assert htm_cli("recall", "venue mill", "--source", "user", "--source", "User",
                   "--json", "--min-score", "0") == 0
    assert sorted(json.loads(line)["content"].split(":")[0]
                  for line in htm_cli.out.splitlines()) == [
        "Ada User 0.9", "Ada unsure", "Ada user 0.2", "Ada user 0.9", "ada user 0.9"]
    assert htm_cli("list", "--source", "user", "--user", "Ada", "--json") == 0
    listed = [json.loads(line) for line in htm_cli.out.splitlines()]
    assert sorted(m["confidence"] or 0 for m in listed) == [0, 0.2, 0.9]
    assert htm_cli("list", "--min-confidence", "1", "--json") == 0
    assert [json.loads(line)["source"] for line in htm_cli.out.splitlines()] == ["user:x"]
    assert htm_cli("list", "--min-confidence", "2") == 1 and "min_confidence" in htm_cli.err
    assert htm_cli("recall", "venue", "--source", " ") == 1 and "source" in htm_cli.err
    assert htm_cli("list", "--min-confidence", "high") == 2
