"""The ``htm`` subcommands other packages provide, found in the ``htm.commands`` entry points.

A distribution adds a subcommand by naming a function in that group (``htm mcp`` and
``htm ui`` come this way from ``htm_integrations``). The function is called with an
:class:`AddCommand` while the parser is built and returns the :data:`Handler` that runs the
command (given a :class:`CommandRun`); only its module is imported to build the parser. A
provider that cannot be loaded leaves its subcommand in place, and running it is a
:class:`~htm_core.errors.MissingDependencyError`. See docs/cli.md ("Subcommands from other
packages").
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Protocol, TextIO

from .errors import MissingDependencyError

if TYPE_CHECKING:
    from .htm import HTM

__all__ = ["GROUP", "AddCommand", "CommandRun", "Handler", "ProvidedCommand", "provided_commands"]

GROUP = "htm.commands"
"""The entry-point group ``htm`` reads its provided subcommands from."""


@dataclass(frozen=True, kw_only=True)
class CommandRun:
    """What a provided subcommand's handler gets beside its parsed arguments.

    ``argv`` is, for a command registered with ``passthrough=True``, the global options
    given before the subcommand (``--db``, ``--robot``, ``--embedder``,
    ``--working-memory-tokens``) followed by every token after it, as given; else empty.
    ``open_htm`` opens the ``HTM`` the global options name, with the rules every ``htm``
    command follows (``--read-only``; a SQLite file that does not exist is refused unless
    ``--create``).
    """

    out: TextIO
    err: TextIO
    argv: list[str]
    open_htm: Callable[[], HTM]


Handler = Callable[[argparse.Namespace, CommandRun], int]
"""Runs a provided subcommand and returns its exit status; an ``HTMError`` it raises is
printed as ``htm NAME: error: ...`` with exit status 1."""


class AddCommand(Protocol):
    """Adds the provider's subcommand and returns its parser (for the command's options).

    With ``passthrough=True`` the command takes no options of its own in ``htm``'s parser:
    every token after its name reaches the handler as given, in ``CommandRun.argv``.
    """

    def __call__(self, help: str, *, passthrough: bool = False) -> argparse.ArgumentParser: ...


@dataclass(frozen=True)
class ProvidedCommand:
    """One entry point of the group: the subcommand's name, the provider, where it comes from."""

    name: str
    entry_point: EntryPoint

    @property
    def origin(self) -> str:
        """``module:function`` from ``distribution``."""
        dist = self.entry_point.dist
        return f"{self.entry_point.value} (from {dist.name if dist else 'an unknown distribution'})"

    def load(self) -> Callable[[AddCommand], Handler]:
        """The provider function; if it cannot be imported, one that adds a subcommand whose
        run raises a :class:`MissingDependencyError` saying why."""
        try:
            provider: Callable[[AddCommand], Handler] = self.entry_point.load()
        except Exception as exc:  # an import can fail in any way; the command says how
            return self._unavailable(f"{type(exc).__name__}: {exc}")
        if not callable(provider):
            return self._unavailable(f"{self.entry_point.value} is not a function")
        return provider

    def _unavailable(self, reason: str) -> Callable[[AddCommand], Handler]:
        dist = self.entry_point.dist
        fix = (f"reinstall it: pip install --force-reinstall {dist.name}" if dist else
               "reinstall the package that provides it")
        message = (f"the `htm {self.name}` command cannot be loaded from {self.origin}: "
                   f"{reason}; {fix}")

        def run(args: argparse.Namespace, command: CommandRun) -> int:
            raise MissingDependencyError(message)

        def provider(add: AddCommand) -> Handler:
            add(f"unavailable: {reason}", passthrough=True)
            return run

        return provider


def provided_commands(reserved: frozenset[str] = frozenset()) -> Iterator[ProvidedCommand]:
    """The group's entry points by name, the first of each name only, none in ``reserved``
    (the core's own subcommands)."""
    seen = set(reserved)
    for entry_point in sorted(entry_points(group=GROUP), key=lambda ep: ep.name):
        if entry_point.name in seen:
            continue
        seen.add(entry_point.name)
        yield ProvidedCommand(entry_point.name, entry_point)
