"""Subcommands provided through the ``htm.commands`` entry points (htm_core.cli_commands).

Each test registers real distributions: a ``*.dist-info`` directory (``METADATA`` and
``entry_points.txt``, what pip writes) in a temporary directory put first on ``sys.path``,
so ``importlib.metadata`` reads it before anything installed. The ``htm-memory`` one is
written from pyproject.toml's own table, so the tests check what this checkout declares
whatever the environment had installed.
"""

from __future__ import annotations

import io
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import tomllib

from htm_core.cli import build_parser, main
from htm_core.cli_commands import GROUP

ROOT = Path(__file__).resolve().parents[2]
DECLARED: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
    "project"]["entry-points"][GROUP]


def _distribution(path: Path, name: str, commands: dict[str, str]) -> None:
    """A distribution named ``name`` whose ``htm.commands`` entry points are ``commands``."""
    info = path / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
                                   encoding="utf-8")
    lines = "".join(f"{key} = {value}\n" for key, value in commands.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}", encoding="utf-8")


@pytest.fixture
def registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Register distributions (and modules) on a path searched before the installed ones."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def register(name: str, commands: dict[str, str], **modules: str) -> None:
        _distribution(tmp_path, name, commands)
        for module, source in modules.items():
            (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
            monkeypatch.delitem(sys.modules, module, raising=False)

    return register


def _commands() -> set[str]:
    return set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--db", ":memory:", "--embedder", "hashing", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


HELLO = '''
def hello(add):
    parser = add("greet someone from the memory's robot")
    parser.add_argument("--name", required=True)
    return run

def run(args, command):
    with command.open_htm() as htm:
        command.out.write(f"hello {args.name} from {htm.robot}\\n")
    return 0

def echo(add):
    add("print what it was given", passthrough=True)
    return lambda args, command: command.out.write(repr(command.argv)) and 0

def boom(add):
    add("fails")
    def run(args, command):
        from htm_core.errors import ValidationError
        raise ValidationError("boom: give --nothing")
    return run

def add(add):
    add("a provided command named like a core one")
    return lambda args, command: command.out.write("provided add ran") and 0
'''


def test_htm_mcp_and_ui_are_declared_in_the_group() -> None:
    assert DECLARED == {"mcp": "htm_integrations.commands:mcp",
                        "ui": "htm_integrations.commands:ui"}


def test_the_declared_commands_are_found_through_the_group(registered) -> None:
    """pyproject.toml's entry points alone give ``htm`` its ``mcp`` and ``ui`` commands."""
    registered("htm-memory", DECLARED)
    assert {"mcp", "ui"} <= _commands()
    parser = build_parser()
    assert parser.get_default("passthrough_commands") == frozenset({"mcp"})
    assert _run("ui", "--token", "short")[2].endswith(
        "--token must be at least 16 characters; leave it out to get a random one\n")


def test_without_the_group_htm_has_no_adapter_commands(registered) -> None:
    """The core names no adapter: with a distribution that declares nothing, ``mcp`` and
    ``ui`` are unknown commands."""
    registered("htm-memory", {})
    assert not {"mcp", "ui"} & _commands()
    code, _, err = _run("ui")
    assert code == 2 and "invalid choice: 'ui'" in err


def test_the_installed_metadata_declares_what_pyproject_declares() -> None:
    """The environment running the suite was installed from this pyproject.toml (after a
    change to its entry points: ``pip install -e .`` again)."""
    found = {ep.name: ep.value for ep in entry_points(group=GROUP)
             if ep.dist is not None and ep.dist.name == "htm-memory"}
    assert found == DECLARED, "reinstall htm-memory (pip install -e .) to refresh its entry points"


def test_a_provided_command_gets_its_options_and_the_memory(registered) -> None:
    registered("htm-hello", {"hello": "htm_hello_cmd:hello"}, htm_hello_cmd=HELLO)
    assert "hello" in _commands()
    assert _run("--robot", "Ada", "hello", "--name", "ada") == (0, "hello ada from Ada\n", "")
    code, _, err = _run("hello")
    assert code == 2 and "--name" in err


def test_a_passthrough_command_gets_every_token_after_it(registered) -> None:
    registered("htm-hello", {"echo": "htm_hello_cmd:echo"}, htm_hello_cmd=HELLO)
    out = io.StringIO()
    code = main(["--robot", "echo", "echo", "--port", "8765", "--robot", "x", "echo", "--"],
                stdout=out, stderr=io.StringIO())
    assert code == 0
    assert out.getvalue() == repr(["--robot", "echo", "--port", "8765", "--robot", "x", "echo"])


def test_an_htm_error_from_a_provided_command_is_printed_as_the_core_prints_it(registered) -> None:
    registered("htm-hello", {"boom": "htm_hello_cmd:boom"}, htm_hello_cmd=HELLO)
    assert _run("boom") == (1, "", "htm boom: error: boom: give --nothing\n")


def test_a_core_command_keeps_its_name(registered) -> None:
    registered("htm-hello", {"add": "htm_hello_cmd:add"}, htm_hello_cmd=HELLO)
    code, out, _ = _run("add", "a memory", "--key", "k")
    assert code == 0 and "provided add ran" not in out


def test_a_provider_that_is_absent_is_a_clear_error(registered) -> None:
    """The entry point names a module that is not installed: ``htm --help`` still works and
    lists the command; running it (with any options) names the provider, why it failed and
    what to reinstall."""
    registered("htm-ghost", {"ghost": "htm_no_such_module:ghost"})
    assert main(["--help"], stdout=io.StringIO()) == 0
    assert "ghost" in _commands()
    for argv in (["ghost"], ["ghost", "--port", "1", "x"]):
        code, out, err = _run(*argv)
        assert (code, out) == (1, "")
        assert err == (
            "htm ghost: error: the `htm ghost` command cannot be loaded from "
            "htm_no_such_module:ghost (from htm-ghost): ModuleNotFoundError: No module named "
            "'htm_no_such_module'; reinstall it: pip install --force-reinstall htm-ghost\n")


def test_without_htm_integrations_htm_ui_says_to_reinstall(registered,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The declared providers' package hidden from the import system (``sys.modules[name] =
    None``, which Python treats as not installed); the core's commands still run."""
    registered("htm-memory", DECLARED)
    monkeypatch.setitem(sys.modules, "htm_integrations", None)
    monkeypatch.delitem(sys.modules, "htm_integrations.commands", raising=False)
    for command in ("ui", "mcp"):
        code, _, err = _run(command)
        assert code == 1
        assert (f"the `htm {command}` command cannot be loaded from "
                f"htm_integrations.commands:{command} (from htm-memory): ModuleNotFoundError"
                in err), err
        assert err.endswith("reinstall it: pip install --force-reinstall htm-memory\n")
    assert _run("stats", "--json")[0] == 0


def test_a_provider_that_is_not_a_function_is_a_clear_error(registered) -> None:
    registered("htm-hello", {"name": "htm_hello_cmd:__name__"}, htm_hello_cmd=HELLO)
    code, _, err = _run("name")
    assert code == 1 and "htm_hello_cmd:__name__ is not a function" in err


def test_the_documented_provider_runs(registered) -> None:
    """docs/cli.md's example, registered as its TOML block says."""
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = page.split("## Subcommands from other packages", 1)[1]
    toml = section.split("```toml\n", 1)[1].split("```", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    declared = tomllib.loads(toml)["project"]["entry-points"][GROUP]
    assert declared == {"hello": "my_package.commands:hello"}
    registered("my-package", {"hello": "htm_doc_hello:hello"}, htm_doc_hello=code)
    assert _run("--robot", "docs", "hello", "--name", "Ada") == (0, "hello Ada from docs\n", "")
