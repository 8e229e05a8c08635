"""Secrets: every form a database address can carry a password in is masked (#25 item 7)."""

from __future__ import annotations

import pytest

from htm_core.secrets import mask_text, mask_url

SECRET = "s3cr3t-Pw"


@pytest.mark.parametrize("url", [
    f"postgresql://ana:{SECRET}@db:5432/htm",
    f"postgresql+psycopg://ana:{SECRET}@db/htm?sslmode=require",
    f"postgresql://ana@db/htm?password={SECRET}",
    f"postgresql://ana@db/htm?sslmode=require&password={SECRET}",
    f"postgresql://ana@db/htm?PASSWORD={SECRET}&sslmode=require",
    f"postgresql://ana@db/htm?sslpassword={SECRET}",
    f"host=db user=ana password={SECRET} dbname=htm",
    f"host=db password='{SECRET} with space' dbname=htm",
    f"host=db password = \"{SECRET}\"",
    f"postgresql//ana:{SECRET}@db/htm",
    f"postgresql://ana:{SECRET}@x@db/htm",
])
def test_every_password_form_is_masked(url: str) -> None:
    masked = mask_url(url)
    assert SECRET not in masked
    assert "***" in masked


@pytest.mark.parametrize("url", [
    "memories.db", "sqlite:///tmp/x.db", ":memory:", "postgresql://ana@db:5432/htm",
    "postgresql://db:5432/htm?sslmode=require",
])
def test_addresses_without_a_password_are_unchanged(url: str) -> None:
    assert mask_url(url) == url


def test_text_holding_an_address_is_masked() -> None:
    message = (f"connection to postgresql://ana:{SECRET}@db/htm failed; "
               f"retry with host=db password={SECRET}")
    masked = mask_text(message)
    assert SECRET not in masked
    assert masked.startswith("connection to postgresql://ana:***@db/htm failed")
