"""PostgreSQL search: pgvector HNSW with an exact fallback, tsvector full text, all the
arms of a recall in one statement, briefs, the vector centroid, ``explain_search``."""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import psycopg
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ...errors import (
    DimensionMismatchError,
    SchemaError,
    ValidationError,
)
from ...tags import SEPARATOR
from ...text import TextQuery, parse_query
from ...validation import check_int
from .._sql.dialect import POSTGRES
from .._sql.filters import tag_sql
from ..base import (
    ArmQuery,
    Brief,
    SearchFilters,
)
from ..vector_index import normalise, not_finite
from .engine import PARAM, PostgresDatabase, driver_rows
from .fulltext import CommonLexemes, fulltext_sql, read_rare_terms
from .rows import FilterSQL

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


#: A tag filter (a user's scope) matching fewer memories than this is searched exactly:
#: reading its rows costs less than an HNSW scan (docs/benchmarks.md, "Many users in one store").
EXACT_SCOPE_ROWS = 2000
#: The least ``hnsw.ef_search`` of a search through the HNSW index with a tag filter: the
#: filter drops the candidates of other scopes, so the scan needs more of them.
SCOPED_EF_SEARCH = 400
#: A scope of at least this many memories is searched with ``hnsw.ef_search`` at least
#: :data:`LARGE_SCOPE_EF_SEARCH`: a large scope's neighbourhoods are dense with its own
#: memories, and the scan needs more candidates to find the nearest of them.
LARGE_SCOPE_ROWS = 20_000
LARGE_SCOPE_EF_SEARCH = 1000

#: How long a scope's counted size (:class:`ScopeSizes`) is used before it is counted again.
SCOPE_ROWS_SECONDS = 30.0
#: How many scopes' sizes a searcher keeps (the least recently used go first).
SCOPE_ROWS_KEPT = 10_000
#: A counted scope: (the cap it was counted up to, the filter's tags).
ScopeKey = tuple[int, tuple[str, ...]]

#: pgvector's version in the database.
VECTOR_VERSION = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"


def iterative_scans(version: str | None) -> bool:
    """Whether pgvector ``version`` (its ``extversion``) has iterative index scans (0.8.0
    and later): a filtered HNSW scan then goes on until it has found enough rows.

    >>> iterative_scans("0.8.0"), iterative_scans("0.10.1"), iterative_scans("0.6.2")
    (True, True, False)
    """
    found = re.match(r"(\d+)\.(\d+)", version or "")
    return found is not None and (int(found[1]), int(found[2])) >= (0, 8)


def scope_rows_sql(filters: SearchFilters, cap: int) -> tuple[str, dict[str, Any]]:
    """The statement counting the memories tagged with ``filters.tags`` (or below), up to
    ``cap``: an index read that stops at ``cap``, forgotten memories included."""
    params: dict[str, Any] = {"cap": cap}
    test = tag_sql(POSTGRES, filters.tags, params)
    return ("SELECT count(*) FROM (SELECT 1 FROM memory_tags mt JOIN tags t ON t.id = mt.tag_id "
            f"WHERE {test} LIMIT :cap) s", params)


def memory_vector_sql(unit: np.ndarray, limit: int, filters: SearchFilters,
                      filter_sql: FilterSQL, fenced: bool = False) -> tuple[str, dict[str, Any]]:
    """The memories' vector search: one HNSW scan, ``filters`` applied (``fenced``: the
    tag test on each row the scan gives, so that the index drives the search)."""
    # ORDER BY the distance alone: a second sort key would stop the HNSW index scan.
    params: dict[str, Any] = {"q": unit, "limit": limit}
    where = filter_sql(filters, params, fenced_tags=fenced)
    return (
        "SELECT m.id, 1 - (m.embedding <=> CAST(:q AS vector)) AS score FROM memories m "
        f"WHERE m.embedding IS NOT NULL AND {where} "
        "ORDER BY m.embedding <=> CAST(:q AS vector) LIMIT :limit", params)


