"""Every memory row carries the CRC-32 of its text (schema version 7), which reads compare.

A store of version 6 is migrated: SQLite fills the checksum of every existing row; on
PostgreSQL rows written before keep none (filling it would rewrite every row and its
full-text vector) and their reads compare the SHA-256 instead. Damage is refused either way.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import text

from htm_core import HTM
from htm_core.errors import DatabaseCorruptError
from htm_core.store import SCHEMA_VERSION
from htm_core.store.values import content_crc


def _crc_of(htm: HTM, key: str) -> int | None:
    with htm.store.engine.begin() as conn:  # type: ignore[attr-defined]
        return conn.execute(text("SELECT content_crc FROM memories WHERE key = :k"),
                            {"k": key}).scalar_one()


def _damage(htm: HTM, key: str) -> None:
    with htm.store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(text("UPDATE memories SET content = content || '!' WHERE key = :k"),
                     {"k": key})


def test_every_write_stores_the_crc_of_its_text(htm_factory: Callable[..., HTM]) -> None:
    htm = htm_factory(robot="r")
    htm.add("first text", key="a")
    htm.add_many([{"content": f"batch text {i} é", "key": f"b{i}"} for i in range(3)])
    htm.update("a", content="second text")
    assert _crc_of(htm, "a") == content_crc("second text")
    assert [_crc_of(htm, f"b{i}") for i in range(3)] == [
        content_crc(f"batch text {i} é") for i in range(3)]


def test_a_store_of_version_6_is_migrated_and_still_refuses_damage(
        htm_factory: Callable[..., HTM], store_url: str) -> None:
    sqlite = store_url.endswith(".db")
    htm = htm_factory(robot="r")
    htm.add("an old note", key="old")
    htm.add("another old note", key="older")
    with htm.store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(text("ALTER TABLE memories DROP COLUMN content_crc"))
        conn.execute(text("ALTER TABLE robots DROP COLUMN working_memory_tokens"))
        conn.execute(text("UPDATE htm_meta SET value = '6' WHERE key = 'schema_version'"))
    htm.close()
    again = htm_factory(robot="r", working_memory_tokens=900)
    assert again.store.schema_version() == SCHEMA_VERSION
    assert {r.name: r.working_memory_tokens for r in again.robots()} == {"r": 900}
    assert _crc_of(again, "old") == (content_crc("an old note") if sqlite else None)
    assert again.store.get("old").content == "an old note"  # type: ignore[union-attr]
    again.add("a new note", key="new")
    assert _crc_of(again, "new") == content_crc("a new note")
    for key in ("older", "new"):
        _damage(again, key)
        with pytest.raises(DatabaseCorruptError, match=f"'{key}'.*htm check"):
            again.store.get(key)


@pytest.mark.parametrize("damage", [
    "content = content || '!'",
    "content_crc = content_crc + 1",
    "content_hash = 'f' || substr(content_hash, 2)",
])
def test_htm_check_lists_a_memory_whose_text_or_checksum_was_damaged(
        htm_factory: Callable[..., HTM], store_url: str, damage: str) -> None:
    """On both backends, ``htm check`` lists the damaged memory among sound ones (on
    PostgreSQL it read every memory through the store before, and a damaged text stopped
    it with an error telling the user to run ``htm check``)."""
    from htm_core.check import check_store

    htm = htm_factory(robot="r")
    htm.add_many([{"content": f"note {i}", "key": f"k{i}"} for i in range(5)])
    with htm.store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(text(f"UPDATE memories SET {damage} WHERE key = 'k3'"))
    htm.close()
    report = check_store(store_url)
    content = [f for f in report.findings if f.check == "content"]
    assert not report.ok and len(content) == 1 and not content[0].ok
    assert "'k3'" in content[0].detail and "'k2'" not in content[0].detail
