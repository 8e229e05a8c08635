"""What both SQL stores mean, written once.

The SQLite and PostgreSQL stores share their tables and what they mean: which memories are
visible, how filters, tags and key prefixes select them, what the catalogue counts, how
the operations log reads, and how the schema version gates an open. This package says it
once; each backend package (:mod:`htm_core.store.sqlite`, :mod:`htm_core.store.postgres`)
supplies the few things that differ (how a read runs, how a time or a JSON value is stored)
as small hooks, and keeps its hot paths (batch add, search, briefs) in its own dialect.
"""
