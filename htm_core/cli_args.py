"""The ``htm`` command line's grammar: the parser, global options, the subcommands other
packages provide (:mod:`htm_core.cli_commands`) and the split of a pass-through command
such as ``htm mcp``.

:func:`parse_args` is what :func:`htm_core.cli.main` runs; the documented command lines
are parsed through it by the suite (tests/integration/test_cli_command_lines.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from .cli_commands import provided_commands
from .consolidation.kinds import KINDS
from .scoring import DEFAULT_MIN_SCORE
from .store.base import LIST_ORDERS

__all__ = ["build_parser", "parse_args", "server_argv"]

RECALL_STRATEGIES = ("hybrid", "vector", "fulltext", "tiered")
CONTEXT_STRATEGIES = ("balanced", "recent", "important", "tiered")


# -- argument parsing ------------------------------------------------------------------


def _global_options(*, suppress: bool, robot: bool = True) -> argparse.ArgumentParser:
    """The options every subcommand accepts. Subparsers use SUPPRESS so that a value given
    before the subcommand is not overwritten by the subparser's default."""
    parent = argparse.ArgumentParser(add_help=False)
    default = argparse.SUPPRESS if suppress else None
    group = parent.add_argument_group("global options")
    group.add_argument("--db", "--database-url", dest="db", metavar="URL", default=default,
                       help="SQLite path or URL, or postgresql:// URL (default $HTM_DATABASE_URL, "
                            "else a SQLite file in the user data directory)")
    if robot:
        group.add_argument("--robot", metavar="NAME", default=default,
                           help="the robot acting (default $HTM_ROBOT or 'default')")
    group.add_argument("--embedder", metavar="SPEC", default=default,
                       help="auto, hashing, local or ollama[:model] (default $HTM_EMBEDDER or auto)")
    group.add_argument("--working-memory-tokens", type=int, metavar="N", default=default,
                       help="working-memory budget (default $HTM_WORKING_MEMORY_TOKENS or 128000)")
    group.add_argument("--progress", dest="progress", action="store_true", default=default,
                       help="always show progress bars (default: only on a terminal)")
    _store_access_options(group, default)
    return parent


