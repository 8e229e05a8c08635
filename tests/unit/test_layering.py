"""The layers import only downwards, checked by parsing every import in the source.

Each "never" of docs/architecture.md ("Seams: Layers import downwards only") is a test here:

- ``htm_core`` never imports ``htm_integrations``, nor names one of its modules in a string
  (``importlib.import_module``, ``find_spec``): the adapters' subcommands come from the
  ``htm.commands`` entry points.
- The stores, working memory, retrieval, enrichment and the services the facade holds never
  import the facade (``htm_core.htm``) nor the package root ``htm_core``, which re-exports
  it, not even for type checking; and nothing the facade imports leads back to it (the
  import graph has no cycle through ``htm_core.htm``).
- The working memory (``memory.py``, ``eviction.py``, ``context.py``) never imports a store:
  ``resident.py`` is the one place it meets the store. Stores never import working memory.
- Adapters never import a private part of ``htm_core`` (a module or name starting with
  ``_``), nor read another object's private attribute (``ADAPTER_PRIVATE_READS`` lists
  today's and may only shrink): they use its public API.
- A private module (``_x``) is never imported from outside the package that holds it
  (``PRIVATE_CROSSINGS`` lists today's crossings and may only shrink).
- A framework is never imported outside its adapter package: LangChain and LangGraph only in
  ``htm_integrations.langchain``, LlamaIndex only in ``htm_integrations.llama_index``, the
  MCP SDK only in ``htm_integrations.mcp``, the web stack only in ``htm_integrations.ui``
  (so ``htm_core`` imports none of them).

Every ``import`` and ``from ... import`` counts, including ones inside functions and under
``TYPE_CHECKING``; relative imports are resolved against the importing module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("htm_core", "htm_integrations")

BELOW_THE_FACADE = ("htm_core.store", "htm_core.working", "htm_core.recall",
                    "htm_core.enrich", "htm_core._embedding", "htm_core._intake",
                    "htm_core._listing", "htm_core._recalling", "htm_core._versions",
                    "htm_core._forgetting",
                    "htm_core._introspection", "htm_core._async", "htm_core.jobs",
                    "htm_core.consolidation", "htm_core.options")
FACADE = ("htm_core.htm",)

#: The working memory that knows nothing of storage (``working.resident`` is where the two meet).
WORKING_MEMORY = ("htm_core.working.memory", "htm_core.working.eviction",
                  "htm_core.working.context")

#: ``(importer, private module)`` pairs where a private module is used outside its package
#: today. May only shrink: an entry no longer needed fails the test until it is removed.
PRIVATE_CROSSINGS: frozenset[tuple[str, str]] = frozenset()

#: ``(adapter module, expression)`` where an adapter reads a private attribute of an object
#: not its own today. May only shrink.
ADAPTER_PRIVATE_READS: frozenset[tuple[str, str]] = frozenset()

#: Each framework's top-level import name and the one package allowed to import it.
FRAMEWORKS = {
    "langchain": "htm_integrations.langchain",
    "langchain_core": "htm_integrations.langchain",
    "langchain_classic": "htm_integrations.langchain",
    "langgraph": "htm_integrations.langchain",
    "llama_index": "htm_integrations.llama_index",
    "mcp": "htm_integrations.mcp",
    "starlette": "htm_integrations.ui",
    "jinja2": "htm_integrations.ui",
    "uvicorn": "htm_integrations.ui",
}

ADAPTER_NAME = re.compile(r"htm_integrations(\.|:|$)")


def _module_name(path: Path) -> tuple[str, bool]:
    """The dotted name of ``path`` and whether it is a package ``__init__``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _is_module(name: str) -> bool:
    """Whether ``name`` is a module or package of this project's source tree."""
    path = ROOT.joinpath(*name.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The ids of the nodes under an ``if TYPE_CHECKING:`` block."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                inside.update(id(child) for child in ast.walk(statement))
    return inside


def imports(source: str, module: str, is_package: bool = False) -> dict[str, bool]:
    """Every module ``source`` (the text of ``module``) imports, as absolute dotted names,
    each with whether it is imported only for type checking.

    ``from a import b`` yields ``a.b`` when that is one of this project's modules, else both
    ``a`` and ``a.b`` (``b`` may be a name or a submodule of a package not in this tree).
    """
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(source)
    typing_only = _type_checking_nodes(tree)
    found: dict[str, bool] = {}

    def add(name: str, node: ast.AST) -> None:
        found[name] = found.get(name, True) and id(node) in typing_only

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            names = [f"{target}.{alias.name}" for alias in node.names]
            for name in names:
                add(name, node)
            if not all(_is_module(name) for name in names):
                add(target, node)
    return found


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """The names :func:`imports` finds, type checking or not."""
    return set(imports(source, module, is_package))


def adapter_names_in_strings(source: str) -> list[str]:
    """String constants (not prose) that name an ``htm_integrations`` module or object."""
    return sorted(node.value for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and ADAPTER_NAME.match(node.value.strip()) and " " not in node.value.strip())


def _source_modules() -> list[tuple[str, str, dict[str, bool]]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name, is_package = _module_name(path)
            source = path.read_text(encoding="utf-8")
            out.append((name, source, imports(source, name, is_package)))
    return out


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


SOURCES = _source_modules()
MODULES = [(name, set(found)) for name, _, found in SOURCES]
CORE = [(name, found) for name, found in MODULES if _within(name, ("htm_core",))]
ADAPTERS = [(name, found) for name, found in MODULES if _within(name, ("htm_integrations",))]


def _ids(rows: list[tuple[str, set[str]]]) -> list[str]:
    return [name for name, _ in rows]


def _private_owner(name: str) -> str | None:
    """The package a private part of ``name`` belongs to (None when nothing in it is
    private): ``a.b._c`` belongs to ``a.b`` when that is a package, else to ``a``."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            owner = ".".join(parts[:i])
            return owner if (ROOT.joinpath(*parts[:i])).is_dir() else ".".join(parts[:i - 1])
    return None


def private_crossings() -> set[tuple[str, str]]:
    """``(importer, private module)`` for every private module imported from outside its
    package (the private module named up to its private part)."""
    found = set()
    for name, imported in MODULES:
        for target in imported:
            owner = _private_owner(target)
            if owner is None or _within(name, (owner,)):
                continue
            parts = target.split(".")
            private = next(i for i, p in enumerate(parts) if p.startswith("_")
                           and not p.startswith("__"))
            module = ".".join(parts[:private + 1])
            found.add((name, module if _is_module(module) else ".".join(parts[:private])))
    return found


# -- the parser sees what it must -----------------------------------------------------


def test_the_parser_sees_every_kind_of_import() -> None:
    source = (
        "import htm_integrations.mcp\n"
        "from ..htm import HTM\n"
        "from .. import htm\n"
        "def later():\n"
        "    from htm_core import HTM\n"
        "if TYPE_CHECKING:\n"
        "    from htm_core.htm import HTM\n"
        "    from htm_core.models import Memory\n"
    )
    found = imports(source, "htm_core.store.sqlite")
    assert {"htm_integrations.mcp", "htm_core.htm", "htm_core", "htm_core.htm.HTM"} <= set(found)
    assert found["htm_core.models.Memory"] is True
    assert found["htm_core.htm"] is False  # imported at run time as well
    assert "htm_core.htm" in imported_modules("from . import htm\n", "htm_core", True)
    assert imported_modules("from . import _intake\n", "htm_core._forgetting") == {
        "htm_core._intake"}


def test_the_string_check_sees_an_adapter_loaded_by_name() -> None:
    source = ('"""Loads htm_integrations.mcp at run time."""\n'
              'import importlib\n'
              'MCP = "htm_integrations.mcp.server"\n'
              'importlib.import_module("htm_integrations." + "ui")\n'
              'POINT = "htm_integrations.commands:ui"\n')
    assert adapter_names_in_strings(source) == [
        "htm_integrations.", "htm_integrations.commands:ui", "htm_integrations.mcp.server"]


def test_the_private_check_knows_whose_a_private_part_is() -> None:
    assert _private_owner("htm_core.store._coherence") == "htm_core.store"
    assert _private_owner("htm_core.store.sqlite._schema._SCHEMA_V1") == "htm_core.store.sqlite"
    assert _private_owner("htm_core.cli_args._opt") == "htm_core"
    assert _private_owner("htm_core.store.base") is None
    assert _private_owner("htm_core.__version__") is None


def test_the_rules_cover_the_layers() -> None:
    names = set(_ids(MODULES))
    for prefix in (*BELOW_THE_FACADE, *WORKING_MEMORY, *FRAMEWORKS.values()):
        assert any(_within(name, (prefix,)) for name in names), f"{prefix} not found"
    assert {"htm_core.htm", "htm_core.cli", "htm_integrations.commands"} <= names


# -- the rules -------------------------------------------------------------------------


@pytest.mark.parametrize("name,imported", CORE, ids=_ids(CORE))
def test_core_never_imports_an_adapter(name: str, imported: set[str]) -> None:
    adapters = sorted(i for i in imported if _within(i, ("htm_integrations",)))
    assert not adapters, f"{name} imports {adapters}; htm_core must not depend on adapters"


@pytest.mark.parametrize("name,source", [(n, s) for n, s, _ in SOURCES if n.startswith("htm_core")],
                         ids=[n for n, _, _ in SOURCES if n.startswith("htm_core")])
def test_core_never_names_an_adapter_to_load_it(name: str, source: str) -> None:
    """No module name in a string either (``importlib.import_module("htm_integrations...")``):
    an adapter's command reaches the core through the ``htm.commands`` entry points."""
    assert adapter_names_in_strings(source) == [], f"{name} names an adapter module"


@pytest.mark.parametrize(
    "name,imported",
    [(n, i) for n, i in MODULES if _within(n, BELOW_THE_FACADE)],
    ids=[n for n, _ in MODULES if _within(n, BELOW_THE_FACADE)])
def test_layers_below_the_facade_never_import_it(name: str, imported: set[str]) -> None:
    facade = sorted(i for i in imported if i == "htm_core" or _within(i, FACADE))
    assert not facade, f"{name} imports {facade}; only the facade's callers may import it"


@pytest.mark.parametrize("name,imported", [(n, i) for n, i in MODULES if _within(n, WORKING_MEMORY)],
                         ids=[n for n, _ in MODULES if _within(n, WORKING_MEMORY)])
def test_working_memory_never_imports_a_store(name: str, imported: set[str]) -> None:
    stores = sorted(i for i in imported if _within(i, ("htm_core.store",)))
    assert not stores, f"{name} imports {stores}; only working/resident.py meets the store"


@pytest.mark.parametrize("name,imported", [(n, i) for n, i in MODULES
                                           if _within(n, ("htm_core.store",))],
                         ids=[n for n, _ in MODULES if _within(n, ("htm_core.store",))])
def test_stores_never_import_working_memory(name: str, imported: set[str]) -> None:
    working = sorted(i for i in imported if _within(i, ("htm_core.working",)))
    assert not working, f"{name} imports {working}; stores know nothing of working memory"


@pytest.mark.parametrize("name,imported", ADAPTERS, ids=_ids(ADAPTERS))
def test_adapters_never_import_a_private_part_of_the_core(name: str, imported: set[str]) -> None:
    private = sorted(i for i in imported
                     if _within(i, ("htm_core",)) and _private_owner(i) is not None)
    assert not private, f"{name} imports {private}; adapters use htm_core's public API"


def test_private_modules_are_never_imported_from_outside_their_package() -> None:
    found = private_crossings()
    assert found - PRIVATE_CROSSINGS == set(), (
        "a private module used outside its package: make what it offers public, or move "
        "the caller in")
    assert PRIVATE_CROSSINGS - found == set(), "gone: remove these from PRIVATE_CROSSINGS"


@pytest.mark.parametrize("name,imported", MODULES, ids=_ids(MODULES))
def test_frameworks_are_never_imported_outside_their_adapter(name: str, imported: set[str]) -> None:
    outside = sorted(i for i in imported if i.split(".")[0] in FRAMEWORKS
                     and not _within(name, (FRAMEWORKS[i.split(".")[0]],)))
    assert not outside, f"{name} imports {outside} outside its adapter package"


def private_reads(source: str) -> list[str]:
    """``x._name`` expressions in ``source`` whose ``x`` is not ``self`` or ``cls``."""
    return sorted(ast.unparse(node) for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Attribute) and node.attr.startswith("_")
                  and not node.attr.startswith("__")
                  and ast.unparse(node.value) not in ("self", "cls"))


def test_the_private_read_check_sees_one() -> None:
    assert private_reads("self._a\ncls._b\nhtm._clock\nself.htm._store.x\nx.__class__\n") == [
        "htm._clock", "self.htm._store"]


def test_adapters_never_read_private_attributes_of_other_objects() -> None:
    found = {(name, read) for name, source, _ in SOURCES if _within(name, ("htm_integrations",))
             for read in private_reads(source)}
    assert found - ADAPTER_PRIVATE_READS == set(), "adapters use htm_core's public API"
    assert ADAPTER_PRIVATE_READS - found == set(), "gone: remove these from ADAPTER_PRIVATE_READS"


def module_imports(source: str, module: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (the text of ``module``) imports:
    ``from a import b`` imports ``a.b`` when that is a module, else ``a``."""
    found: set[str] = set()
    for target in imported_modules(source, module):
        if target in known:
            found.add(target)
    # ``a`` was listed for every ``from a import b``; keep it only for a name that is not
    # a module of its own
    found = {t for t in found if not any(o.startswith(t + ".") for o in found)
             or _takes_a_name(source, module, t, known)}
    # importing ``a.b.c`` runs the packages ``a.b`` and ``a`` first
    return found | {p for t in found for p in _parents(t) if p in known}


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _takes_a_name(source: str, module: str, package: str, known: set[str]) -> bool:
    """Whether ``source`` imports from ``package`` a name that is not a module."""
    names = imported_modules(source, module)
    return any(n.startswith(package + ".") and "." not in n[len(package) + 1:]
               and n not in known for n in names)


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Each module -> the modules of ``sources`` it imports (every import counts, inside
    functions and under ``TYPE_CHECKING`` too)."""
    known = set(sources)
    return {name: module_imports(text, name, known) for name, text in sources.items()}


def _core_sources() -> dict[str, str]:
    """Every module of ``htm_core`` but the package root (see below) -> its text."""
    sources = {_module_name(path)[0]: path.read_text(encoding="utf-8")
               for path in sorted((ROOT / "htm_core").rglob("*.py"))}
    del sources["htm_core"]
    return sources


def reachable(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    return seen


def test_the_graph_sees_a_cycle() -> None:
    graph = import_graph({
        "htm_core.htm": "from . import _listing\nfrom .models import Memory\n",
        "htm_core._listing": "if TYPE_CHECKING:\n    from .htm import HTM\n",
        "htm_core.models": "",
    })
    assert graph["htm_core.htm"] == {"htm_core._listing", "htm_core.models"}
    assert "htm_core.htm" in reachable(graph, graph["htm_core.htm"])


def test_nothing_the_facade_imports_leads_back_to_it() -> None:
    """The package root is left out: its re-export of ``HTM`` is the public entry point
    (every import of a submodule runs it first, before the facade), and
    :func:`test_layers_below_the_facade_never_import_it` keeps the layers below from
    importing it."""
    graph = import_graph(_core_sources())
    back = sorted(name for name in graph["htm_core.htm"]
                  if "htm_core.htm" in reachable(graph, {name}))
    assert not back, f"htm_core.htm imports {back}, which import it back"
