"""``htm consolidate`` in-process on a real SQLite file (``--embedder hashing``): the digests
of a day and a week in the whole store and in a user's scope, re-running writing nothing,
and bad arguments refused with exit 1 and nothing written."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.cli import main
from htm_core.scope import ChatScope


def run(db: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--db", str(db), "--embedder", "hashing", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("HTM_DATABASE_URL", "HTM_ROBOT", "HTM_EMBEDDER", "HTM_USER"):
        monkeypatch.delenv(name, raising=False)
    # The table's last column is cut to the terminal's width: a wide one shows the whole
    # digest whatever terminal the suite runs in (or COLUMNS: GNU readline, once imported
    # by pytest, exports COLUMNS=80 to the pytest-xdist workers).
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "cli.db"
    ada, other = ChatScope.of(user_id="ada"), ChatScope.of(user_id="Ada")
    with HTM(database_url=str(path), embedder=HashingEmbedder()) as htm:
        for day in (4, 5):
            when = datetime(2024, 3, day, 10, tzinfo=timezone.utc)
            htm.add(f"ada booked the Porto venue for day {day}.", key=ada.own_key(f"n{day}"),
                    tags=ada.stored_tags(None), created_at=when)
            htm.add(f"Ada drafted thesis chapter {day}.", key=other.own_key(f"n{day}"),
                    tags=other.stored_tags(None), created_at=when)
    return path


def test_consolidate_a_day_and_a_week(db: Path) -> None:
    code, out, err = run(db, "consolidate", "--period", "day", "--at", "2024-03-04",
                         "--tz", "UTC")
    assert code == 0, err
    assert "digest:day:2024-03-04" in out and "Porto" in out and "Ada drafted" in out
    code, out, _ = run(db, "consolidate", "--period", "week", "--at", "2024-W10", "--user",
                       "ada", "--json")
    assert code == 0
    made = [json.loads(line) for line in out.splitlines()]
    assert [m["key"] for m in made] == ["chat:user:ada:digest:day:2024-03-04",
                                        "chat:user:ada:digest:day:2024-03-05",
                                        "chat:user:ada:digest:week:2024-W10"]
    assert all("Porto" in m["content"] and "thesis" not in m["content"] for m in made)
    code, again, _ = run(db, "consolidate", "--period", "week", "--at", "2024-W10", "--user",
                         "ada", "--json")
    assert code == 0 and [json.loads(x)["version"] for x in again.splitlines()] == [1, 1, 1]


def test_nothing_to_digest_and_bad_arguments(db: Path) -> None:
    code, out, err = run(db, "consolidate", "--at", "2020-01-01")
    assert code == 0 and out == "" and "no digest written" in err
    for argv, says in ((["--at", "someday"], "2026-11-28"),
                       (["--tz", "Nowhere/Land"], "IANA"),
                       (["--strategy", "abstractive"], "extractive"),
                       (["--strategy", "simple"], "give --model ollama"),
                       (["--strategy", "Map_Reduce"], "give --model ollama"),
                       (["--target-tokens", "0"], "target_tokens"),
                       (["--session", "s1"], "--session needs a user")):
        code, _, err = run(db, "consolidate", *argv)
        assert code == 1 and says in err, (argv, err)
    code, _, err = run(db, "consolidate", "--period", "year")
    assert code == 2 and "invalid choice" in err
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        assert [d.key for d in htm.digests(limit=100)] == []
