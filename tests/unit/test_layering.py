"""The layers import only downwards, checked by parsing every import in the source.

Rules (docs/architecture.md, "Seams"):

- ``htm_core`` never imports ``htm_integrations`` (adapters sit on the core, not in it);
  ``htm mcp`` loads its server by module name at run time.
- The stores, working memory, retrieval, enrichment and the services the facade holds
  (``_embedding``, ``_intake``, ``_listing``, ``_versions``, ``_forgetting``,
  ``_introspection``, ``_async``) never import the facade (``htm_core.htm``), nor the
  package root ``htm_core``, which re-exports it.
- Nothing the facade imports leads back to it: the import graph has no cycle through
  ``htm_core.htm``.

Every ``import`` and ``from ... import`` counts, including ones inside functions and under
``TYPE_CHECKING``; relative imports are resolved against the importing module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "htm_core"

BELOW_THE_FACADE = ("htm_core.store", "htm_core.working", "htm_core.retrieval",
                    "htm_core.enrich", "htm_core._embedding", "htm_core._intake",
                    "htm_core._listing", "htm_core._versions", "htm_core._forgetting",
                    "htm_core._introspection", "htm_core._async")
FACADE = ("htm_core.htm",)


def _module_name(path: Path) -> tuple[str, bool]:
    """The dotted name of ``path`` and whether it is a package ``__init__``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module ``source`` (the text of ``module``) imports, as absolute dotted names.

    ``from a import b`` yields both ``a`` and ``a.b`` (``b`` may be a submodule).
    """
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _core_modules() -> list[tuple[str, set[str]]]:
    out = []
    for path in sorted(CORE.rglob("*.py")):
        name, is_package = _module_name(path)
        out.append((name, imported_modules(path.read_text(encoding="utf-8"), name, is_package)))
    return out


MODULES = _core_modules()


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_parser_sees_every_kind_of_import() -> None:
    source = (
        "import htm_integrations.mcp\n"
        "from ..htm import HTM\n"
        "from .. import htm\n"
        "def later():\n"
        "    from htm_core import HTM\n"
        "if TYPE_CHECKING:\n"
        "    from htm_core.htm import HTM\n"
    )
    found = imported_modules(source, "htm_core.store.sqlite")
    assert {"htm_integrations.mcp", "htm_core.htm", "htm_core", "htm_core.htm.HTM"} <= found
    assert "htm_core.htm" in imported_modules("from . import htm\n", "htm_core", True)


def test_the_rules_cover_the_layers() -> None:
    names = {name for name, _ in MODULES}
    for prefix in BELOW_THE_FACADE:
        assert any(_within(name, (prefix,)) for name in names), f"{prefix} not found"
    assert "htm_core.htm" in names


@pytest.mark.parametrize("name,imports", MODULES, ids=[name for name, _ in MODULES])
def test_core_never_imports_an_adapter(name: str, imports: set[str]) -> None:
    adapters = sorted(i for i in imports if _within(i, ("htm_integrations",)))
    assert not adapters, f"{name} imports {adapters}; htm_core must not depend on adapters"


@pytest.mark.parametrize(
    "name,imports",
    [(n, i) for n, i in MODULES if _within(n, BELOW_THE_FACADE)],
    ids=[n for n, _ in MODULES if _within(n, BELOW_THE_FACADE)])
def test_layers_below_the_facade_never_import_it(name: str, imports: set[str]) -> None:
    facade = sorted(i for i in imports if i == "htm_core" or _within(i, FACADE))
    assert not facade, f"{name} imports {facade}; only the facade's callers may import it"


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
               for path in sorted(CORE.rglob("*.py"))}
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
