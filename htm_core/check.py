"""``htm check``: look a store over for damage and say what was found.

:func:`check_store` reads a SQLite file without opening it through htm (a damaged file must
not stop the check) and without writing anything it keeps: the file, the full-text index,
each memory's text against its checksums, records, vectors, the vector graph and the
write-ahead log, one :class:`Finding` each, gathered in a :class:`CheckReport`. On
PostgreSQL the content check runs through the store. See docs/cli.md
("htm check") and docs/reliability.md ("Faults of the machine").
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from .errors import DatabaseCorruptError
from .store import is_postgres_url
from .store.base import content_hash
from .store.values import content_crc

__all__ = ["CheckReport", "Finding", "check_store"]

_SHOWN = 5  # problems listed per check


@dataclass(frozen=True)
class Finding:
    """One check: its name, whether it passed, what was found, and whether a failure is
    only a warning (nothing is lost)."""

    check: str
    ok: bool
    detail: str
    warning: bool = False


@dataclass(frozen=True)
class CheckReport:
    """Everything :func:`check_store` found."""

    database: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no check failed (warnings allowed)."""
        return all(f.ok or f.warning for f in self.findings)


def _listed(items: list[str], total: int) -> str:
    more = f" and {total - len(items)} more" if total > len(items) else ""
    return ", ".join(items) + more


def check_store(url: str | Path | None) -> CheckReport:
    """Check the store at ``url`` as docs/cli.md ("htm check") says; never creates or repairs.

    >>> from htm_core import HTM
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.db")
    >>> with HTM(database_url=path, embedder="hashing") as htm:
    ...     _ = htm.add("User prefers Vim keybindings")
    >>> check_store(path).ok
    True
    """
    if is_postgres_url(url):
        return _check_through_store(str(url))
    from .store.sqlite.files import existing_database_file

    try:
        path = existing_database_file(url)
    except DatabaseCorruptError as exc:
        return CheckReport(str(url), [Finding("file", False, str(exc))])
    report = CheckReport(str(path))
    found = report.findings
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        found.append(Finding("file", False, f"SQLite cannot open it: {exc}"))
        return report
    try:
        _check_file(conn, found)
        if found and not found[-1].ok:
            return report
        _check_fts(path, found)
        _check_content(conn, found)
        _check_records(conn, found)
        _check_vectors(conn, found)
    finally:
        conn.close()
    _check_graph(path, found)
    _check_lost_commits(path, found)
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        found.append(Finding("write-ahead log", True, f"{wal.name} holds {wal.stat().st_size:,} "
                             "bytes of transactions, applied when the database is next opened"))
    return report


def _check_lost_commits(path: Path, found: list[Finding]) -> None:
    """Write transactions acknowledged on the store that it does not hold (a lost ``-wal``
    or an older copy put in its place), counted now or noted by an earlier open."""
    from .store.sqlite.files import lost_commits

    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            lost = max(0, lost_commits(path, conn))
            row = conn.execute("SELECT value FROM htm_meta WHERE key = 'lost_commits'"
                               ).fetchone()
        finally:
            conn.close()
        noted = int(row[0]) if row is not None and str(row[0]).isdigit() else 0
    except (sqlite3.Error, ValueError):
        return
    if lost or noted:
        found.append(Finding("write-ahead log", False, f"{lost + noted} write transactions "
                             "acknowledged on this store are not in it: its -wal file was "
                             "lost, or the file was replaced by an older copy; the memories "
                             "they wrote are gone (restore them from a backup: `htm import`)"))


def _check_file(conn: sqlite3.Connection, found: list[Finding]) -> None:
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check(100)")]
    except sqlite3.Error as exc:
        found.append(Finding("file", False, f"SQLite cannot read it: {exc}"))
        return
    if rows == ["ok"]:
        found.append(Finding("file", True, "SQLite integrity check passed"))
    else:
        found.append(Finding("file", False, f"{len(rows)} problem(s): {_listed(rows[:_SHOWN], len(rows))}"))


def _check_fts(path: Path, found: list[Finding]) -> None:
    try:
        conn = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as exc:  # pragma: no cover - the read-only open above worked
        found.append(Finding("full text", True, f"not checked: {exc}", warning=True))
        return
    try:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
        found.append(Finding("full text", True, "the full-text index matches the memories"))
    except sqlite3.Error as exc:
        if "readonly" in str(exc) or "read-only" in str(exc):
            found.append(Finding("full text", True, "not checked: the file cannot be written",
                                 warning=True))
        else:
            found.append(Finding("full text", False, f"{exc}; rebuild the index with INSERT "
                                 "INTO memories_fts(memories_fts) VALUES ('rebuild')"))
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


