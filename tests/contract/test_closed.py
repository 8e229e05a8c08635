"""A closed ``HTM`` refuses every call with ``ClosedError``; ``close()`` again is harmless.

Every public method (and its async twin) is called after ``close()`` with arguments that
would work on an open instance; each must raise :class:`~htm_core.errors.ClosedError` and
write nothing. A new public method fails :func:`test_the_table_names_every_public_method`
until it is added to :data:`CALLS`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from htm_core import HTM, ClosedError, HashingEmbedder, HTMError
from htm_core.store import open_store

#: Each public method of ``HTM`` (but ``close``) with arguments an open instance takes.
CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "add": (("Ada likes green tea",), {"key": "new"}),
    "add_document": (("# Tea\n\nGreen tea, steeped briefly.",), {"source": "tea.md"}),
    "add_many": ((["Ada likes green tea", {"content": "ada likes Green tea"}],), {}),
    "clear_working_memory": ((), {}),
    "consolidate": (("day",), {"at": "2024-05-15"}),
    "create_context": (("balanced", 1_000), {}),
    "flush": ((), {"timeout": 5}),
    "flush_consolidation": ((), {"timeout": 5}),
    "flush_enrichment": ((), {"timeout": 5}),
    "digests": ((), {}),
    "forget": (("kept",), {"confirm": True}),
    "get": (("kept",), {}),
    "list": ((), {"limit": 5}),
    "migrate": ((), {}),
    "operations": ((), {"limit": 5}),
    "purge": ((), {"confirm": True}),
    "recall": (("tea",), {}),
    "reembed": ((), {"progress": False, "force": True}),
    "restore": (("gone",), {}),
    "retrieve": (("kept",), {}),
    "retry_failed_embeddings": ((), {}),
    "robots": ((), {}),
    "schedule_consolidation": (("day",), {"at": "2024-05-15"}),
    "stats": ((), {}),
    "tags": ((), {}),
    "update": (("kept", "Ada switched to black tea"), {}),
    "versions": (("kept",), {}),
}


def _public_methods() -> set[str]:
    return {name for name, value in inspect.getmembers(HTM)
            if not name.startswith("_") and callable(value)
            and not isinstance(inspect.getattr_static(HTM, name), property)
            and not inspect.iscoroutinefunction(value)}


def test_the_table_names_every_public_method() -> None:
    assert set(CALLS) | {"close"} == _public_methods()


def _seeded(make: Callable[..., HTM], robot: str) -> HTM:
    htm = make(robot=robot)
    htm.add("Ada likes green tea", key="kept", tags=["drink:tea"])
    htm.add("Ada's old note", key="gone")
    htm.forget("gone", confirm=True)
    return htm


def _state(htm: HTM) -> tuple[Any, ...]:
    page = htm.list(include_forgotten=True, limit=50)
    return (sorted((m.key, m.content, m.version, m.forgotten_at is not None)
                   for m in page.memories), len(htm.operations(limit=1_000)))


def test_every_call_on_a_closed_htm_raises_closed_error_and_writes_nothing(
        htm_factory: Callable[..., HTM]) -> None:
    closed = _seeded(htm_factory, "Ada")
    witness = htm_factory(robot="ada")  # another robot on the same store stays open
    before = _state(witness)
    closed.close()
    let_through = []
    for name, (args, kwargs) in sorted(CALLS.items()):
        sync, twin = getattr(closed, name), getattr(closed, f"a{name}")
        for call in (partial(sync, *args, **kwargs),
                     partial(asyncio.run, twin(*args, **kwargs))):
            try:
                call()
            except ClosedError as exc:
                assert isinstance(exc, HTMError)
                assert "closed" in str(exc)
            except Exception as exc:
                let_through.append(f"{name}: {type(exc).__name__}: {exc}")
            else:
                let_through.append(f"{name}: returned")
    assert let_through == []
    assert _state(witness) == before
    assert witness.get("kept") is not None


def test_close_twice_and_aclose_after_close_are_harmless(htm_factory: Callable[..., HTM]
                                                         ) -> None:
    htm = _seeded(htm_factory, "Ada")
    htm.close()
    htm.close()
    asyncio.run(htm.aclose())
    htm.__exit__(None, None, None)  # leaving a with block closes again: harmless too
    with pytest.raises(ClosedError), htm:
        pass  # entering a closed HTM is refused like any call
    with pytest.raises(ClosedError):
        htm.get("kept")


def test_a_closed_htm_over_a_shared_store_refuses_while_the_store_stays_open(
        store_url: str) -> None:
    """An ``HTM`` given an open store does not close it; it still refuses calls once
    closed, and the store's other users are not affected."""
    store = open_store(store_url)
    try:
        first = HTM(robot="Ada", store=store, embedder=HashingEmbedder())
        second = HTM(robot="ada", store=store, embedder=HashingEmbedder())
        first.add("Ada likes green tea", key="kept")
        first.close()
        with pytest.raises(ClosedError):
            first.add("written after close", key="late")
        with pytest.raises(ClosedError):
            first.recall("tea")
        assert second.get("late") is None
        assert [h.memory.key for h in second.recall("green tea")] == ["kept"]
        second.close()
        assert store.get("kept") is not None
    finally:
        store.close()
