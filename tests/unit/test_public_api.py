"""The public surface is deliberate: this fails when ``__all__`` drifts."""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import re

import htm_core
from htm_core import errors

#: The error tree drawn for readers (docs/api.md, "Errors"): the ``text`` block of that section.
ERROR_TREE = re.search(r"^## Errors\n.*?^```text\n(.*?)^```",
                       (pathlib.Path(__file__).resolve().parents[2] / "docs" / "api.md")
                       .read_text(encoding="utf-8"), re.M | re.S).group(1)

EXPECTED_ERRORS = [
    "ClosedError", "ConfirmationRequiredError", "ConflictError", "DatabaseCorruptError",
    "DatabaseUnavailableError",
    "DimensionMismatchError", "DiskFullError", "DuplicateKeyError", "EmbedderMismatchError",
    "EmbeddingError", "EnrichmentError", "HTMError", "IncompleteExportError", "InvalidBudgetError",
    "InvalidContentError", "InvalidImportanceError", "InvalidKeyError", "InvalidMetadataError",
    "InvalidModelOutputError", "InvalidTagError", "InvalidTimeError", "InvalidTokensError",
    "JobQueueError", "MemoryTooLargeError", "MissingDependencyError", "ModelCallError",
    "NotFoundError", "ReadOnlyError", "SchemaError", "StoreError", "TimeframeError",
    "UnknownJobKindError", "UnknownPolicyError", "UnknownStrategyError", "UnsupportedError",
    "UnsupportedFilterError",
    "ValidationError",
]
EXPECTED_CORE = [
    "HTM", *sorted([
        "CallableCounter", "Context", "Embedder", "EmbeddingOptions", "EnrichmentOptions",
        "FrozenClock", "HashingEmbedder", "Hit", "LocalEmbedder", "Memory", "Observability",
        "Operation", "Page", "RetrievalConfig", "Robot", "Stats", "TiktokenCounter",
        "TokenCounter", "WorkingMemory", "WorkingMemoryOptions", *EXPECTED_ERRORS]),
    "__version__",
    "run_async",
]


def test_core_exports_are_pinned():
    assert htm_core.__all__ == EXPECTED_CORE
    for name in htm_core.__all__:
        assert hasattr(htm_core, name), name


def test_version_comes_from_package_metadata():
    from importlib.metadata import version

    assert htm_core.__version__ == version("htm-memory")


def test_every_error_is_an_htm_error_and_exported():
    classes = [obj for _, obj in inspect.getmembers(errors, inspect.isclass)
               if obj.__module__ == errors.__name__]
    assert sorted(c.__name__ for c in classes) == errors.__all__
    assert all(issubclass(c, errors.HTMError) for c in classes)
    for cls in classes:
        assert cls.__doc__, f"{cls.__name__} needs a docstring"
        assert cls.__name__ in ERROR_TREE, f"{cls.__name__} missing from the tree drawing"


def _htm_errors_defined_in_htm_core() -> dict[str, type]:
    """Every HTMError subclass defined in any module of htm_core, by name."""
    root = pathlib.Path(htm_core.__file__).parent
    found: dict[str, type] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        module = importlib.import_module(name)
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, errors.HTMError) and cls.__module__ == name:
                assert found.setdefault(cls_name, cls) is cls, f"two errors named {cls_name}"
    return found


def test_the_whole_error_tree_is_exported_from_htm_core():
    defined = _htm_errors_defined_in_htm_core()
    assert sorted(defined) == EXPECTED_ERRORS
    for name, cls in defined.items():
        assert getattr(htm_core, name) is cls, name


def test_the_tree_drawn_in_errors_matches_the_classes():
    """Each class in the drawing of docs/api.md sits under its real base class, and all are drawn."""
    defined = _htm_errors_defined_in_htm_core()
    drawn: dict[str, type] = {}
    parents: list[str] = []
    for line in ERROR_TREE.splitlines():
        node = re.match(r"^((?:[│ ] {3})*)(?:[├└]── )?([A-Z]\w*Error)\b", line)
        if not node:
            continue
        depth = len(node.group(1)) // 4 + (1 if "── " in line else 0)
        name = node.group(2)
        parents[depth:] = [name]
        cls = defined[name]
        drawn[name] = cls
        if depth:
            parent = defined[parents[depth - 1]]
            assert parent in cls.__bases__, f"{name} is drawn under {parent.__name__}"
    assert sorted(drawn) == sorted(defined)


def _imports(tree: ast.AST) -> list[tuple[str, bool]]:
    """(module, at module level) for every import in a parsed file."""
    top = {id(node) for node in getattr(tree, "body", [])}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, id(node) in top))
    return found


def test_core_imports_no_framework():
    """htm_core never imports LangChain or LlamaIndex; the Ollama client package
    (langchain-ollama, extra ``ollama``) is imported lazily inside functions only."""
    root = pathlib.Path(htm_core.__file__).parent
    for path in root.rglob("*.py"):
        for module, top_level in _imports(ast.parse(path.read_text())):
            package = module.split(".")[0]
            assert package not in {"langchain", "langchain_core", "langchain_classic",
                                   "langgraph", "llama_index"}, f"{path} imports {module}"
            if package.startswith(("psycopg", "pgvector")):
                assert path.parent.name == "postgres", f"{path} imports {module}"
            elif package.startswith(("langchain", "sentence_transformers", "opentelemetry", "mcp")):
                assert not top_level, f"{path} imports optional {module} at module level"


def test_all_lists_are_sorted():
    for module in ("htm_core.errors", "htm_core.models", "htm_core.working", "htm_core.store"):
        mod = importlib.import_module(module)
        names = [n for n in mod.__all__ if not n.startswith("_")]
        assert names == sorted(names, key=lambda n: (not n.isupper(), n)) or names == sorted(names), module