def _damaged(content: object, stored_hash: str, stored_crc: int | None) -> bool:
    """Whether a memory's text disagrees with either checksum stored with it."""
    return not isinstance(content, str) or content_hash(content) != stored_hash or (
        stored_crc is not None and content_crc(content) != stored_crc)


def _check_content(conn: sqlite3.Connection, found: list[Finding]) -> None:
    bad: list[str] = []
    count = 0
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
        crc = "content_crc" if "content_crc" in columns else "NULL"  # before version 7
        for key, content, stored, stored_crc in conn.execute(
                f"SELECT key, content, content_hash, {crc} FROM memories"):
            count += 1
            if _damaged(content, stored, stored_crc):
                bad.append(repr(key))
    except (sqlite3.Error, UnicodeError) as exc:
        found.append(Finding("content", False, f"memories cannot be read: {exc}"))
        return
    _content_finding(found, count, bad)


def _check_records(conn: sqlite3.Connection, found: list[Finding]) -> None:
    bad: list[str] = []
    try:
        times = ("typeof({0}) IN ('real', 'integer') AND {0} BETWEEN -62135596800 "
                 "AND 253402300799")  # years 1 to 9999
        rows = conn.execute(f"SELECT key, metadata, {times.format('created_at')}, "
                            f"{times.format('last_accessed')} FROM memories")
        for key, metadata, created_ok, accessed_ok in rows:
            try:
                ok = isinstance(json.loads(metadata), dict)
            except (TypeError, ValueError):
                ok = False
            if not (ok and created_ok and accessed_ok):
                bad.append(repr(key))
    except sqlite3.Error as exc:
        found.append(Finding("records", False, f"memories cannot be read: {exc}"))
        return
    if bad:
        found.append(Finding("records", False, f"{len(bad)} memories hold metadata or times "
                             f"htm cannot read: {_listed(bad[:_SHOWN], len(bad))}; restore "
                             "them from an export"))
    else:
        found.append(Finding("records", True, "every memory's metadata and times are readable"))


def _content_finding(found: list[Finding], count: int, bad: list[str]) -> None:
    if bad:
        found.append(Finding("content", False, f"{len(bad)} of {count} memories do not match "
                             f"their checksum (altered on disk): {_listed(bad[:_SHOWN], len(bad))}"
                             "; restore them from an export"))
    else:
        found.append(Finding("content", True, f"{count} memories match their checksums"))


def _check_vectors(conn: sqlite3.Connection, found: list[Finding]) -> None:
    try:
        meta = dict(conn.execute("SELECT key, value FROM htm_meta WHERE key IN "
                                 "('embedder', 'embedding_dim')").fetchall())
        if "embedding_dim" not in meta:
            found.append(Finding("vectors", True, "no vectors stored yet"))
            return
        dim, name = int(meta["embedding_dim"]), meta.get("embedder")
        rows = conn.execute(
            "SELECT key FROM memories WHERE embedding IS NOT NULL AND (length(embedding) != ? "
            "OR embedder IS NOT ?)", (dim * 4, name)).fetchall()
        total = conn.execute("SELECT count(*) FROM memories WHERE embedding IS NOT NULL"
                             ).fetchone()[0]
    except (sqlite3.Error, ValueError) as exc:
        found.append(Finding("vectors", False, f"vectors cannot be read: {exc}"))
        return
    if rows:
        keys = [repr(r[0]) for r in rows]
        found.append(Finding("vectors", False, f"{len(keys)} of {total} vectors do not have "
                             f"dimension {dim} from {name}: {_listed(keys[:_SHOWN], len(keys))}; "
                             "re-embed them (`htm reembed --force`)"))
    else:
        found.append(Finding("vectors", True, f"{total} vectors of dimension {dim} ({name})"))


def _check_graph(path: Path, found: list[Finding]) -> None:
    graph = Path(f"{path}-vectors.usearch")
    if not graph.exists():
        return
    from .store.ann import read_sealed

    if read_sealed(graph) is None:
        found.append(Finding("vector graph", False, f"{graph.name} is damaged or unsealed; "
                             "htm rebuilds it from the database on the next open", warning=True))
    else:
        found.append(Finding("vector graph", True, f"{graph.name} is intact"))


def _check_through_store(url: str) -> CheckReport:
    from sqlalchemy import text

    from .transfer import open_source

    store = open_source(url)
    report = CheckReport(store.url)
    try:
        bad: list[str] = []
        count = 0
        with store.engine.connect() as conn:  # type: ignore[attr-defined]
            rows = conn.execution_options(yield_per=2000).execute(text(
                "SELECT key, content, content_hash, content_crc FROM memories ORDER BY id"))
            for key, content, stored, stored_crc in rows:
                count += 1
                if _damaged(content, stored, stored_crc):
                    bad.append(repr(key))
        _content_finding(report.findings, count, bad)
    finally:
        store.close()
    return report
