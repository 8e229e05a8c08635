"""SQLite search: FTS5 full text, the in-process vector index (numpy, HNSW above a size)
with the window arm, and briefs (:class:`SQLiteSearch`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from ...clock import utc_from_timestamp
from ...errors import (
    DimensionMismatchError,
)
from ...text import merge_hits, parse_query
from .._common import chunks, informative_terms, rare_terms
from .._sql.dialect import SQLITE
from .._sql.filters import VISIBLE, filter_sql
from ..base import ArmQuery, Brief, SearchFilters
from ..vector_index import normalise
from .mirror import VectorMirror
from .reads import Mark, SQLiteReads
from .windows import SQLiteWindows, merge_best

#: How many briefs a store keeps (their text read once); the cache is emptied beyond.
_BRIEFS_CACHED = 20_000

#: How many full-text matches beyond the limit an unfiltered search reads before it checks
#: which are visible (see ``_visible_word_hits``).
_SPARE_HITS = 16

#: From how many matches (as counted by the rare-word rule) an unfiltered search reads them
#: unjoined; with fewer, joining each match to its memory costs less than a second statement.
_UNJOINED_FROM = 100

#: What :meth:`SQLiteSearch.briefs` has not read since the mark (a brief, None: hidden).
_UNREAD: Any = object()

_UNFILTERED = SearchFilters()

#: A count of the rare-word rule: (filters, term, cap); a term of None: the memories
#: passing the filters.
_CountKey = tuple[SearchFilters, "str | None", int]


def _quoted(term: str) -> str:
    """``term`` as an FTS5 string (a phrase when it holds several words)."""
    return '"' + term.replace('"', '""') + '"'


class SQLiteSearch:
    """Full-text and vector search (with the window arm) and briefs."""

    def __init__(self, reads: SQLiteReads, mirror: VectorMirror, windows: SQLiteWindows) -> None:
        self._reads, self._mirror, self._windows = reads, mirror, windows
        #: Briefs read so far, by memory id: (version, brief); see :meth:`briefs`.
        self._brief_cache: dict[int, tuple[int, Brief]] | None = None
        #: Which ids an unfiltered :meth:`briefs` found visible (their brief) or not (None),
        #: as of ``_passed_at``: the read connection and its ``data_version`` then.
        self._passed: dict[int, Brief | None] | None = None
        self._passed_at: Mark | None = None
        #: The full-text counts of the rare-word rule (see ``_CountKey``) as of
        #: ``_counts_at``.
        self._counts: dict[_CountKey, int] | None = None
        self._counts_at: Mark | None = None

    def search_arms(self, arms: Sequence[ArmQuery]) -> list[list[tuple[int, float]]]:
        """Each search in turn; the window index is caught up once, for the first vector
        search (a recall's arms read one state of the windows)."""
        out: list[list[tuple[int, float]]] = []
        synced = False
        # One mark, read first, tells the catch-ups and the full-text counts of every arm
        # whether anything was committed since (no transaction: in an in-memory database
        # the read connection is also the pool's, through which a reload of the index reads).
        with self._reads.holding():
            for a in arms:
                if a.vector is None:
                    out.append(self.fulltext_search(a.text or "", limit=a.limit,
                                                    filters=a.filters))
                    continue
                out.append(self._vector_hits(a.vector, a.limit, a.filters, a.windows,
                                             sync=not synced))
                synced = synced or a.windows
        return out

    def vector_search(self, vector: Sequence[float], *, limit: int,
                      filters: SearchFilters, windows: bool = True) -> list[tuple[int, float]]:
        return self._vector_hits(vector, limit, filters, windows, sync=True)

    def _vector_hits(self, vector: Sequence[float], limit: int, filters: SearchFilters,
                     windows: bool, *, sync: bool) -> list[tuple[int, float]]:
        hits = self._memory_hits(vector, limit, filters)
        if not windows or self._mirror.index is None:
            return hits
        found = self._windows.hits(vector, limit, filters, sync=sync)
        return merge_best(hits, found, limit) if found else hits

    def fulltext_search(self, query: str, *, limit: int,
                        filters: SearchFilters) -> list[tuple[int, float]]:
        """Top ``limit`` (id, -bm25) for the words of ``query`` (``_text``'s rules), OR-ed,
        merged with the memories holding its CJK runs."""
        parsed = parse_query(query)
        if not parsed:
            return []
        # The raw cursor: a search is a few cheap statements, and SQLAlchemy's
        # per-statement overhead would be most of its time. No snapshot: the counts are
        # kept by a mark read before them, the hits are one statement (and a visibility
        # check whose newer answer only leaves out what was forgotten meanwhile).
        with self._reads.cursor(snapshot=False) as cur:
            words = self._word_hits(cur, parsed.words, limit, filters)
            runs = self._run_hits(cur, parsed.runs, limit, filters)
        return merge_hits(words, runs, limit)

    def _word_hits(self, cur: sqlite3.Cursor, terms: Sequence[str], limit: int,
                   filters: SearchFilters) -> list[tuple[int, float]]:
        if not terms:
            return []
        params: dict[str, Any] = {"limit": limit}
        where = filter_sql(SQLITE, filters, params)
        sql = ("SELECT m.id, bm25(memories_fts) AS rank FROM memories_fts "
               "JOIN memories m ON m.id = memories_fts.rowid "
               f"WHERE memories_fts MATCH :match AND {where} ORDER BY rank, m.id LIMIT :limit")
        # The rule counts in the whole store, whatever the filters.
        total, count = self._term_counts(cur, _UNFILTERED)
        counted: dict[str, int] = {}

        def doc_count(term: str, cap: int) -> int:
            n = counted[term] = count(term, cap)
            return n

        rare = informative_terms(terms, total, doc_count)
        match = " OR ".join(_quoted(t) for t in rare)
        if len(rare) < len(terms):
            # Candidates must hold a rare word; bm25 still scores every query
            # word, so common ones (a speaker's name) break ties among them.
            match = f"({match}) AND ({' OR '.join(_quoted(t) for t in terms)})"
        params["match"] = match
        # Many matches (as counted, when the words were counted): reading them unjoined pays.
        if filters.is_empty and sum(counted.get(t, 0) for t in rare) >= _UNJOINED_FROM:
            found = self._visible_word_hits(cur, match, limit)
            if found is not None:
                return found
        return [(int(r[0]), -float(r[1])) for r in cur.execute(sql, params).fetchall()]

    def rare_terms(self, terms: Sequence[str], filters: SearchFilters) -> list[str]:
        """The ``terms`` found in at least one and at most ``COMMON_TERM_SHARE`` of the
        memories passing ``filters`` (:func:`~htm_core.store._common.rare_terms`), counted
        as the full-text arm counts them."""
        if not terms:
            return []
        with self._reads.cursor(snapshot=False) as cur:
            total, count = self._term_counts(cur, filters)
            return rare_terms(terms, total, count)

    def _term_counts(self, cur: sqlite3.Cursor, filters: SearchFilters
                     ) -> tuple[int, Callable[[str, int], int]]:
        """The rare-word rule's counts among the memories passing ``filters``: how many
        there are, and ``count(term, cap)``, how many hold ``term`` (stopping one past
        ``cap``); kept until the next commit. Without filters the memories counted are
        every one written (the newest id; forgotten ones too, as the index holds them),
        read from the full-text index alone."""
        memo = self._counts_memo(cur)
        params: dict[str, Any] = {}
        if filters.is_empty:
            total_sql = "SELECT coalesce(max(id), 0) FROM memories"
            count_sql = ("SELECT count(*) FROM (SELECT 1 FROM memories_fts "
                         "WHERE memories_fts MATCH :t LIMIT :cap)")
        else:
            where = filter_sql(SQLITE, filters, params)
            total_sql = f"SELECT count(*) FROM memories m WHERE {where}"
            count_sql = ("SELECT count(*) FROM (SELECT 1 FROM memories_fts JOIN memories m "
                         f"ON m.id = memories_fts.rowid WHERE memories_fts MATCH :t AND {where} "
                         "LIMIT :cap)")
        total = memo.get((filters, None, 0))
        if total is None:
            total = memo[filters, None, 0] = int(cur.execute(total_sql, params).fetchone()[0])

        def count(term: str, cap: int) -> int:
            n = memo.get((filters, term, cap))
            if n is None:
                n = memo[filters, term, cap] = int(cur.execute(
                    count_sql, {**params, "t": _quoted(term), "cap": cap + 1}).fetchone()[0])
            return n

        return total, count

    def _counts_memo(self, cur: sqlite3.Cursor) -> dict[_CountKey, int]:
        """The rare-word rule's counts read since the last commit to the database (the
        same words come back query after query); a fresh dict when the mark moved."""
        mark = self._reads.mark(cur)
        memo = self._counts
        if mark is None or memo is None or self._counts_at != mark or len(memo) > 4096:
            memo = {}
            if mark is not None:
                self._counts, self._counts_at = memo, mark
        return memo

    @staticmethod
    def _visible_word_hits(cur: sqlite3.Cursor, match: str,
                           limit: int) -> list[tuple[int, float]] | None:
        """The unfiltered search's top ``limit`` without joining every match to its memory
        (a lookup per matching row, most of the search's time when the words are common):
        the full-text index's best matches first, a few more than ``limit``, then which of
        them are visible. None when forgotten ones left fewer than ``limit`` of them while
        more matches exist (the caller joins then). The same hits in the same order: the
        visible memories among the best matches are the best visible ones."""
        over = limit + _SPARE_HITS
        rows = cur.execute(
            "SELECT rowid, bm25(memories_fts) AS rank FROM memories_fts "
            "WHERE memories_fts MATCH ? ORDER BY rank, rowid LIMIT ?", (match, over)).fetchall()
        if not rows:
            return []
        visible = {int(r[0]) for r in cur.execute(
            "SELECT m.id FROM memories m WHERE m.id IN (SELECT value FROM json_each(?)) "
            f"AND {VISIBLE}", (json.dumps([int(r[0]) for r in rows]),))}
        hits = [(int(r[0]), -float(r[1])) for r in rows if int(r[0]) in visible]
        if len(hits) < limit and len(rows) == over:
            return None
        return hits[:limit]

    def _run_hits(self, cur: sqlite3.Cursor, runs: Sequence[str], limit: int,
                  filters: SearchFilters) -> list[tuple[int, float]]:
        """The memories holding CJK ``runs`` as substrings: score = how many they hold +
        1 / (1 + length). The trigram index answers runs of three characters or more;
        shorter ones are looked for in the CJK memories' text."""
        if not runs:
            return []
        params: dict[str, Any] = {"limit": limit}
        params.update({f"r{i}": run for i, run in enumerate(runs)})
        held = " + ".join(f"(instr(c.content, :r{i}) > 0)" for i in range(len(runs)))
        if min(map(len, runs)) >= 3:
            params["match"] = " OR ".join(f'"{run}"' for run in runs)
            found = "c.memories_cjk MATCH :match"
        else:
            found = " OR ".join(f"instr(c.content, :r{i}) > 0" for i in range(len(runs)))
        where = filter_sql(SQLITE, filters, params)
        sql = (f"SELECT m.id, {held} + 1.0 / (1 + length(c.content)) AS score "
               "FROM memories_cjk c JOIN memories m ON m.id = c.rowid "
               f"WHERE ({found}) AND {where} ORDER BY score DESC, m.id LIMIT :limit")
        return [(int(r[0]), float(r[1])) for r in cur.execute(sql, params).fetchall()]

    def _memory_hits(self, vector: Sequence[float], limit: int,
                     filters: SearchFilters) -> list[tuple[int, float]]:
        """The in-process index's top ``limit`` memories for ``vector``."""
        if self._mirror.index is None:
            self._mirror.load()
        else:
            self._mirror.sync()  # may replace the index when another writer changed vectors
        index = self._mirror.index
        if index is None:
            return []
        query = normalise(vector)
        if query.shape[0] != index.dim:
            raise DimensionMismatchError(
                f"query vector has dimension {query.shape[0]} but the store holds "
                f"{index.dim}-dimensional vectors; use the store's embedder")
        masks = self._mirror.masks(filters)
        if masks is None:
            return []
        return index.search(query, limit, **masks)

    def briefs(self, ids: Sequence[int], filters: SearchFilters) -> dict[int, Brief]:
        if not ids:
            return {}
        params: dict[str, Any] = {}
        where = filter_sql(SQLITE, filters, params)
        # A recall reads a couple of hundred briefs, mostly the same ones as the recall
        # before: which of them pass is read every time, their text only when it is not
        # cached. A memory's text changes only with its version, and ids are never reused.
        cache = self._brief_cache
        if cache is None:
            cache = self._brief_cache = {}
        out: dict[int, Brief] = {}
        # One block, no snapshot: the mark first, so what is read after it is as new as it
        # or newer (see _mark). A brief's text comes with its version (one row): a text
        # read in a later statement than the version check is still that version's.
        with self._reads.cursor(snapshot=False) as cur:
            passed = self._passed_since(cur) if filters.is_empty else None
            todo = sorted(set(ids))
            if passed is not None:  # nothing committed since these were read
                unread: list[int] = []
                for mid in todo:
                    brief = passed.get(mid, _UNREAD)
                    if brief is _UNREAD:
                        unread.append(mid)
                    elif brief is not None:
                        out[mid] = brief
                todo = unread
            if not todo:
                return out
            for part in chunks(todo, 500):
                # The ids as one JSON parameter: one statement text, compiled once.
                params["ids"] = json.dumps(list(map(int, part)))
                missing: list[int] = []
                for mid, version in cur.execute(
                        "SELECT m.id, m.version FROM memories m "
                        f"WHERE m.id IN (SELECT value FROM json_each(:ids)) AND {where}", params):
                    known = cache.get(mid)
                    if known is not None and known[0] == version:
                        out[mid] = known[1]
                    else:
                        missing.append(mid)
                if not missing:
                    continue
                if len(cache) > _BRIEFS_CACHED:
                    cache.clear()
                for mid, version, content, robot, created in cur.execute(
                        "SELECT m.id, m.version, m.content, r.name, m.created_at FROM memories m "
                        "JOIN robots r ON r.id = m.robot_id "
                        f"WHERE m.id IN ({', '.join(map(str, missing))})"):
                    brief = out[mid] = Brief(mid, content, robot, utc_from_timestamp(created))
                    cache[mid] = (version, brief)
            if passed is not None:
                passed.update((mid, out.get(mid)) for mid in todo)
        return out

    def _passed_since(self, cur: sqlite3.Cursor) -> dict[int, Brief | None] | None:
        """What unfiltered :meth:`briefs` found since the last commit to the database, by
        any connection of any process (SQLite's ``data_version`` of the read connection
        moves with each); emptied when it moved.
        None for an in-memory database (its writes share the read connection, which
        ``data_version`` does not count)."""
        at = self._reads.mark(cur)
        if at is None:
            return None
        passed = self._passed
        if passed is None or self._passed_at != at or len(passed) > _BRIEFS_CACHED:
            passed = self._passed = {}
            self._passed_at = at
        return passed

    def vector_centroid(self) -> list[float] | None:
        # No sync with other writers here: the vector search that follows does it, and an
        # estimate one query behind them is fine for centering.
        return self._mirror.centroid()
