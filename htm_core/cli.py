"""The ``htm`` command: use and manage a memory from the shell.

::

    htm add "User prefers Vim keybindings" --importance 9 --key pref-vim --tag user:preferences
    htm recall "editor preferences" --timeframe "last 7 days"

:func:`main` opens a store or an ``HTM`` from the global options (``--db``, ``--robot``,
``--embedder``, else ``HTM_*``), runs a command (its own, or one a package provides through
:mod:`htm_core.cli_commands`) and prints. Commands, ``--user`` and exit status: docs/cli.md.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from datetime import datetime, timezone
from functools import partial
from typing import Any, TextIO

from .cli_args import _opt, build_parser, parse_args, server_argv
from .cli_commands import CommandRun, Handler
from .config import Settings
from .errors import ConfirmationRequiredError, HTMError, ValidationError
from .scope import ChatScope, check_topic_tags, scope_user
from .secrets import mask_text
from .serialize import hit_to_dict, memory_to_dict, stats_to_dict
from .store import LongTermStore, open_store
from .transfer import Progress

__all__ = ["build_parser", "main", "parse_args", "server_argv"]

def _open_htm(args: argparse.Namespace, **kwargs: Any) -> Any:
    """An ``HTM`` for the command. The embedder is lazy: a command that never embeds never
    loads a model."""
    from .htm import HTM

    return HTM(robot=_opt(args, "robot"), database_url=_opt(args, "db"),
               embedder=_opt(args, "embedder"),
               working_memory_tokens=_opt(args, "working_memory_tokens"),
               **_store_access(args), **kwargs)


#: The commands that may create a SQLite store that does not exist yet (they write).
CREATING_COMMANDS = frozenset({"add", "import", "copy", "migrate", "demo", "mcp"})


def _store_access(args: argparse.Namespace) -> dict[str, Any]:
    """``HTM``'s ``read_only`` from ``--read-only``, once a command that only reads has
    been refused a SQLite store that does not exist (unless ``--create`` was given): a
    mistyped ``--db`` is an error naming the path, not a new empty store."""
    from .store import is_postgres_url
    from .store.sqlite.files import existing_database_file

    url = _database_url(args)
    if args.command not in CREATING_COMMANDS and not _opt(args, "create") \
            and url not in (":memory:", "sqlite://") and not is_postgres_url(url):
        existing_database_file(url)
    return {"read_only": True} if _opt(args, "read_only") else {}


def _open_reader(args: argparse.Namespace) -> Any:
    """An ``HTM`` for a command that never embeds (stats, context, forget, restore, purge):
    it opens any store, whatever embedder made its vectors (``stats`` reports a mismatch)."""
    return _open_htm(args, allow_embedder_mismatch=True)


def _scope(args: argparse.Namespace) -> ChatScope | None:
    """The scope of ``--user``/``--session`` (``$HTM_USER`` for the user); None without a
    user: the command works on the whole store."""
    user = scope_user(_opt(args, "user"))
    session = _opt(args, "session")
    if user is None:
        if session is not None:
            raise ValidationError("--session needs a user: give --user ID (or set HTM_USER)")
        return None
    return ChatScope.of(user_id=user, session_id=session)


def _scoped_key(args: argparse.Namespace, htm: Any, key: str) -> str:
    """The stored key ``key`` names in the command's scope (forgotten or not)."""
    scope = _scope(args)
    if scope is None:
        return key
    return scope.key_of(lambda k: htm.store.get(k, include_forgotten=True), key)


def _database_url(args: argparse.Namespace) -> str | None:
    return Settings.resolve(database_url=_opt(args, "db")).database_url


@contextmanager
def _store(url: str | None, *, read_only: bool = False) -> Iterator[LongTermStore]:
    with _opened(open_store(url, read_only=read_only)) as store:
        yield store


