"""PostgreSQL search SQL: pgvector HNSW with an exact fallback, tsvector full text, briefs."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import psycopg
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import (
    DimensionMismatchError,
    SchemaError,
    ValidationError,
)
from ...text import CJK_REGEX, TextQuery, parse_query
from ...validation import check_int
from .. import _common
from ..base import (
    ArmQuery,
    Brief,
    SearchFilters,
)
from ..vector_index import normalise, not_finite
from ._engine import _PARAM, _rows
from ._working import PostgresWorkingSet

#: The memories' estimated mean direction: (newest id, monotonic time checked, the
#: store's embedder, the unit mean).
MeanEstimate = tuple[int, float, "str | None", "list[float] | None"]


def _mean_is_due(cached: MeanEstimate | None) -> bool:
    """Whether :func:`estimate_mean` has anything to check (no read otherwise)."""
    return cached is None or cached[0] < 1000 or time.monotonic() - cached[1] >= 60.0


def estimate_mean(first_row: Callable[[str], Sequence[Any] | None],
                  cached: MeanEstimate | None) -> MeanEstimate:
    """The unit mean direction of the newest 20,000 memory vectors: an estimate, read
    again when the table has grown by a twentieth (or lost rows) or the store's embedder
    changed; once it covers 1,000 rows it is checked at most once a minute
    (:func:`_mean_is_due`), smaller tables on every call. ``first_row(sql)`` runs a
    statement and gives its first row."""
    now = time.monotonic()
    top = first_row("SELECT (SELECT coalesce(max(id), 0) FROM memories), "
                    "(SELECT value FROM htm_meta WHERE key = 'embedder')")
    newest, embedder = (int(top[0] or 0), top[1]) if top else (0, None)
    if (cached is not None and cached[3] is not None and embedder == cached[2]
            and cached[0] <= newest <= cached[0] + cached[0] // 20):
        return cached[0], now, embedder, cached[3]
    row = first_row("SELECT CAST(avg(embedding) AS real[]) FROM (SELECT embedding FROM memories "
                    "WHERE embedding IS NOT NULL ORDER BY id DESC LIMIT 20000) s")
    mean = np.asarray(row[0], dtype=np.float64) if row and row[0] is not None else None
    norm = float(np.linalg.norm(mean)) if mean is not None else 0.0
    unit = (mean / norm).tolist() if mean is not None and norm > 0 else None
    return newest, now, embedder, unit


class _PostgresSearch(PostgresWorkingSet):
    """Vector and full-text search, one statement per search."""

    def _vector_sql(self, unit: np.ndarray, limit: int, filters: SearchFilters,
                    windows: bool = True) -> tuple[str, dict[str, Any]]:
        # ORDER BY the distance alone: a second sort key would stop the HNSW index scan.
        params: dict[str, Any] = {"q": unit, "limit": limit}
        where = self._filter_sql(filters, params)
        return (
            "SELECT m.id, 1 - (m.embedding <=> CAST(:q AS vector)) AS score FROM memories m "
            f"WHERE m.embedding IS NOT NULL AND {where} "
            "ORDER BY m.embedding <=> CAST(:q AS vector) LIMIT :limit", params)

    def _fulltext_sql(self, parsed: TextQuery, limit: int, filters: SearchFilters,
                      common: Sequence[str] | None) -> tuple[str, dict[str, Any]]:
        """The words' hits and the CJK runs' hits, merged as
        :func:`~htm_core.text.merge_hits` merges them, in one statement."""
        params: dict[str, Any] = {"limit": limit}
        if not parsed.runs:
            return self._words_sql(parsed.words, filters, common, params), params
        held = " + ".join(f"CAST(strpos(m.content, :r{i}) > 0 AS integer)"
                          for i in range(len(parsed.runs)))
        found = " OR ".join(f"strpos(m.content, :r{i}) > 0" for i in range(len(parsed.runs)))
        params.update({f"r{i}": run for i, run in enumerate(parsed.runs)})
        where = self._filter_sql(filters, params)
        # The CJK condition is the partial index's, so the scan reads only CJK memories.
        runs = (f"SELECT m.id, CAST({held} AS double precision) "
                "+ CAST(1 AS double precision) / (1 + char_length(m.content)) AS rank "
                f"FROM memories m WHERE m.content ~ '{CJK_REGEX}' AND ({found}) AND {where} "
                "ORDER BY rank DESC, m.id LIMIT :limit")
        if not parsed.words:
            return runs, params
        words = self._words_sql(parsed.words, filters, common, params)
        return (
            "SELECT u.id, sum(u.s) AS rank FROM ("
            f"SELECT w.id, w.rank / (1 + abs(w.rank)) AS s FROM ({words}) w "
            f"UNION ALL SELECT r.id, r.rank AS s FROM ({runs}) r) u "
            "GROUP BY u.id ORDER BY rank DESC, u.id LIMIT :limit", params)

    def _words_sql(self, terms: Sequence[str], filters: SearchFilters,
                   common: Sequence[str] | None, params: dict[str, Any]) -> str:
        """Rank by every term; match only the informative ones, all in one statement.

        The rule is :func:`~htm_core.store._common.informative_terms`'s, worked out in the
        database: a word found in more than ``COMMON_TERM_SHARE`` of the memories does not
        widen the candidates, it only breaks ties among those holding a rarer word; a
        single word, a small store, or a query of common words only matches on every word.
        ``common`` is :meth:`_common_lexemes`: a word is common when each of its lexemes
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
                # `SELECT FROM` (no columns) lets the count skip the heap's all-visible pages.
                rare = [f"numnode({w}) > 0 AND (SELECT count(*) FROM (SELECT FROM memories "
                        f"WHERE tsv @@ {w} LIMIT n.cap + 1) s) <= n.cap" for w in words]
            else:
                params["common"] = list(common)
                lexemes = [f"tsvector_to_array(to_tsvector('english', :w{i}))"
                           for i in range(len(terms))]
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
        where = self._filter_sql(filters, params)
        return (
            # double precision, like the vector score: the two can share one statement.
            f"SELECT m.id, CAST(ts_rank(m.tsv, {query}) AS double precision) AS rank "
            f"FROM memories m WHERE m.tsv @@ {match} AND {where} "
            "ORDER BY rank DESC, m.id LIMIT :limit")

    def _common_lexemes(self) -> list[str] | None:
        """The lexemes found in more than ``COMMON_TERM_SHARE`` of the memories, from the
        table's statistics (``ANALYZE`` keeps the share of rows holding each of the most
        frequent lexemes, so this costs no scan); read at most once a minute. None while
        the table has no statistics yet."""
        cached = self._common
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

        common = self._read("reading the full-text statistics", read)
        self._common = (now, common)
        return common

    def _unit_query(self, vector: Sequence[float],
                    stored_dim: Callable[[], int | None]) -> np.ndarray | None:
        """The checked unit query vector, or None when the store holds no vectors yet.

        The store's dimension is cached once vectors exist (it changes only when the
        vectors are reset; a query of another dimension re-reads it, by ``stored_dim``,
        before it is refused).
        """
        query = normalise(vector)
        dim = self._dim
        if dim is None or dim != query.shape[0]:
            dim = self._dim = stored_dim()
            if dim is None:
                return None
        if query.shape[0] != dim:
            raise DimensionMismatchError(
                f"query vector has dimension {query.shape[0]} but the store holds "
                f"{dim}-dimensional vectors; use the store's embedder")
        if not np.isfinite(query).all():
            raise not_finite("query vector")
        return query

    def _prepare_vector_query(self, conn: Connection, vector: Sequence[float],
                              ef_search: int) -> np.ndarray | None:
        """:meth:`_unit_query`, with ``hnsw.ef_search`` set for this transaction."""
        driver = conn.connection.driver_connection
        query = self._unit_query(vector, lambda: self._stored_dim(driver))  # type: ignore[arg-type]
        if query is not None:
            conn.execute(text("SELECT set_config('hnsw.ef_search', :v, true)"),
                         {"v": str(ef_search)})
        return query

    @staticmethod
    def _session_ef(pg: psycopg.Connection[Any], info: dict[str, Any], ef_search: int) -> None:
        """Set ``hnsw.ef_search`` for the connection's session, only when it holds another
        value (every vector search goes through here, so a pooled connection's value
        never matters, and a warm one costs no round trip)."""
        if info.get("hnsw.ef_search") != ef_search:
            pg.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef_search),))
            info["hnsw.ef_search"] = ef_search

    @staticmethod
    def _stored_dim(pg: psycopg.Connection[Any]) -> int | None:
        row = pg.execute("SELECT value FROM htm_meta WHERE key = 'embedding_dim'").fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def briefs(self, ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        """Id, content, robot and creation time of the visible ``ids`` that pass ``filters``."""
        if not ids:
            return {}
        params: dict[str, Any] = {"ids": sorted({int(i) for i in ids})}
        where = self._filter_sql(filters, params)
        rows = self._quick("reading memories", lambda pg, _info: _rows(
            pg, "SELECT m.id, m.content, r.name, m.created_at FROM memories m "
            f"JOIN robots r ON r.id = m.robot_id WHERE m.id = ANY(:ids) AND {where}", params))
        return {int(r[0]): Brief(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows}

    def vector_centroid(self) -> list[float] | None:
        """The mean direction of the newest 20,000 vectors (an estimate, see
        :func:`estimate_mean`)."""
        cached = self._centroid
        if not _mean_is_due(cached):
            assert cached is not None
            return cached[3]
        self._centroid = self._read("estimating the vector centroid", lambda conn: estimate_mean(
            lambda sql: conn.execute(text(sql)).first(), cached))
        return self._centroid[3]

    def vector_search(self, vector: Sequence[float], *, limit: int, filters: SearchFilters,
                      windows: bool = True, ef_search: int | None = None
                      ) -> list[tuple[int, float]]:
        """Top ``limit`` (id, cosine similarity), best first, filters applied in SQL.

        Uses the HNSW index with ``hnsw.ef_search`` = ``ef_search`` (default the store's,
        raised to ``limit`` when smaller). When the approximate search returns fewer than
        ``limit`` rows (a selective filter, or a small store), it is re-run exactly.
        """
        ef = check_int("ef_search", ef_search if ef_search is not None else self.ef_search,
                        1, 1000)
        return self._search([ArmQuery(vector=vector, limit=limit, filters=filters,
                                      windows=windows)], ef)[0]

    def fulltext_search(self, query: str, *, limit: int,
                        filters: SearchFilters) -> list[tuple[int, float]]:
        """Top ``limit`` (id, ``ts_rank``) for the words of ``query``, OR-ed, best first."""
        return self._search([ArmQuery(text=query, limit=limit, filters=filters)],
                            self.ef_search)[0]

    def search_arms(self, arms: Sequence[ArmQuery]) -> list[list[tuple[int, float]]]:
        """All the searches in one statement (one round trip), results in the order asked."""
        return self._search(arms, self.ef_search)

    def _search(self, arms: Sequence[ArmQuery], ef: int) -> list[list[tuple[int, float]]]:
        parts: dict[int, tuple[str, dict[str, Any]]] = {}
        # Read (at most once a minute) before taking a connection for the searches.
        common = self._common_lexemes() if any(a.text for a in arms) else None
        deepest = max((a.limit for a in arms if a.vector is not None), default=0)

        def run(pg: psycopg.Connection[Any], info: dict[str, Any]) -> list[Any]:
            parts.clear()
            for k, arm in enumerate(arms):
                if arm.vector is not None:
                    unit = self._unit_query(arm.vector, lambda: self._stored_dim(pg))
                    if unit is not None:
                        self._session_ef(pg, info, min(1000, max(ef, deepest)))
                    if unit is not None and np.any(unit):
                        parts[k] = self._vector_sql(unit, arm.limit, arm.filters, arm.windows)
                else:
                    parsed = parse_query(arm.text or "")
                    if parsed:
                        parts[k] = self._fulltext_sql(parsed, arm.limit, arm.filters, common)
            if not parts:
                return []
            if len(parts) == 1:
                (k, (sql, params)), = parts.items()
                return [(k, *row) for row in _rows(pg, sql, params)]
            union, merged = [], {}
            for k, (sql, params) in parts.items():
                # Each arm's parameters get a prefix of their own.
                renamed = _PARAM.sub(rf":a{k}_\1", sql)
                merged.update({f"a{k}_{name}": value for name, value in params.items()})
                union.append(f"SELECT {k} AS arm, s.* FROM ({renamed}) s")
            sql = " UNION ALL ".join(f"({part})" for part in union)
            return _rows(pg, sql, merged)

        rows = self._quick("search", run)
        found: list[list[tuple[int, float]]] = [[] for _ in arms]
        for row in rows:
            found[int(row[0])].append((int(row[1]), float(row[2])))
        for k, arm in enumerate(arms):
            if arm.vector is not None and k in parts and len(found[k]) < arm.limit:
                found[k] = self._exact_vector_search(*parts[k])
            elif arm.vector is not None:
                # Each arm's own order (by distance; a stable sort keeps the index's order
                # of equal scores), whatever order the union handed its rows back in.
                found[k].sort(key=lambda hit: -hit[1])
            else:
                found[k].sort(key=lambda hit: (-hit[1], hit[0]))  # its ORDER BY
        return found

    def _exact_vector_search(self, sql: str, params: dict[str, Any]) -> list[tuple[int, float]]:
        """The vector search again with index scans off (this transaction only): a filter
        or a small store left the approximate search short."""
        def exact(conn: Connection) -> list[Any]:
            conn.execute(text("SELECT set_config('enable_indexscan', 'off', true)"))
            return list(conn.execute(text(sql), params).all())

        return [(int(r[0]), float(r[1])) for r in self._run("vector search", exact)]

    def explain_search(self, *, vector: Sequence[float] | None = None, query: str | None = None,
                       limit: int = 10, filters: SearchFilters | None = None,
                       ef_search: int | None = None, seqscan: bool = True) -> str:
        """The PostgreSQL plan of the vector (``vector=``) or full-text (``query=``) search.

        The statement is the one :meth:`vector_search` / :meth:`fulltext_search` run, so
        the plan shows whether the HNSW and GIN indexes are used. ``seqscan=False`` sets
        ``enable_seqscan = off`` for the explain (useful on small tables, where a
        sequential scan is cheaper and the planner rightly prefers it).
        """
        if (vector is None) == (query is None):
            raise ValidationError("explain_search needs exactly one of vector= or query=")
        chosen = filters or SearchFilters()

        def explain(conn: Connection) -> str:
            if not seqscan:
                conn.execute(text("SELECT set_config('enable_seqscan', 'off', true)"))
            if vector is not None:
                unit = self._prepare_vector_query(conn, vector, ef_search or self.ef_search)
                if unit is None:
                    raise SchemaError("the store holds no vectors yet; add some before explaining")
                sql, params = self._vector_sql(unit, limit, chosen)
            else:
                parsed = parse_query(query or "") or TextQuery(words=("_",))
                sql, params = self._fulltext_sql(parsed, limit, chosen, self._common_lexemes())
            return "\n".join(str(r[0]) for r in conn.execute(text("EXPLAIN " + sql), params))

        return self._run("explaining a search", explain)
