"""The store conformance suite (``htm_core.testing``) on every backend (``store_url``) and
on the in-memory store, and what only the SQL backends have."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from htm_core.errors import SchemaError
from htm_core.store import LongTermStore, open_store
from htm_core.testing import CAPABILITIES, InMemoryStore, StoreConformance
from htm_core.testing.conformance import rec


class TestBackends(StoreConformance):
    capabilities = CAPABILITIES

    @pytest.fixture
    def store_factory(self, store_url: str) -> Callable[[], LongTermStore]:
        return lambda: open_store(store_url)


class TestInMemoryStore(StoreConformance):
    capabilities = CAPABILITIES - {"reopen"}

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[[], LongTermStore]:
        made: list[InMemoryStore] = []

        def make() -> InMemoryStore:
            assert not made, "an in-memory store is opened once per test"
            made.append(InMemoryStore())
            return made[0]

        return make


@pytest.mark.empty_database
def test_unmigrated_store_without_migrate_is_an_error(store_url: str) -> None:
    with pytest.raises(SchemaError, match="migrate"):
        open_store(store_url, migrate=False)


def test_the_sql_backends_expose_their_engine(store_url: str) -> None:
    store = open_store(store_url)
    try:
        store.ensure_robot("r1")
        store.add_many([rec("a", key="k")])
        assert store.engine.dialect.name in ("sqlite", "postgresql")  # type: ignore[attr-defined]
    finally:
        store.close()
