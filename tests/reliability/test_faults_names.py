"""Names and other input checked in one place (``htm_core.validation``), on both backends.

Keys and robot names reach log lines and the CLI: a newline or a terminal escape in one
forges a log line or recolours a terminal, so a name to be written refuses control
characters (a name already stored with one can still be read, forgotten and restored). A
``key_prefix`` that no key can start with is refused before any backend sees it. Timeframes
reach back to the year 1 in every time zone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from htm_core import HTM, HashingEmbedder
from htm_core.errors import InvalidKeyError, InvalidTagError, ValidationError
from htm_core.timeframe import parse_timeframe
from htm_core.validation import check_key_prefix

#: Control characters a name may not hold, drawn to collide with harmless look-alikes.
CONTROL_NAMES = ["two\nlines", "carriage\rreturn", "tab\there", "esc\x1b[31mred",
                 "bell\x07", "del\x7f", "c1\x85next-line", "sep\u2028line", "trailing\n"]


@pytest.mark.parametrize("name", CONTROL_NAMES, ids=repr)
def test_keys_with_control_characters_are_refused_and_nothing_is_written(
        htm_factory: Callable[..., HTM], name: str) -> None:
    htm = htm_factory()
    with pytest.raises(InvalidKeyError, match="control character"):
        htm.add("some text", key=name)
    with pytest.raises(InvalidKeyError, match="control character"):
        htm.add_many([{"content": "fine", "key": "fine"}, {"content": "bad", "key": name}])
    assert htm.store.counts("").total == 0


@pytest.mark.parametrize("name", CONTROL_NAMES[:5], ids=repr)
def test_robot_names_with_control_characters_are_refused(
        htm_factory: Callable[..., HTM], name: str) -> None:
    with pytest.raises(InvalidKeyError, match="robot name"):
        htm_factory(robot=name)


@pytest.mark.parametrize("tag", ["a\nb", "user:\x1b[2J", "x\ty", "a:\x85b"], ids=repr)
def test_tags_with_control_characters_are_refused(
        htm_factory: Callable[..., HTM], tag: str) -> None:
    htm = htm_factory()
    with pytest.raises(InvalidTagError):
        htm.add("tagged", tags=[tag])
    assert htm.store.counts("").total == 0


def test_printable_names_and_lookalikes_still_work(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="Ada")
    other = htm_factory(robot="ada")
    keys = ["user:Ada/notes", "user:ada/notes", "ключ", "日本:メモ", "a b", "Ａda"]
    for key in keys:
        htm.add(f"text of {key}", key=key)
    other.add("the other robot", key="ada-robot")
    assert [htm.retrieve(k).key for k in keys] == keys  # type: ignore[union-attr]


def test_a_stored_key_with_a_control_character_can_still_be_read_and_forgotten(
        tmp_path: Path) -> None:
    """A key written by an older htm (or behind its back) keeps working for lookups."""
    db = tmp_path / "htm.db"
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        htm.add("old text", key="old-key")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE memories SET key = 'old\nkey' WHERE key = 'old-key'")
    with HTM(database_url=str(db), embedder=HashingEmbedder()) as htm:
        assert htm.retrieve("old\nkey") is not None
        htm.forget("old\nkey", confirm=True)
        htm.restore("old\nkey")


@pytest.mark.parametrize("prefix", ["\x00", "a\x00", "a\nb", "\x1b", "\ud800"], ids=repr)
def test_a_key_prefix_no_key_can_have_is_refused(prefix: str) -> None:
    with pytest.raises(ValidationError, match="key_prefix"):
        check_key_prefix(prefix)


@pytest.mark.parametrize("prefix", ["\x00", "a\x00", "\x1b"], ids=repr)
def test_list_refuses_such_a_prefix_on_every_backend(htm_factory: Callable[..., HTM],
                                                      prefix: str) -> None:
    """Before, ``"\\x00"`` failed inside PostgreSQL and listed nothing on SQLite."""
    htm = htm_factory()
    htm.add("a note", key="a")
    with pytest.raises(ValidationError, match="key_prefix"):
        htm.list(key_prefix=prefix)


def test_a_key_prefix_of_printable_text_passes() -> None:
    assert check_key_prefix("user:ada/") == "user:ada/"
    assert check_key_prefix(None) is None
    with pytest.raises(ValidationError):
        check_key_prefix("")


@pytest.mark.parametrize("offset_hours", [-12, -5, 0, 1, 9, 14])
def test_year_1_timeframes_work_in_every_time_zone(offset_hours: int) -> None:
    """Before the fix a zone east of UTC refused ``0001-01-01..0001-01-02`` with "give dates
    between the years 1 and 9999" (the local midnight of 1 January of the year 1 is in the
    year 0 in UTC, which ``datetime`` cannot hold)."""
    tz = timezone(timedelta(hours=offset_hours))
    now = datetime(2024, 5, 1, 12, tzinfo=tz)
    for phrase in ("0001-01-01..0001-01-02", "0001-01-01", "0001", "0001-01"):
        start, end = parse_timeframe(phrase, clock=lambda: now)
        assert start is not None and end is not None
        assert start.astimezone(timezone.utc).year == 1
        assert start.timestamp() < end.timestamp()


def test_a_year_1_timeframe_finds_a_year_1_memory(htm_factory: Callable[..., HTM]) -> None:
    tz = timezone(timedelta(hours=3))
    htm = htm_factory(clock=lambda: datetime(2024, 5, 1, 12, tzinfo=tz))
    htm.add("an ancient memory of cats", key="ancient",
            created_at=datetime(1, 1, 2, 12, tzinfo=timezone.utc))  # the first day stored
    htm.add("a recent memory of cats", key="recent")
    hits = htm.recall("cats", timeframe="0001-01-01..0001-01-03", strategy="fulltext")
    assert [h.memory.key for h in hits] == ["ancient"]