@contextmanager
def _opened(store: LongTermStore) -> Iterator[LongTermStore]:
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _progress(args: argparse.Namespace, label: str, err: TextIO) -> Iterator[Progress]:
    """A tqdm bar on a terminal (or with --progress); silence otherwise."""
    show = bool(_opt(args, "progress")) or err.isatty()
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    if not show:
        yield lambda done, total: None
        return
    if tqdm is None:
        def plain(done: int, total: int | None) -> None:
            err.write(f"{label}: {done}/{total if total is not None else '?'}\n")
        yield plain
        return
    bar = tqdm(desc=label, unit=" memories", file=err, dynamic_ncols=True)
    try:
        def update(done: int, total: int | None) -> None:
            if total is not None and bar.total != total:
                bar.total = total
            bar.update(done - bar.n)
        yield update
    finally:
        bar.close()


def _age(when: datetime, now: datetime) -> str:
    seconds = max(0.0, (now - when).total_seconds())
    for size, unit in ((86_400 * 365, "y"), (86_400, "d"), (3_600, "h"), (60, "m")):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


#: Characters a terminal would act on rather than show: C0 and C1 controls (ESC starts
#: escape sequences, CSI is \x9b), DEL, and the bidirectional overrides that reorder text.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _printable(text: str) -> str:
    """``text`` with every control character shown escaped (``\\x1b``), newlines and tabs kept:
    a memory holding terminal escape codes is shown, never obeyed."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _shorten(text: str, width: int) -> str:
    flat = _printable(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: max(1, width - 1)] + "…"


def _table(rows: Sequence[Sequence[str]], header: Sequence[str], out: TextIO) -> None:
    """Left-aligned columns; the last column takes the rest of the terminal width."""
    rows = [[_printable(c) for c in r[:-1]] + [r[-1]] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header[:-1])]
    room = max(20, shutil.get_terminal_size((100, 20)).columns - sum(widths) - 2 * len(widths))

    def line(cells: Sequence[str]) -> str:
        head = "  ".join(c.ljust(w) if i else c.rjust(w) for i, (c, w) in
                         enumerate(zip(cells, widths, strict=False)))
        return f"{head}  {_shorten(cells[-1], room)}".rstrip()

    out.write(line(header) + "\n")
    for row in rows:
        out.write(line(row) + "\n")


# -- commands --------------------------------------------------------------------------


def _cmd_add(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    metadata = None
    if args.metadata is not None:
        try:
            metadata = json.loads(args.metadata)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"--metadata is not valid JSON ({exc.msg}); give an object "
                                  "such as '{\"source\": \"cli\"}'") from None
    text, key, tags = args.text, args.key, args.tags
    scope = _scope(args)
    if scope is not None:
        text = text.strip()
        key = scope.note_key(text) if key is None else scope.own_key(key)
        tags = scope.stored_tags(check_topic_tags(tags, name="--tag"))
    with _open_htm(args) as htm:
        memory = htm.add(text, importance=args.importance, key=key, tags=tags,
                         metadata=metadata, kind=args.kind, source=args.source,
                         confidence=args.confidence)
        where = "long-term + working memory" if memory.in_working_memory else "long-term only"
        out.write(f"{memory.key}\t{memory.token_count} tokens\timportance {memory.importance:g}"
                  f"\t{memory.kind}\t{where}\n")
    return 0


def _cmd_recall(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    scope = _scope(args)
    tags = args.tags if scope is None else scope.topic_filter(
        check_topic_tags(args.tags, name="--tag"))
    with _open_htm(args) as htm:
        hits = htm.recall(args.query, timeframe=args.timeframe, limit=args.limit,
                          strategy=args.strategy, tags=tags, robot=args.filter_robot,
                          min_score=args.min_score, kinds=args.kinds, sources=args.sources,
                          min_confidence=args.min_confidence)
        now = datetime.now(timezone.utc)
    if args.json:
        for hit in hits:
            out.write(json.dumps(hit_to_dict(hit, compact=True), ensure_ascii=False) + "\n")
        return 0
    if not hits:
        err.write(f"no memories matched (none scored {args.min_score:g} or more; "
                  "--min-score 0 lists every hit)\n" if args.min_score else
                  "no memories matched\n")
        return 0
    rows = [(f"{h.score:.4f}", _age(h.memory.created_at, now), f"{h.memory.importance:g}",
             h.memory.robot, h.memory.content) for h in hits]
    _table(rows, ("score", "age", "importance", "robot", "text"), out)
    return 0


def _cmd_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    scope = _scope(args)
    tags = args.tags if scope is None else scope.topic_filter(
        check_topic_tags(args.tags, name="--tag"))
    with _open_reader(args) as htm:
        page = htm.list(kinds=args.kinds, sources=args.sources,
                        min_confidence=args.min_confidence, tags=tags, robot=args.filter_robot,
                        timeframe=args.timeframe, order=args.order,
                        descending=args.descending, limit=args.limit)
        now = datetime.now(timezone.utc)
    if args.json:
        for memory in page.memories:
            out.write(json.dumps(memory_to_dict(memory), ensure_ascii=False) + "\n")
        return 0
    if not page.memories:
        err.write("no memories matched\n")
        return 0
    rows = [(m.key, _age(m.created_at, now), m.kind, m.source or "", m.content)
            for m in page.memories]
    _table(rows, ("key", "age", "kind", "source", "text"), out)
    if page.next_cursor is not None:
        err.write(f"[the first {len(page.memories)}; --limit shows more]\n")
    return 0


def _cmd_context(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    scope = _scope(args)
    within: dict[str, Any] = {} if scope is None else {"tags": scope.visible,
                                                       "scope_working": True}
    with _open_reader(args) as htm:
        ctx = htm.create_context(strategy=args.strategy, max_tokens=args.max_tokens, **within)
    if ctx.text:
        out.write(_printable(ctx.text) + "\n")
    err.write(f"[{len(ctx.memories)} memories, {ctx.tokens}/{ctx.budget} tokens, "
              f"strategy {ctx.strategy}]\n")
    return 0


def _cmd_stats(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with _open_reader(args) as htm:
        stats = htm.stats()
        info = htm.store.embedding_info()
    if args.json:
        out.write(json.dumps(stats_to_dict(stats, utilisation=False), default=str, indent=2)
                  + "\n")
        return 0
    rows = [
        ("robot", stats.robot),
        ("database", f"{stats.database} ({stats.backend}, schema v{stats.schema_version})"),
        ("working memory", f"{stats.working_memory_count} memories, {stats.working_memory_tokens}"
                           f"/{stats.working_memory_max_tokens} tokens "
                           f"({stats.working_memory_utilisation:.0%}), policy "
                           f"{stats.eviction_policy}"),
        ("long-term", f"{stats.long_term_total} memories ({stats.long_term_robot} by "
                      f"{stats.robot}), {stats.forgotten} forgotten, {stats.robots} robot(s)"),
        ("embedder", f"{stats.embedder} ({stats.embedder_choice}), dim {stats.embedding_dim}"),
        *([("embedder mismatch", f"the store's vectors are from {info[0]}; recall is full-text "
                                 "only until `htm reembed` (or pass --embedder matching it)")]
          if stats.extra.get("embedder_mismatch") and info else []),
        ("pending embeddings", str(stats.pending_embeddings)),
        ("failed embeddings", f"{stats.failed_embeddings}" + (
            " (retry with `htm reembed --retry-failed`)" if stats.failed_embeddings else "")),
        *[(f"  {f['key']}", f["error"]) for f in stats.extra.get("embedding_failures", [])],
        ("token counter", stats.token_counter),
    ]
    width = max(len(k) for k, _ in rows)
    out.writelines(f"{k.ljust(width)}  {v}\n" for k, v in rows)
    return 0


def _cmd_forget(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not args.yes:
        raise ConfirmationRequiredError(
            f"forget hides {args.key!r} from recall (recoverable with `htm restore` until "
            f"`htm purge`); run `htm forget {args.key} --yes` to do it")
    with _open_reader(args) as htm:
        memory = htm.forget(_scoped_key(args, htm, args.key), confirm=True)
    out.write(f"forgot {memory.key} (restore it with: htm restore {memory.key})\n")
    return 0


def _cmd_restore(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with _open_reader(args) as htm:
        memory = htm.restore(_scoped_key(args, htm, args.key))
    out.write(f"restored {memory.key}\n")
    return 0


def _cmd_purge(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not args.yes:
        raise ConfirmationRequiredError(
            "purge deletes forgotten memories permanently; run `htm purge --yes` to do it")
    with _open_reader(args) as htm:
        count = htm.purge(confirm=True, key=args.key)
    out.write(f"purged {count} forgotten memor{'y' if count == 1 else 'ies'}\n")
    return 0


def _cmd_export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .transfer import export_jsonl, open_source

    with _opened(open_source(_database_url(args))) as store, \
            _progress(args, "export", err) as progress:
        count = export_jsonl(store, args.file, with_embeddings=args.with_embeddings,
                             include_forgotten=not args.no_forgotten, progress=progress)
    out.write(f"exported {count} memories to {args.file}\n")
    return 0


def _file_embedder(path: str) -> str | None:
    """The embedder named in an export's header (None without vectors or when unreadable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            header = json.loads(fh.readline() or "{}")
    except (OSError, json.JSONDecodeError):
        return None  # import_jsonl reports the problem precisely
    name = header.get("embedder") if isinstance(header, dict) else None
    return name if isinstance(name, str) and name else None


