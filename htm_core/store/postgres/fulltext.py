"""PostgreSQL full-text search SQL: ``tsvector`` words, CJK runs, common words by statistics."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...text import CJK_REGEX, TextQuery
from .. import _common
from ..base import SearchFilters
from .engine import PostgresDatabase, driver_rows
from .rows import FilterSQL

__all__ = ["CommonLexemes", "fulltext_sql", "read_rare_terms", "term_counts_sql"]


def fulltext_sql(parsed: TextQuery, limit: int, filters: SearchFilters,
                 common: Sequence[str] | None, filter_sql: FilterSQL
                 ) -> tuple[str, dict[str, Any]]:
    """The words' hits and the CJK runs' hits, merged as
    :func:`~htm_core.text.merge_hits` merges them, in one statement."""
    params: dict[str, Any] = {"limit": limit}
    if not parsed.runs:
        return _words_sql(parsed.words, filters, common, params, filter_sql), params
    held = " + ".join(f"CAST(strpos(m.content, :r{i}) > 0 AS integer)"
                      for i in range(len(parsed.runs)))
    found = " OR ".join(f"strpos(m.content, :r{i}) > 0" for i in range(len(parsed.runs)))
    params.update({f"r{i}": run for i, run in enumerate(parsed.runs)})
    where = filter_sql(filters, params)
    # The CJK condition is the partial index's, so the scan reads only CJK memories.
    runs = (f"SELECT m.id, CAST({held} AS double precision) "
            "+ CAST(1 AS double precision) / (1 + char_length(m.content)) AS rank "
            f"FROM memories m WHERE m.content ~ '{CJK_REGEX}' AND ({found}) AND {where} "
            "ORDER BY rank DESC, m.id LIMIT :limit")
    if not parsed.words:
        return runs, params
    words = _words_sql(parsed.words, filters, common, params, filter_sql)
    return (
        "SELECT u.id, sum(u.s) AS rank FROM ("
        f"SELECT w.id, w.rank / (1 + abs(w.rank)) AS s FROM ({words}) w "
        f"UNION ALL SELECT r.id, r.rank AS s FROM ({runs}) r) u "
        "GROUP BY u.id ORDER BY rank DESC, u.id LIMIT :limit", params)

def _words_sql(terms: Sequence[str], filters: SearchFilters, common: Sequence[str] | None,
               params: dict[str, Any], filter_sql: FilterSQL) -> str:
    """Rank by every term; match only the informative ones, all in one statement.

    The rule is :func:`~htm_core.store._common.informative_terms`'s, worked out in the
    database: a word found in more than ``COMMON_TERM_SHARE`` of the memories does not
    widen the candidates, it only breaks ties among those holding a rarer word; a
    single word, a small store, or a query of common words only matches on every word.
    ``common`` is :class:`CommonLexemes`'s answer: a word is common when each of its lexemes
    is among them. Without statistics (None), each word's matches are counted,
    stopping one past the threshold. A term with no lexeme is never the rare one (it
    would leave the match empty).
    """
    # Each term is a bound value through phraseto_tsquery: no tsquery syntax can get
    # in; a term of several words (``v2 1``) is a phrase.
    params.update({f"w{i}": t for i, t in enumerate(terms)})
    words = [f"phraseto_tsquery('english', :w{i})" for i in range(len(terms))]
    query = " || ".join(words)
    match = query
    if len(terms) > 1:
        params["share"] = _common.COMMON_TERM_SHARE
        params["small"] = _common.MIN_MEMORIES_FOR_COMMON
        if common is None:
            rare = [f"numnode({w}) > 0 AND {_capped_count(w, None)} <= n.cap" for w in words]
        else:
            params["common"] = list(common)
            lexemes = [_lexemes(i) for i in range(len(terms))]
            rare = [f"cardinality({x}) > 0 AND NOT ({x} <@ CAST(:common AS text[]))"
                    for x in lexemes]
        kept = " || ".join(f"CASE WHEN c.k[{i + 1}] THEN {w} ELSE ''::tsquery END"
                           for i, w in enumerate(words))
        match = (
            "(SELECT CASE WHEN c.total < :small OR NOT (true = ANY(c.k)) "
            f"THEN {query} ELSE {kept} END "
            f"FROM (SELECT n.total, ARRAY[{', '.join(f'({r})' for r in rare)}] AS k "
            "FROM (SELECT t.total, floor(t.total * :share)::bigint AS cap "
            "FROM (SELECT coalesce(max(id), 0) AS total FROM memories) t) n "
            # OFFSET 0 keeps the counts from being inlined into (and run again by)
            # each CASE branch.
            "OFFSET 0) c)")
    where = filter_sql(filters, params)
    return (
        # double precision, like the vector score: the two can share one statement.
        f"SELECT m.id, CAST(ts_rank(m.tsv, {query}) AS double precision) AS rank "
        f"FROM memories m WHERE m.tsv @@ {match} AND {where} "
        "ORDER BY rank DESC, m.id LIMIT :limit")


def _capped_count(word: str, where: str | None) -> str:
    """How many memories (those passing ``where``, on ``memories m``; None: every row)
    match the tsquery ``word``, counted up to ``n.cap + 1``."""
    # `SELECT FROM` (no columns) lets the count skip the heap's all-visible pages.
    test = f"m.tsv @@ {word}" if where is None else f"m.tsv @@ {word} AND {where}"
    return f"(SELECT count(*) FROM (SELECT FROM memories m WHERE {test} LIMIT n.cap + 1) s)"


def _lexemes(i: int) -> str:
    """The lexemes of the term bound as ``:w{i}``, as a text array."""
    return f"tsvector_to_array(to_tsvector('english', :w{i}))"


def term_counts_sql(terms: Sequence[str], filters: SearchFilters,
                    common: Sequence[str] | None, filter_sql: FilterSQL
                    ) -> tuple[str, dict[str, Any]]:
    """How many memories pass ``filters`` and, for each term, how many of them hold it,
    counted up to one past the rare-word cap (``COMMON_TERM_SHARE`` of them), as the
    full-text arm counts (:func:`_words_sql`): without filters, every row written (the
    newest id) and, with ``common``, a word all of whose lexemes the statistics call
    common counted as past the cap without a scan. A term with no lexeme holds none."""
    params: dict[str, Any] = {f"w{i}": t for i, t in enumerate(terms)}
    params["share"] = _common.COMMON_TERM_SHARE
    if filters.is_empty:
        where, total = None, "SELECT coalesce(max(id), 0) AS total FROM memories"
    else:
        where = filter_sql(filters, params)
        total = f"SELECT count(*) AS total FROM memories m WHERE {where}"
    counts = []
    for i in range(len(terms)):
        word = f"phraseto_tsquery('english', :w{i})"
        known = ""
        if common is not None and where is None:
            params["common"] = list(common)
            known = (f"WHEN cardinality({_lexemes(i)}) > 0 "
                     f"AND {_lexemes(i)} <@ CAST(:common AS text[]) THEN n.cap + 1 ")
        counts.append(f"CASE WHEN numnode({word}) = 0 THEN 0 {known}"
                      f"ELSE {_capped_count(word, where)} END")
    return (f"SELECT n.total, ARRAY[{', '.join(counts)}]::bigint[] FROM (SELECT t.total, "
            f"floor(t.total * :share)::bigint AS cap FROM ({total}) t) n", params)


def read_rare_terms(db: PostgresDatabase, terms: Sequence[str], filters: SearchFilters,
                    common: Sequence[str] | None, filter_sql: FilterSQL) -> list[str]:
    """The ``terms`` found in at least one and at most ``COMMON_TERM_SHARE`` of the
    memories passing ``filters`` (:func:`~htm_core.store._common.rare_terms`), counted
    in one statement (:func:`term_counts_sql`)."""
    if not terms:
        return []
    sql, params = term_counts_sql(terms, filters, common, filter_sql)
    [(total, counts)] = db.quick("counting the query's words",
                                 lambda pg, _info: driver_rows(pg, sql, params))
    found = dict(zip(terms, counts, strict=True))
    return _common.rare_terms(terms, int(total), lambda term, _cap: int(found[term]))


class CommonLexemes:
    """The words too common to widen a full-text match, from the table's statistics.

    ``cached`` is the last read (monotonic time, lexemes); set it to None to read again.
    """

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db
        self.cached: tuple[float, list[str] | None] | None = None

    def __call__(self) -> list[str] | None:
        """The lexemes found in more than ``COMMON_TERM_SHARE`` of the memories, from the
        table's statistics (``ANALYZE`` keeps the share of rows holding each of the most
        frequent lexemes, so this costs no scan); read at most once a minute. None while
        the table has no statistics yet."""
        cached = self.cached
        now = time.monotonic()
        if cached is not None and now - cached[0] < 60.0:
            return cached[1]

        def read(conn: Connection) -> list[str] | None:
            row = conn.execute(text(
                "SELECT CAST(CAST(most_common_elems AS text) AS text[]), most_common_elem_freqs "
                "FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'memories' "
                "AND attname = 'tsv'")).first()
            if row is None or row[0] is None:
                return None
            # The frequencies end with three summary numbers; zip stops at the lexemes.
            return [str(e) for e, f in zip(row[0], row[1], strict=False)
                    if f > _common.COMMON_TERM_SHARE]

        common = self.db.read("reading the full-text statistics", read)
        self.cached = (now, common)
        return common
