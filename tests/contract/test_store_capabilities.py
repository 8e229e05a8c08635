"""The store seam: the required protocol is what the core calls, and the rest are declared
capabilities the facade asks for by name (``htm_core.store.base.CAPABILITIES``).

``CoreOnly`` shows an ``InMemoryStore`` through the required roles alone, as a third-party
backend that offers nothing optional would be: everything that needs no capability works,
and each call that needs one says which, and writes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from htm_core import HTM, UnsupportedError
from htm_core.embeddings import HashingEmbedder
from htm_core.store import LongTermStore
from htm_core.store.base import CAPABILITIES
from htm_core.testing import InMemoryStore
from htm_core.transfer import export_jsonl

ROOT = Path(__file__).resolve().parents[2]


def protocol_members(protocol: type) -> set[str]:
    """The names a Protocol declares, its own and its bases' (not ``Protocol``'s)."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls.__module__.startswith("htm_core"):
            names |= {n for n in vars(cls) if not n.startswith("_")}
            names |= set(getattr(cls, "__annotations__", {}))
    return names


REQUIRED = protocol_members(LongTermStore)


class CoreOnly:
    """An in-memory store offering only what ``LongTermStore`` requires."""

    def __init__(self) -> None:
        self._inner = InMemoryStore()

    def __getattr__(self, name: str) -> Any:
        if name in REQUIRED:
            return getattr(self._inner, name)
        raise AttributeError(name)


def core_callers() -> str:
    """The source of every module that calls a store: the core outside the stores and
    the test kit, and the adapters."""
    files = [*ROOT.joinpath("htm_core").rglob("*.py"), *ROOT.joinpath("htm_integrations").rglob("*.py")]
    return "\n".join(f.read_text(encoding="utf-8") for f in files
                     if "store" not in f.relative_to(ROOT).parts[1:2]
                     and "testing" not in f.relative_to(ROOT).parts[1:2])


def test_the_required_protocol_is_narrow_and_every_member_has_a_caller() -> None:
    source = core_callers()
    unused = sorted(n for n in REQUIRED - {"backend", "url"}
                    if not re.search(rf"\.{n}\b", source))
    assert unused == [], f"required store members nothing outside the stores calls: {unused}"
    assert len(REQUIRED) <= 35
    assert not REQUIRED & set().union(*(protocol_members(p) for p in CAPABILITIES.values()))


def test_a_store_with_only_the_required_roles_serves_the_facade(tmp_path: Path) -> None:
    store = CoreOnly()
    assert isinstance(store, LongTermStore)
    assert not any(isinstance(store, role) for role in CAPABILITIES.values())
    with HTM("bot", store=store, embedder=HashingEmbedder(dim=64)) as htm:  # type: ignore[arg-type]
        htm.add("Ada prefers green tea over coffee", key="tea")
        htm.add("The quarterly report is due on Friday", key="report")
        assert [h.memory.key for h in htm.recall("what does Ada drink", limit=1)] == ["tea"]
        assert [m.key for m in htm.list().memories] == ["tea", "report"]
        for call, capability in [
            (lambda: htm.update("tea", content="Ada prefers black coffee"), "versions"),
            (lambda: htm.versions("tea"), "versions"),
            (lambda: htm.recall("tea", include_history=True), "versions"),
            (lambda: htm.reembed(force=True), "embedding_repair"),
            (lambda: export_jsonl(store, tmp_path / "out.jsonl"), "bulk_load"),  # type: ignore[arg-type]
        ]:
            with pytest.raises(UnsupportedError, match=f"'{capability}' capability"):
                call()
        assert htm.get("tea").content == "Ada prefers green tea over coffee"
        assert not (tmp_path / "out.jsonl").exists()
        htm.forget("report", confirm=True)
        assert [m.key for m in htm.list().memories] == ["tea"]