def _cmd_import(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ._exportfile import open_export
    from .embeddings import resolve_embedder
    from .transfer import import_jsonl

    spec = Settings.resolve(embedder=_opt(args, "embedder")).embedder
    with open_export(args.file):  # a missing or unreadable file: refused before the store opens
        pass
    with _store(_database_url(args)) as store, _progress(args, "import", err) as progress:
        # The embedder every later command on this store will pick: the store's own (or, for
        # a store without vectors, the file's) under "auto", else the one asked for.
        info = store.embedding_info()
        embedder, _choice = resolve_embedder(
            spec, store_embedder=info[0] if info else _file_embedder(args.file))
        result = import_jsonl(store, args.file, embedder=embedder, reembed=args.reembed,
                              batch_size=args.batch_size, progress=progress,
                              partial=args.partial)
    for note in result.notes:
        err.write(f"htm import: warning: {note}\n")
    out.write(f"imported {result.written} memories ({result.skipped} already there, "
              f"{result.embedded} embedded) from {args.file}\n")
    return 0


def _cmd_migrate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with _store(_database_url(args)) as store:
        version = store.migrate()
        out.write(f"{store.url}: schema version {version}\n")
    return 0


def _cmd_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .check import check_store

    report = check_store(_database_url(args))
    out.write(f"{report.database}\n")
    for f in report.findings:
        mark = "ok" if f.ok else ("warning" if f.warning else "PROBLEM")
        out.write(f"  {f.check:<16} {mark:<8} {_printable(f.detail)}\n")
    if not report.ok:
        err.write("htm check: the database is damaged; restore it from an export "
                  "(`htm --db NEW import BACKUP`), or copy what is readable with `htm export`\n")
    return 0 if report.ok else 1


def _cmd_reembed(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    show = bool(_opt(args, "progress")) or err.isatty()
    with _open_htm(args, allow_embedder_mismatch=not args.retry_failed) as htm:
        if args.retry_failed:
            count = htm.retry_failed_embeddings()
            htm.flush()
            still = htm.stats().failed_embeddings
            out.write(f"retried {count} memories whose embedding failed; {still} still failing\n")
            return 0
        with redirect_stderr(err):
            count = htm.reembed(batch_size=args.batch_size, progress=show, force=args.force)
        out.write(f"re-embedded {count} memories with {htm.stats().embedder}\n")
    return 0


def _cmd_copy(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .transfer import copy_store, open_source

    with _opened(open_source(args.source)) as source, _store(args.target) as target, \
            _progress(args, "copy", err) as progress:
        result = copy_store(source, target, batch_size=args.batch_size, progress=progress,
                            verify=not args.no_verify, sample=args.sample)
    check = "verified" if result.verified else "not verified (--no-verify)"
    out.write(f"copied {result.written} memories ({result.skipped} already there) from "
              f"{source.url} to {target.url}; {check}\n")
    return 0


def _cmd_log(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .validation import check_limit

    with _store(_database_url(args), **_store_access(args)) as store:
        ops = store.operations(limit=check_limit(args.limit), robot=args.filter_robot, op=args.op)
    if not ops:
        err.write("no operations logged\n")
        return 0
    rows = [(str(o.id), o.at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S"), o.op,
             o.robot or "-", o.key or "-",
             json.dumps(o.detail, ensure_ascii=False) if o.detail else "") for o in ops]
    _table(rows, ("id", "at (UTC)", "op", "robot", "key", "detail"), out)
    return 0


def _cmd_demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .demo import run

    run(out=out, embedder=_opt(args, "embedder"), pause=0.0 if args.fast else None)
    return 0


def _cmd_backup(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .errors import ValidationError
    from .store import is_postgres_url
    from .store.sqlite.files import backup_database

    url = _database_url(args)
    if is_postgres_url(url):
        raise ValidationError("htm backup copies SQLite stores; for PostgreSQL use pg_dump, or "
                              "`htm export FILE` for a portable copy of the memories")
    count = backup_database(url, args.file)
    out.write(f"backed up {count} memories to {args.file}\n")
    return 0


def _cmd_consolidate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .consolidation import STRATEGIES

    scope = _scope(args)
    named = args.strategy.strip().lower().replace("_", "-")
    if named in STRATEGIES and named != "extractive" and args.model is None:
        raise ValidationError(f"--strategy {args.strategy} writes with a chat model: give "
                              "--model ollama (or ollama:<model>), or use --strategy "
                              "extractive, which needs none")
    with _open_htm(args) as htm:
        made = htm.consolidate(args.period, at=args.at, scope=scope, strategy=args.strategy,
                               target_tokens=args.target_tokens, tz=args.tz,
                               chat_model=args.model)
    if args.json:
        for memory in made:
            out.write(json.dumps(memory_to_dict(memory), ensure_ascii=False, default=str)
                      + "\n")
        return 0
    if not made:
        err.write("no memories in that period: no digest written\n")
        return 0
    rows = [(m.key, str(m.version), str(m.token_count),
             str(len(m.metadata["digest"]["sources"])), m.content) for m in made]
    _table(rows, ("key", "version", "tokens", "sources", "text"), out)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO, TextIO], int]] = {
    "add": _cmd_add, "recall": _cmd_recall, "list": _cmd_list, "context": _cmd_context,
    "stats": _cmd_stats,
    "forget": _cmd_forget, "restore": _cmd_restore, "purge": _cmd_purge,
    "export": _cmd_export, "import": _cmd_import, "migrate": _cmd_migrate,
    "reembed": _cmd_reembed, "copy": _cmd_copy, "check": _cmd_check,
    "log": _cmd_log, "demo": _cmd_demo,
    "backup": _cmd_backup, "consolidate": _cmd_consolidate,
}


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run one of the core's commands, or a provided one (:mod:`htm_core.cli_commands`)."""
    if args.command in COMMANDS:
        return COMMANDS[args.command](args, out, err)
    handler: Handler = args.provided
    passthrough = args.command in args.passthrough_commands
    return handler(args, CommandRun(out=out, err=err, open_htm=partial(_open_htm, args),
                                    argv=server_argv(args) if passthrough else []))


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Run ``htm`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    >>> import io
    >>> main(["--db", ":memory:", "--embedder", "hashing", "migrate"], stdout=io.StringIO())
    0
    """
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        with redirect_stdout(out), redirect_stderr(err):
            args = parse_args(list(argv) if argv is not None else sys.argv[1:])
    except SystemExit as exc:  # --help (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return _run(args, out, err)
    except HTMError as exc:
        err.write(f"htm {args.command}: error: {_printable(mask_text(str(exc)))}\n")
        return 1
    except Exception as exc:  # a damaged file can fail a driver in ways htm does not map
        err.write(f"htm {args.command}: unexpected error: {type(exc).__name__}: "
                  f"{_printable(mask_text(str(exc)))}; if the database may be damaged, run "
                  "`htm check`\n")
        return 1
    except KeyboardInterrupt:
        resumable = " (run the same command again to resume)" if args.command in (
            "import", "copy", "reembed") else ""
        err.write(f"htm {args.command}: interrupted{resumable}\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