class ScopeSizes:
    """The counted sizes of tag filters (users' scopes), kept for ``seconds`` each.

    A size only chooses the plan of a scoped search (read the scope whole, or go
    through the index with the tag tested on each row): a scope counted small that has
    grown is still read whole and sorted, exactly, every hit found; one counted large
    that has shrunk goes through the index as a large scope does, and a vector search
    that comes back short of its limit is run again exactly. So a size may be stale for
    a while, and this process's own writes drop the sizes of the scopes they touch
    (:meth:`wrote`) at once. Keyed by the filter's tags exactly as given (``Ada`` and
    ``ada`` are two scopes) and the cap they were counted up to; at most ``kept`` sizes,
    the least recently used dropped first.
    """

    def __init__(self, *, seconds: float = SCOPE_ROWS_SECONDS, kept: int = SCOPE_ROWS_KEPT) -> None:
        self.seconds = seconds
        self.kept = kept
        # (cap, tags) -> (monotonic time counted, size up to cap)
        self._sizes: OrderedDict[ScopeKey, tuple[float, int]] = OrderedDict()
        # Each filter tag -> the keys naming it (what a write of a tag at or below drops).
        self._by_tag: dict[str, set[ScopeKey]] = {}
        self._lock = threading.Lock()

    def get(self, cap: int, tags: tuple[str, ...]) -> int | None:
        """The size of ``tags`` counted up to ``cap`` within the last ``seconds``, or None."""
        with self._lock:
            found = self._sizes.get((cap, tags))
            if found is None or time.monotonic() - found[0] >= self.seconds:
                return None
            self._sizes.move_to_end((cap, tags))
            return found[1]

    def put(self, cap: int, tags: tuple[str, ...], size: int) -> None:
        """Keep ``size``, the count of ``tags`` up to ``cap``."""
        key = (cap, tags)
        with self._lock:
            self._sizes[key] = (time.monotonic(), size)
            self._sizes.move_to_end(key)
            for tag in tags:
                self._by_tag.setdefault(tag, set()).add(key)
            while len(self._sizes) > self.kept:
                self._drop(next(iter(self._sizes)))

    def wrote(self, tags: Iterable[str] | None) -> None:
        """Memories tagged ``tags`` were written (added, tagged, deleted): drop the sizes of
        the filters they fall under (a filter tag that is one of them or above one);
        None drops every size."""
        with self._lock:
            if tags is None:
                self._sizes.clear()
                self._by_tag.clear()
                return
            for tag in set(tags):
                # The tag itself and every tag it is below ("a:b:c": "a:b", "a").
                parts = tag.split(SEPARATOR)
                for n in range(1, len(parts) + 1):
                    for key in list(self._by_tag.get(SEPARATOR.join(parts[:n]), ())):
                        self._drop(key)

    def _drop(self, key: ScopeKey) -> None:
        self._sizes.pop(key, None)
        for tag in key[1]:
            keys = self._by_tag.get(tag)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_tag[tag]


class VectorSQL(Protocol):
    """The statement of a vector search (``windows``: each memory's windows count too;
    ``fenced``: the tag filter tested on each row of the index scan)."""

    def __call__(self, unit: np.ndarray, limit: int, filters: SearchFilters,
                 windows: bool = True, fenced: bool = False) -> tuple[str, dict[str, Any]]: ...


