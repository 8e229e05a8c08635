"""``check_stored_text``: a read compares the CRC-32 of the text with the stored one, and a
row without one (written before the column existed) with the stored SHA-256."""

from __future__ import annotations

import pytest

from htm_core.errors import DatabaseCorruptError
from htm_core.store.values import check_stored_text, content_crc, content_hash

TEXT = "Ada's bank PIN is 4711 — ünïcode too"


def test_text_matching_its_checksums_passes() -> None:
    check_stored_text("k", 1, TEXT, content_crc(TEXT), content_hash(TEXT), "sqlite:///x.db")
    check_stored_text("k", 1, TEXT, None, content_hash(TEXT), "sqlite:///x.db")


@pytest.mark.parametrize("position", [0, 5, len(TEXT) - 1])
def test_a_changed_character_is_refused_naming_the_memory_and_htm_check(position: int) -> None:
    damaged = TEXT[:position] + chr(ord(TEXT[position]) ^ 1) + TEXT[position + 1:]
    with pytest.raises(DatabaseCorruptError, match=r"'k' \(id 1\).*sqlite:///x.db.*htm check"):
        check_stored_text("k", 1, damaged, content_crc(TEXT), content_hash(TEXT),
                          "sqlite:///x.db")
    with pytest.raises(DatabaseCorruptError):  # no CRC stored: the SHA-256 decides
        check_stored_text("k", 1, damaged, None, content_hash(TEXT), "sqlite:///x.db")


def test_the_crc_decides_when_there_is_one() -> None:
    """A damaged CRC is refused; the SHA-256 (used by ``htm check`` and the embedding cache)
    is not read when a CRC is stored."""
    with pytest.raises(DatabaseCorruptError):
        check_stored_text("k", 1, TEXT, content_crc(TEXT) ^ 4, content_hash(TEXT), "u")
    check_stored_text("k", 1, TEXT, content_crc(TEXT), "not the hash", "u")


def test_the_crc_is_of_the_utf8_bytes() -> None:
    import zlib

    assert content_crc(TEXT) == zlib.crc32(TEXT.encode("utf-8"))
    assert 0 <= content_crc(TEXT) < 2**32
