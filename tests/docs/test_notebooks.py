"""Every notebook in ``notebooks/`` runs top to bottom in a fresh kernel without an error.

Notebooks are executed with nbclient (the engine behind ``jupyter nbconvert --execute``
and nbmake) on the ``python3`` kernel of this interpreter, in the notebooks directory.
Committed notebooks must carry no outputs.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _need(module: str) -> Any:
    """Import *module*; outside CI a missing one skips, in CI (``CI=true``) it fails."""
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module)


def test_there_are_notebooks() -> None:
    assert any(p.name == "01_quickstart.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_without_error(path: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    nbformat = _need("nbformat")
    nbclient = _need("nbclient")
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{path.name}: commit notebooks without outputs"
    # the kernel inherits this environment: offline, no user database, plotting off-screen
    for name in [n for n in os.environ if n.startswith("HTM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError (with the cell and traceback) on any error
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []


def _requirement_closure(dist: str, extras: set[str]) -> set[str]:
    """Names of every distribution ``pip install "dist[extras]"`` brings in (normalised)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(dist, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        key = canonicalize_name(name)
        if (key, wanted) in seen:
            continue
        seen.add((key, wanted))
        try:
            lines = requires(name) or []
        except PackageNotFoundError:
            continue
        for line in lines:
            req = Requirement(line)
            envs = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, frozenset(req.extras)))
    return {name for name, _ in seen}


def _imported_modules(path: Path) -> set[str]:
    import ast

    nbformat = _need("nbformat")
    modules: set[str] = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines()
                           if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
    return modules


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_needs_only_what_its_install_line_brings(path: Path) -> None:
    """Every module a notebook imports comes with ``pip install "htm-memory[all,notebooks]"``.

    The suite's environment also holds the dev tools, so running a notebook here cannot show
    on its own that a user install suffices; this test follows the distribution's declared
    requirements (markers and extras evaluated) from its installed metadata instead.
    """
    import sys
    from importlib.metadata import packages_distributions

    from packaging.utils import canonicalize_name

    from htm_core.errors import DISTRIBUTION

    closure = _requirement_closure(DISTRIBUTION, {"all", "notebooks"})
    providers = packages_distributions()
    first_cell = "".join(nbformat_cell_sources(path)[:1])
    assert f'pip install "{DISTRIBUTION}[all,notebooks]"' in first_cell
    missing = []
    for module in sorted(_imported_modules(path)):
        if module in sys.stdlib_module_names or module in {"htm_core", "htm_integrations"}:
            continue
        dists = {canonicalize_name(d) for d in providers.get(module, [])}
        if not dists & closure:
            missing.append(f"{module} (from {sorted(dists) or 'nothing installed'})")
    assert not missing, f"{path.name} imports what [all,notebooks] does not install: {missing}"


def nbformat_cell_sources(path: Path) -> list[str]:
    nbformat = _need("nbformat")
    return [cell.source for cell in nbformat.read(path, as_version=4).cells]
