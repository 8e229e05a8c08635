"""What both SQL stores mean, written once: which memories are visible, how filters, tags
and key prefixes select them, what the catalogue counts, how never-forget, enrichment's
changes and versions write, and how the schema version gates an open. Role objects
(``Catalogue``, ``Forgetting``, ``RecordChanges``, ``Versions``, the working-set SQL) built
on the parts a backend supplies (:mod:`.parts`) and its :class:`~.dialect.Dialect`; each
backend keeps its hot paths (batch add, search, briefs) in its own SQL. See
docs/architecture.md ("Stores").
"""
