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


def test_both_stores_share_one_sql_layer() -> None:
    from htm_core.store._sql.catalogue import SQLCatalogue
    from htm_core.store._sql.forgetting import SQLForgetting
    from htm_core.store.postgres import PostgresStore
    from htm_core.store.sqlite import SQLiteStore

    for store in (SQLiteStore, PostgresStore):
        assert issubclass(store, SQLForgetting) and issubclass(store, SQLCatalogue)
        for shared in ("tags", "counts", "robots", "operations", "keys_with_prefix", "get",
                       "forget", "restore", "purge", "clear_working", "_filter_sql",
                       "add_tags", "set_importance", "mark_embedding_failures",
                       "retry_embedding_failures"):
            owner = getattr(store, shared).__qualname__.split(".")[0]
            assert owner.startswith("SQL"), f"{store.__name__}.{shared} comes from {owner}"