class PostgresSearcher:
    """Vector and full-text search, all the arms of a recall in one statement.

    ``vector_sql`` builds each vector arm's statement (the windows' part of the store
    gives one that counts each memory's windows too); ``ef_search`` is the HNSW
    ``ef_search`` used when a search names none. The searcher keeps the store's vector
    dimension once vectors exist and the centroid's estimate: :meth:`vectors_reset`
    drops both.

    A search with a tag filter (a user's scope) first counts the scope's memories, up
    to ``large_scope_rows`` (the count kept for a while, :class:`ScopeSizes`, in
    ``scope_sizes``): a scope smaller than ``exact_scope_rows`` is read whole and
    sorted (exact, and cheaper than an index scan); a larger one is searched through
    the HNSW index with the tag tested on each row the scan gives and
    ``hnsw.ef_search`` at least ``scoped_ef_search``, or ``large_scope_ef_search`` for
    a scope of ``large_scope_rows`` or more. ``iterative`` (pgvector 0.8 and later, which the store
    detects when it opens) turns on ``hnsw.iterative_scan``, so that a filtered index
    scan goes on until it has found enough rows. Whatever the path, a vector search
    that comes back short of its limit is run again exactly.
    """

    def __init__(self, db: PostgresDatabase, *, filter_sql: FilterSQL, vector_sql: VectorSQL,
                 ef_search: int) -> None:
        self.db = db
        self.filter_sql = filter_sql
        self.vector_sql = vector_sql
        self.ef_search = ef_search
        self.exact_scope_rows = EXACT_SCOPE_ROWS
        self.scoped_ef_search = SCOPED_EF_SEARCH
        self.large_scope_rows = LARGE_SCOPE_ROWS
        self.large_scope_ef_search = LARGE_SCOPE_EF_SEARCH
        self.iterative = False
        #: The scopes' counted sizes (see :meth:`_scope_rows`).
        self.scope_sizes = ScopeSizes()
        #: The words too common to widen a full-text match (read at most once a minute).
        self.common_lexemes = CommonLexemes(db)
        # (newest id, monotonic time, embedder, centroid) of vector_centroid's last estimate.
        self._centroid: MeanEstimate | None = None
        # The vector dimension once vectors exist (see _unit_query).
        self._dim: int | None = None

    def vectors_reset(self) -> None:
        """Forget the dimension and the centroid (every vector was dropped)."""
        self._centroid = None
        self._dim = None

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

    def _session_ef(self, pg: psycopg.Connection[Any], info: dict[str, Any],
                    ef_search: int) -> None:
        """Set ``hnsw.ef_search`` (and, with :attr:`iterative`, ``hnsw.iterative_scan``)
        for the connection's session, only when it holds another value (every vector
        search goes through here, so a pooled connection's value never matters, and a
        warm one costs no round trip). Behind a transaction-mode pooler they are set for
        the search's transaction only, every time."""
        wanted = {"hnsw.ef_search": str(ef_search)}
        if self.iterative:
            wanted["hnsw.iterative_scan"] = "strict_order"
        for name, value in wanted.items():  # the names are these two literals
            if self.db.pooler is not None:
                pg.execute(f"SELECT set_config('{name}', %s, true)", (value,))
            elif info.get(name) != value:
                pg.execute(f"SELECT set_config('{name}', %s, false)", (value,))
                info[name] = value

    def _scope_rows(self, pg: psycopg.Connection[Any], filters: SearchFilters) -> int:
        """How many memories ``filters``' tags hold, counted up to the larger of
        :attr:`exact_scope_rows` and :attr:`large_scope_rows` (0 without tags); the count
        is kept for a while (:attr:`scope_sizes`)."""
        if not filters.tags:
            return 0
        cap = max(self.exact_scope_rows, self.large_scope_rows)
        size = self.scope_sizes.get(cap, filters.tags)
        if size is None:
            sql, params = scope_rows_sql(filters, cap)
            size = int(driver_rows(pg, sql, params)[0][0])
            self.scope_sizes.put(cap, filters.tags, size)
        return size

    def _fenced(self, pg: psycopg.Connection[Any], filters: SearchFilters) -> bool:
        """Whether a search with ``filters`` tests its tags on each row an index scan
        gives (HNSW in distance order, GIN for the words): it has a tag filter matching
        at least :attr:`exact_scope_rows` memories. A smaller scope is read whole first
        (PostgreSQL's own plan for the tag test, whose size it cannot estimate)."""
        return bool(filters.tags) and self._scope_rows(pg, filters) >= self.exact_scope_rows

    def _scoped_ef(self, pg: psycopg.Connection[Any], filters: SearchFilters) -> int:
        """The least ``hnsw.ef_search`` of a search of ``filters`` through the index:
        :attr:`large_scope_ef_search` for a scope of at least :attr:`large_scope_rows`
        memories, else :attr:`scoped_ef_search`."""
        if self._scope_rows(pg, filters) >= self.large_scope_rows:
            return max(self.scoped_ef_search, self.large_scope_ef_search)
        return self.scoped_ef_search

    @staticmethod
    def _stored_dim(pg: psycopg.Connection[Any]) -> int | None:
        row = pg.execute("SELECT value FROM htm_meta WHERE key = 'embedding_dim'").fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def briefs(self, ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        """Id, content, robot and creation time of the visible ``ids`` that pass ``filters``."""
        if not ids:
            return {}
        params: dict[str, Any] = {"ids": sorted({int(i) for i in ids})}
        where = self.filter_sql(filters, params)
        found = self.db.quick("reading memories", lambda pg, _info: driver_rows(
            pg, "SELECT m.id, m.content, r.name, m.created_at FROM memories m "
            f"JOIN robots r ON r.id = m.robot_id WHERE m.id = ANY(:ids) AND {where}", params))
        return {int(r[0]): Brief(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in found}

    def rare_terms(self, terms: Sequence[str], filters: SearchFilters) -> list[str]:
        """The rare ``terms`` among the memories passing ``filters`` (:func:`read_rare_terms`)."""
        common = self.common_lexemes() if terms and filters.is_empty else None
        return read_rare_terms(self.db, terms, filters, common, self.filter_sql)

    def vector_centroid(self) -> list[float] | None:
        """The mean direction of the newest 20,000 vectors (an estimate, see
        :func:`estimate_mean`)."""
        cached = self._centroid
        if not _mean_is_due(cached):
            assert cached is not None
            return cached[3]
        self._centroid = self.db.read("estimating the vector centroid", lambda conn: estimate_mean(
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
        common = self.common_lexemes() if any(a.text for a in arms) else None
        deepest = max((a.limit for a in arms if a.vector is not None), default=0)

        def run(pg: psycopg.Connection[Any], info: dict[str, Any]) -> list[Any]:
            parts.clear()
            fenced = self._fenced_arms(pg, arms)
            parts.update(self._vector_parts(pg, info, arms, fenced, max(ef, deepest)))
            for k, arm in enumerate(arms):
                parsed = parse_query(arm.text or "") if arm.vector is None else None
                if parsed:
                    parts[k] = fulltext_sql(parsed, arm.limit, arm.filters, common,
                                             self._filter_sql(fenced[k]))
            if not parts:
                return []
            if len(parts) == 1:
                (k, (sql, params)), = parts.items()
                return [(k, *row) for row in driver_rows(pg, sql, params)]
            union, merged = [], {}
            for k, (sql, params) in parts.items():
                # Each arm's parameters get a prefix of their own.
                renamed = PARAM.sub(rf":a{k}_\1", sql)
                merged.update({f"a{k}_{name}": value for name, value in params.items()})
                union.append(f"SELECT {k} AS arm, s.* FROM ({renamed}) s")
            sql = " UNION ALL ".join(f"({part})" for part in union)
            return driver_rows(pg, sql, merged)

        answer = self.db.quick("search", run)
        found: list[list[tuple[int, float]]] = [[] for _ in arms]
        for row in answer:
            found[int(row[0])].append((int(row[1]), float(row[2])))
        for k, arm in enumerate(arms):
            if arm.vector is not None and k in parts and len(found[k]) < arm.limit:
                # Exactly, with the tag test as a join (read the scope's rows, then sort):
                # a fenced test with index scans off would scan the whole table.
                found[k] = self._exact_vector_search(*self.vector_sql(
                    parts[k][1]["q"], arm.limit, arm.filters, arm.windows))
            elif arm.vector is not None:
                # Each arm's own order (by distance; a stable sort keeps the index's order
                # of equal scores), whatever order the union handed its rows back in.
                found[k].sort(key=lambda hit: -hit[1])
            else:
                found[k].sort(key=lambda hit: (-hit[1], hit[0]))  # its ORDER BY
        return found

    def _fenced_arms(self, pg: psycopg.Connection[Any], arms: Sequence[ArmQuery]) -> list[bool]:
        """:meth:`_fenced` of each arm's filters (each tag filter counted once)."""
        known: dict[tuple[str, ...], bool] = {}
        for arm in arms:
            if arm.filters.tags and arm.filters.tags not in known:
                known[arm.filters.tags] = self._fenced(pg, arm.filters)
        return [known.get(arm.filters.tags, False) for arm in arms]

    def _filter_sql(self, fenced: bool) -> FilterSQL:
        """:attr:`filter_sql`, with its tag test fenced (see :meth:`_fenced`) or not."""
        if not fenced:
            return self.filter_sql
        return lambda filters, params, fenced_tags=True: self.filter_sql(
            filters, params, fenced_tags=fenced_tags)

    def _vector_parts(self, pg: psycopg.Connection[Any], info: dict[str, Any],
                      arms: Sequence[ArmQuery], fenced_arms: Sequence[bool],
                      ef: int) -> dict[int, tuple[str, dict[str, Any]]]:
        """The statements of the vector arms (by position), ``hnsw.ef_search`` set to
        ``ef`` (at least :meth:`_scoped_ef` of each arm going through the index with a
        tag filter, at most 1000)."""
        units: dict[int, tuple[np.ndarray, bool]] = {}
        for k, arm in enumerate(arms):
            if arm.vector is not None:
                unit = self._unit_query(arm.vector, lambda: self._stored_dim(pg))
                if unit is not None:
                    units[k] = unit, fenced_arms[k]
        if not units:
            return {}
        ef = max([ef, *(self._scoped_ef(pg, arms[k].filters)
                        for k, (_, fenced) in units.items() if fenced)])
        self._session_ef(pg, info, min(1000, ef))
        return {k: self.vector_sql(unit, arms[k].limit, arms[k].filters, arms[k].windows, fenced)
                for k, (unit, fenced) in units.items() if np.any(unit)}

    def _exact_vector_search(self, sql: str, params: dict[str, Any]) -> list[tuple[int, float]]:
        """The vector search again with index scans off (this transaction only): a filter
        or a small store left the approximate search short."""
        def exact(conn: Connection) -> list[Any]:
            conn.execute(text("SELECT set_config('enable_indexscan', 'off', true)"))
            return list(conn.execute(text(sql), params).all())

        return [(int(r[0]), float(r[1])) for r in self.db.run("vector search", exact)]

    def explain_search(self, *, vector: Sequence[float] | None = None, query: str | None = None,
                       limit: int = 10, filters: SearchFilters | None = None,
                       ef_search: int | None = None, seqscan: bool = True) -> str:
        """The PostgreSQL plan of the vector (``vector=``) or full-text (``query=``) search.

        The statement is the one :meth:`vector_search` / :meth:`fulltext_search` run (for
        a tag filter, the one its scope's size chooses), so the plan shows whether the
        HNSW and GIN indexes are used. ``seqscan=False`` sets
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
                pg = conn.connection.driver_connection
                fenced = self._fenced(pg, chosen)  # type: ignore[arg-type]
                ef = ef_search or self.ef_search
                if fenced:
                    ef = min(1000, max(ef, self._scoped_ef(pg, chosen)))  # type: ignore[arg-type]
                unit = self._prepare_vector_query(conn, vector, ef)
                if unit is None:
                    raise SchemaError("the store holds no vectors yet; add some before explaining")
                sql, params = self.vector_sql(unit, limit, chosen, True, fenced)
            else:
                parsed = parse_query(query or "") or TextQuery(words=("_",))
                pg = conn.connection.driver_connection
                sql, params = fulltext_sql(parsed, limit, chosen, self.common_lexemes(),
                                           self._filter_sql(self._fenced(pg, chosen)))  # type: ignore[arg-type]
            return "\n".join(str(r[0]) for r in conn.execute(text("EXPLAIN " + sql), params))

        return self.db.run("explaining a search", explain)
