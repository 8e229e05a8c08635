"""The layers import only downwards, checked by parsing every import in the source.

Rules (docs/architecture.md, "Seams"):

- ``htm_core`` never imports ``htm_integrations`` (adapters sit on the core, not in it);
  ``htm mcp`` loads its server by module name at run time.
- The stores, working memory, retrieval, enrichment and the services the facade holds
  (``_embedding``, ``_intake``) never import the facade
  (``htm_core.htm``), nor the package root ``htm_core``, which re-exports it.

Every ``import`` and ``from ... import`` counts, including ones inside functions and under
``TYPE_CHECKING``; relative imports are resolved against the importing module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "htm_core"

BELOW_THE_FACADE = ("htm_core.store", "htm_core.working", "htm_core.recall",
                    "htm_core.enrich", "htm_core._embedding", "htm_core._intake")
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
