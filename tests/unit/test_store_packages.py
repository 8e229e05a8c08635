"""The store packages keep their public import paths, and each module stays small."""

from __future__ import annotations


def test_public_import_paths_of_the_stores() -> None:
    from htm_core.store import PostgresStore, SQLiteStore
    from htm_core.store.postgres import PostgresStore as PostgresFromPackage
    from htm_core.store.postgres import postgres_url
    from htm_core.store.sqlite import SQLiteStore as SQLiteFromPackage
    from htm_core.store.sqlite import default_sqlite_path, sqlite_url

    assert SQLiteStore is SQLiteFromPackage and PostgresStore is PostgresFromPackage
    assert sqlite_url(":memory:") == "sqlite://"
    assert default_sqlite_path().name == "htm.db"
    assert postgres_url("postgres://u@h/db").startswith("postgresql+psycopg://")


def test_the_sqlite_store_is_built_on_the_shared_sql_roles() -> None:
    from htm_core.store._sql.catalogue import Catalogue
    from htm_core.store._sql.dialect import SQLITE
    from htm_core.store._sql.forgetting import Forgetting
    from htm_core.store._sql.records import RecordChanges
    from htm_core.store._sql.versions import Versions
    from htm_core.store.sqlite import SQLiteStore

    store = SQLiteStore(":memory:")
    try:
        assert isinstance(store.catalogue, Catalogue)
        assert isinstance(store.forgetting, Forgetting)
        assert isinstance(store.record_changes, RecordChanges)
        assert isinstance(store.versioning, Versions)
        assert store.catalogue.tags() == store.tags() == {}
        assert SQLITE.code_point_order == "" and SQLITE.lock_rows == ""
    finally:
        store.close()


def test_the_postgres_store_is_built_on_the_shared_sql_roles(pg_url: str) -> None:
    from htm_core.store._sql.catalogue import Catalogue
    from htm_core.store._sql.dialect import POSTGRES
    from htm_core.store._sql.forgetting import Forgetting
    from htm_core.store._sql.records import RecordChanges
    from htm_core.store._sql.versions import Versions
    from htm_core.store._sql.working import WorkingSetSQL
    from htm_core.store.postgres import PostgresStore

    store = PostgresStore(pg_url)
    try:
        assert isinstance(store.catalogue, Catalogue)
        assert isinstance(store.forgetting, Forgetting)
        assert isinstance(store.record_changes, RecordChanges)
        assert isinstance(store.working_sql, WorkingSetSQL)
        assert isinstance(store.versioning, Versions)
        assert store.catalogue.tags() == store.tags() == {}
        assert POSTGRES.code_point_order == ' COLLATE "C"' and POSTGRES.lock_rows == " FOR UPDATE"
    finally:
        store.close()
