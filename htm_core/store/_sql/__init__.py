"""What both SQL stores mean, written once.

The SQLite and PostgreSQL stores share their tables and what they mean: which memories are
visible, how filters, tags and key prefixes select them, what the catalogue counts, how
never-forget, enrichment's changes and versions write, how the operations log reads, and
how the schema version gates an open. This package says it once, as role objects
(:class:`~htm_core.store._sql.catalogue.Catalogue`,
:class:`~htm_core.store._sql.forgetting.Forgetting`,
:class:`~htm_core.store._sql.records.RecordChanges`,
:class:`~htm_core.store._sql.versions.Versions`, the working-set SQL) built on the parts a
backend supplies (:mod:`htm_core.store._sql.parts`) and its
:class:`~htm_core.store._sql.dialect.Dialect` value. Each backend package
(:mod:`htm_core.store.sqlite`, :mod:`htm_core.store.postgres`) keeps its hot paths (batch
add, search, briefs) in its own SQL.
"""
