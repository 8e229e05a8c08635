"""Which memories a read sees, in SQL both backends run: visibility, filters, key prefixes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...identity import prefix_range
from ...tags import below
from ..base import SearchFilters
from .dialect import Dialect

__all__ = ["VISIBLE", "filter_sql", "prefix_sql", "tag_sql"]

#: The rows recall, search and the catalogue see: memories not forgotten.
VISIBLE = "m.forgotten_at IS NULL"


def filter_sql(dialect: Dialect, filters: SearchFilters, params: dict[str, Any], *,
               visible_only: bool = True, fenced_tags: bool = False) -> str:
    """The ``WHERE`` clause (on ``memories m``) of ``filters``; binds its values.

    With ``fenced_tags`` (PostgreSQL) the tag test stays a subquery run for each row the
    scan hands over, against the tags' ids read once (``OFFSET 0`` keeps PostgreSQL from
    turning it into a join that reads the tag's memories first), so an index scan (HNSW
    in distance order, GIN for words) can drive the search.
    """
    clauses = [VISIBLE if visible_only else "1 = 1"]
    if filters.start is not None:
        clauses.append("m.created_at >= :start")
        params["start"] = dialect.time_in(filters.start)
    if filters.end is not None:
        clauses.append("m.created_at < :end")
        params["end"] = dialect.time_in(filters.end)
    if filters.robot is not None:
        clauses.append("m.robot_id = (SELECT id FROM robots WHERE name = :robot)")
        params["robot"] = filters.robot
    if filters.kinds:
        names = [f"kind{i}" for i in range(len(filters.kinds))]
        params.update(zip(names, filters.kinds, strict=True))
        clauses.append(f"m.kind IN ({', '.join(':' + n for n in names)})")
    if filters.sources:
        names = [f"source{i}" for i in range(len(filters.sources))]
        params.update(zip(names, filters.sources, strict=True))
        clauses.append(f"m.source IN ({', '.join(':' + n for n in names)})")
    if filters.min_confidence is not None:  # NULL >= x is never true
        clauses.append("m.confidence >= :min_confidence")
        params["min_confidence"] = filters.min_confidence
    if filters.tags and fenced_tags:
        clauses.append(
            "EXISTS (SELECT 1 FROM memory_tags mt WHERE mt.memory_id = m.id AND mt.tag_id = "
            f"ANY(ARRAY(SELECT t.id FROM tags t WHERE {tag_sql(dialect, filters.tags, params)}))"
            " OFFSET 0)")
    elif filters.tags:
        clauses.append(
            "EXISTS (SELECT 1 FROM memory_tags mt JOIN tags t ON t.id = mt.tag_id "
            f"WHERE mt.memory_id = m.id AND {tag_sql(dialect, filters.tags, params)})")
    return " AND ".join(clauses)


def tag_sql(dialect: Dialect, tags: Sequence[str], params: dict[str, Any]) -> str:
    """The test (on ``tags t``) that ``t.name`` is one of ``tags`` or a tag below one,
    exactly; binds the values."""
    ors = []
    for i, tag in enumerate(tags):
        params[f"tag{i}"] = tag
        ors.append(f"t.name = :tag{i} OR "
                   + prefix_sql(dialect, "t.name", f"tagp{i}", below(tag), params))
    return f"({' OR '.join(ors)})"


def prefix_sql(dialect: Dialect, column: str, name: str, prefix: str,
               params: dict[str, Any]) -> str:
    """``column`` starts with ``prefix``, exactly (:mod:`htm_core.identity`): a range in
    code point order, which the column's index serves; binds ``name_lo``/``name_hi``."""
    low, high = prefix_range(prefix)
    ordered = f"{column}{dialect.code_point_order}"
    params[f"{name}_lo"] = low
    if high is None:
        return f"{ordered} >= :{name}_lo"
    params[f"{name}_hi"] = high
    return f"({ordered} >= :{name}_lo AND {ordered} < :{name}_hi)"