def _scope_options() -> argparse.ArgumentParser:
    """``--user`` and ``--session``: the scope a command acts in, as ``htm mcp``'s."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("scope (whose memory; as `htm mcp` and the agent tools)")
    group.add_argument("--user", metavar="ID",
                       help="act in this user's memory, with the keys and tags `htm mcp --user "
                            "ID` uses (default $HTM_USER; without either: the whole store)")
    group.add_argument("--session", metavar="ID",
                       help="with --user: write into this session of the user")
    return parent


def _check_and_backup(add: Any) -> None:
    """The ``check`` and ``backup`` subcommands (``add`` makes a subparser)."""
    add("check", "look the database over for damage (file, full text, content, vectors)")
    p = add("backup", "copy a SQLite store, also while it is written, to one consistent file")
    p.add_argument("file", help="the backup file (replaced only once the copy is complete)")


def _store_access_options(group: Any, default: Any) -> None:
    """``--read-only`` and ``--create``: how a command may touch the store."""
    group.add_argument("--read-only", dest="read_only", action="store_true", default=default,
                       help="open the SQLite store for reading only (works on a full disk or "
                            "read-only media; writes are refused)")
    group.add_argument("--create", dest="create", action="store_true", default=default,
                       help="create the SQLite store if it does not exist (add, import, copy, "
                            "migrate, demo and mcp create it anyway)")


def _memory_commands(add: Any, no_robot: argparse.ArgumentParser) -> None:
    """What works on memories: add, recall, context, stats, forget, restore, purge."""
    p = add("add", "remember a text (long-term, then working memory)", scope=True)
    p.add_argument("text", help="what to remember")
    p.add_argument("--importance", type=float, default=1.0, help="0 to 10 (default 1)")
    p.add_argument("--key", help="a unique key (default: derived from robot and text; with "
                                 "--user, from the user and text); stored inside the user's "
                                 "scope with --user")
    p.add_argument("--tag", action="append", default=[], dest="tags", metavar="TAG",
                   help="a hierarchical tag such as user:preferences (repeatable)")
    p.add_argument("--metadata", metavar="JSON", help="a JSON object stored with the memory")
    p.add_argument("--kind", choices=KINDS, help="what the memory is (default: the kind "
                   "rules recognise in a plain statement, else episodic)")
    p.add_argument("--source", help="where it came from, such as user or import:notes.md")
    p.add_argument("--confidence", type=float, help="how sure the kind and text are, 0 to 1")

    p = add("recall", "find the memories most relevant to a query", parent=no_robot,
            scope=True)
    p.add_argument("query", help="plain text")
    p.add_argument("--timeframe", help="'last 7 days' (rolling, ending now), 'today', "
                   "'last week' (the previous calendar week), 'May 2023', "
                   "'2024-05-01..2024-06-01'")
    p.add_argument("--limit", type=int, default=10, help="how many hits at most (default 10)")
    p.add_argument("--strategy", choices=RECALL_STRATEGIES, default="hybrid")
    p.add_argument("--tag", action="append", default=None, dest="tags", metavar="TAG",
                   help="only memories with this tag or one below it (repeatable)")
    p.add_argument("--robot", dest="filter_robot", metavar="NAME",
                   help="only memories written by this robot (the acting robot is set with "
                        "--robot before the subcommand, or $HTM_ROBOT)")
    _provenance_filters(p)
    p.add_argument("--min-score", type=float, default=DEFAULT_MIN_SCORE, metavar="SCORE",
                   help="leave out hits scoring below this, 0 to 1 (default "
                        f"{DEFAULT_MIN_SCORE}; 0 lists every hit)")
    p.add_argument("--json", action="store_true", help="one JSON object per hit")

    p = add("context", "print working memory assembled for a prompt", scope=True)
    p.add_argument("--strategy", choices=CONTEXT_STRATEGIES, default="balanced")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="token budget (default: the working-memory budget)")

    p = add("stats", "working-memory and long-term figures")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")

    p = add("forget", "hide a memory from recall (recoverable with restore until purge)",
            scope=True)
    p.add_argument("key")
    p.add_argument("--yes", action="store_true", help="confirm (required)")

    p = add("restore", "bring back a forgotten memory", scope=True)
    p.add_argument("key")

    p = add("purge", "delete forgotten memories for good")
    p.add_argument("--key", help="purge only this forgotten memory")
    p.add_argument("--yes", action="store_true", help="confirm (required)")


def _provenance_filters(p: argparse.ArgumentParser) -> None:
    """``--kind``, ``--source`` and ``--min-confidence``: what a memory is and where it
    came from."""
    p.add_argument("--kind", action="append", default=None, dest="kinds", choices=KINDS,
                   help="only memories of this kind (repeatable)")
    p.add_argument("--source", action="append", default=None, dest="sources",
                   metavar="SOURCE", help="only memories from this source, exactly ('user' "
                                          "is not 'User' or 'user:chat'; repeatable)")
    p.add_argument("--min-confidence", type=float, default=None, metavar="X",
                   help="only memories with a confidence of at least X, 0 to 1 (one "
                        "without a confidence never passes)")


def _list_command(add: Any, no_robot: argparse.ArgumentParser) -> None:
    """``htm list``: memories by filters, in an order, counting no access."""
    p = add("list", "list memories by kind, source, tag, robot and time, counting no access",
            parent=no_robot, scope=True)
    _provenance_filters(p)
    p.add_argument("--tag", action="append", default=None, dest="tags", metavar="TAG",
                   help="only memories with this tag or one below it (repeatable)")
    p.add_argument("--robot", dest="filter_robot", metavar="NAME",
                   help="only memories written by this robot")
    p.add_argument("--timeframe", help="as for recall: 'today', 'last week', 'May 2023'")
    p.add_argument("--order", choices=LIST_ORDERS, default="created_at")
    p.add_argument("--descending", action="store_true", help="the order reversed")
    p.add_argument("--limit", type=int, default=100, help="how many at most (default 100)")
    p.add_argument("--json", action="store_true", help="one JSON object per memory")


def _consolidate_command(add: Any) -> None:
    """``consolidate``: write the digests of a day, week or month."""
    p = add("consolidate", "write the digest of a day, week or month (and the lower ones it "
            "is made of)", scope=True)
    p.add_argument("--period", choices=("day", "week", "month"), default="day",
                   help="the kind of period (default day)")
    p.add_argument("--at", metavar="DATE",
                   help="a date (2026-11-28), an ISO date-time, or a label of the period "
                        "(2026-W48, 2026-11): the period holding it (default: the last "
                        "complete one, e.g. yesterday)")
    p.add_argument("--strategy", default="extractive", metavar="NAME",
                   help="extractive (default, no model), simple, hierarchical or map-reduce "
                        "(these with --model)")
    p.add_argument("--model", metavar="SPEC",
                   help="the chat model of a model strategy: ollama or ollama:<model>")
    p.add_argument("--target-tokens", type=int, metavar="N",
                   help="the digest's length at most (default 300 a day, 500 a week, 800 a "
                        "month)")
    p.add_argument("--tz", metavar="ZONE",
                   help="the time zone of the periods, e.g. Europe/Paris or UTC+05:30 "
                        "(default: the machine's)")
    p.add_argument("--json", action="store_true", help="one JSON object per digest")


def _store_commands(add: Any) -> None:
    """What works on the whole store: export, import, migrate, check, backup, reembed, copy."""
    p = add("export", "write every memory to a JSON Lines file")
    p.add_argument("file")
    p.add_argument("--with-embeddings", action="store_true", help="include the vectors")
    p.add_argument("--no-forgotten", action="store_true", help="leave forgotten memories out")

    p = add("import", "load a JSON Lines export (resumable: existing keys are skipped)")
    p.add_argument("file")
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--reembed", action="store_true",
                   help="ignore the file's vectors and embed every memory with the embedder "
                        "(needed when the file was made with another embedder)")
    p.add_argument("--partial", action="store_true",
                   help="import what a truncated or damaged file holds (refused otherwise)")

    add("migrate", "create or upgrade the database schema")

    _check_and_backup(add)

    p = add("reembed", "rebuild every vector with the configured embedder (resumable)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--force", action="store_true",
                   help="start over even if the store already carries this embedder's name")
    p.add_argument("--retry-failed", action="store_true",
                   help="only give the memories whose embedding failed another try")

    p = add("copy", "copy every memory from one database to another (resumable, verified)")
    p.add_argument("source", metavar="SRC_URL")
    p.add_argument("target", metavar="DST_URL")
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--no-verify", action="store_true", help="skip the final check")
    p.add_argument("--sample", type=int, default=100,
                   help="memories compared field by field in the final check (default 100)")


def _look_commands(add: Any, no_robot: argparse.ArgumentParser) -> None:
    """The operations log and the guided tour."""
    p = add("log", "the operations log, newest first", parent=no_robot)
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--op", help="only this operation (add, touch, evict, forget, restore, purge)")
    p.add_argument("--robot", dest="filter_robot", metavar="NAME", help="only this robot")

    p = add("demo", "a guided tour on a throwaway database (no server, no network)")
    p.add_argument("--fast", action="store_true", help="no pauses between steps")


def build_parser() -> argparse.ArgumentParser:
    """The ``htm`` argument parser (every subcommand has ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="htm", parents=[_global_options(suppress=False)],
        description="htm: a two-tier memory for LLM applications (working memory over a "
                    "long-term memory that never forgets).",
        epilog="Exit status: 0 ok, 1 htm error, 2 usage error, 130 interrupted.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = _global_options(suppress=True)
    no_robot = _global_options(suppress=True, robot=False)

    scoped = _scope_options()

    def add(name: str, help_: str, *, parent: argparse.ArgumentParser = common,
            scope: bool = False) -> argparse.ArgumentParser:
        parents = [parent, scoped] if scope else [parent]
        return sub.add_parser(name, parents=parents, help=help_, description=help_)

    _memory_commands(add, no_robot)
    _list_command(add, no_robot)
    _consolidate_command(add)
    _store_commands(add)
    _look_commands(add, no_robot)

    _add_provided(parser, sub, common)
    return parser


class _Adder:
    """The :class:`~htm_core.cli_commands.AddCommand` one provider gets: it adds that
    provider's subcommand (once) and remembers its parser and whether it passes through."""

    def __init__(self, sub: Any, common: argparse.ArgumentParser, name: str) -> None:
        self._sub, self._common, self.name = sub, common, name
        self.parser: argparse.ArgumentParser | None = None
        self.passthrough = False

    def __call__(self, help: str, *, passthrough: bool = False) -> argparse.ArgumentParser:
        if self.parser is None:
            self.parser = self._sub.add_parser(self.name, parents=[self._common], help=help,
                                               description=help)
        self.passthrough = passthrough
        return self.parser


def _add_provided(parser: argparse.ArgumentParser, sub: Any,
                  common: argparse.ArgumentParser) -> None:
    """The subcommands of the ``htm.commands`` entry points after the core's own: each
    parser carries its handler (default ``provided``); the top parser's default
    ``passthrough_commands`` names those that take every token after them as given."""
    passthrough = set()
    for command in provided_commands(frozenset(sub.choices)):
        add = _Adder(sub, common, command.name)
        handler = command.load()(add)
        made = add.parser or add(f"provided by {command.origin}")
        made.set_defaults(provided=handler)
        if add.passthrough:
            passthrough.add(command.name)
    parser.set_defaults(passthrough_commands=frozenset(passthrough))


class _Probe(argparse.ArgumentParser):
    """A parser that raises ValueError where argparse would print usage and exit."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def _split_passthrough(argv: list[str], names: frozenset[str]
                       ) -> tuple[list[str], str, list[str]] | None:
    """``(global options, subcommand, its tokens)`` when the subcommand is one of ``names``
    (those that pass every token through, such as ``mcp``), else None.

    The subcommand is the first such token before which only global options stand.
    Everything after it belongs to the command, verbatim and in order: argparse would
    otherwise part ``--port 8765`` into an unknown option and a stray value.
    """
    probe = _Probe(add_help=False, parents=[_global_options(suppress=False)])
    for i, token in enumerate(argv):
        if token not in names:
            continue
        try:
            probe.parse_args(argv[:i])
        except ValueError:
            continue
        return argv[:i], token, argv[i + 1:]
    return None


# -- helpers ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line ``argv`` parsed (``SystemExit`` on a usage error or ``--help``).

    For a pass-through command such as ``mcp``, ``server_args`` holds every token after
    the subcommand, as given.
    """
    parser = build_parser()
    argv = list(argv)
    split = _split_passthrough(argv, parser.get_default("passthrough_commands"))
    if split is None:
        return parser.parse_args(argv)
    before, command, after = split
    args = parser.parse_args([*before, command])
    args.server_args = after
    return args


def server_argv(args: argparse.Namespace) -> list[str]:
    """The command line a pass-through command (``htm ... mcp ...``) hands on: the global
    options given before the subcommand, then everything after it."""
    forwarded: list[str] = []
    for name in ("db", "robot", "embedder", "working_memory_tokens"):
        value = _opt(args, name)
        if value is not None:
            forwarded += [f"--{name.replace('_', '-')}", str(value)]
    return forwarded + [a for a in getattr(args, "server_args", []) if a != "--"]


def _opt(args: argparse.Namespace, name: str) -> Any:
    return getattr(args, name, None)
