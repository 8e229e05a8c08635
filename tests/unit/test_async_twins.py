"""Every public I/O method of ``HTM`` has an async twin with exactly its signature, and the
twin runs the sync method off the event loop (natively on PostgreSQL)."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

import greenlet  # type: ignore[import-untyped]
import pytest

from htm_core import HTM


def _sync_methods() -> dict[str, Callable[..., Any]]:
    """HTM's public methods that are not twins: everything public and callable except
    properties and coroutine functions (every one of them reaches the store, the embedder or
    a worker thread, so each needs a twin)."""
    out = {}
    for name, value in inspect.getmembers(HTM):
        if name.startswith("_") or isinstance(inspect.getattr_static(HTM, name), property):
            continue
        if callable(value) and not inspect.iscoroutinefunction(value):
            out[name] = value
    return out


def _twins() -> dict[str, Callable[..., Any]]:
    return {name: value for name, value in inspect.getmembers(HTM)
            if not name.startswith("_") and inspect.iscoroutinefunction(value)}


def test_the_public_methods_are_found() -> None:
    """Guards the comparison below against finding nothing to compare."""
    assert {"add", "add_many", "add_document", "recall", "retrieve", "create_context",
            "forget", "restore", "purge", "stats", "operations", "flush",
            "reembed"} <= set(_sync_methods())


@pytest.mark.parametrize("name", sorted(_sync_methods()))
def test_every_public_method_has_a_twin_with_its_exact_signature(name: str) -> None:
    twin = getattr(HTM, f"a{name}", None)
    assert twin is not None, f"HTM.{name} has no async twin HTM.a{name}"
    assert inspect.iscoroutinefunction(twin)
    sync_sig = inspect.signature(getattr(HTM, name), eval_str=True)
    twin_sig = inspect.signature(twin, eval_str=True)
    assert list(twin_sig.parameters.values()) == list(sync_sig.parameters.values())
    assert twin_sig.return_annotation == sync_sig.return_annotation
    assert twin_sig == sync_sig


def test_every_twin_has_a_sync_namesake() -> None:
    sync = _sync_methods()
    orphans = [name for name in _twins() if name[1:] not in sync]
    assert not orphans


async def test_a_twin_runs_off_the_event_loop_and_returns_what_the_sync_method_does(
        store_url: str) -> None:
    """The token counter records where each text is counted: ``add`` counts its content and
    ``create_context`` its assembled text, so the records show where they ran. On SQLite
    that is a worker thread; on PostgreSQL a greenlet of the loop's own thread (native)."""
    seen: list[tuple[str, Any]] = []

    def counter(text: str) -> int:
        seen.append((text, (threading.get_ident(), greenlet.getcurrent())))
        return max(1, len(text) // 4)

    loop_thread = (threading.get_ident(), greenlet.getcurrent())
    native = not store_url.endswith(".db")
    with HTM(robot="twins", database_url=store_url, embedder="hashing",
             token_counter=counter) as htm:
        added = await htm.aadd("kites fly best in a steady wind", key="kite",
                               tags=["hobby:kites"], importance=7.0)
        await htm.aadd_many(["gliders need thermals", {"content": "tea is steeped", "tags":
                                                       ["food"]}])
        add_threads = {t for text, t in seen if text == "kites fly best in a steady wind"}
        assert add_threads and loop_thread not in add_threads
        assert htm.native_async == native
        assert {t[0] == loop_thread[0] for t in add_threads} == {native}

        stored = htm.store.get("kite")
        assert stored is not None
        assert (added.id, added.key, added.content, added.tags, added.importance) == \
            (stored.id, stored.key, stored.content, stored.tags, stored.importance)

        options: dict[str, Any] = {"include_summaries": 0, "tags": ["hobby"],
                                   "scope_working": True}
        seen.clear()
        async_ctx = await htm.acreate_context("important", 2_000, **options)
        ctx_threads = {t for text, t in seen if text == async_ctx.text}
        assert ctx_threads and loop_thread not in ctx_threads
        assert {t[0] == loop_thread[0] for t in ctx_threads} == {native}
        assert async_ctx == htm.create_context("important", 2_000, **options)
        assert [m.key for m in async_ctx.memories] == ["kite"]  # scope_working reached it

        assert await htm.atags() == htm.tags()
        assert await htm.arobots() == htm.robots()


async def test_aadd_many_reads_its_items_on_the_callers_thread(store_url: str) -> None:
    """A generator given to ``aadd_many`` (by position or by name) is consumed on the event
    loop's thread before the worker thread writes the batch."""
    read_on: list[int] = []

    def items(prefix: str) -> Any:
        read_on.append(threading.get_ident())
        yield f"{prefix} kites fly best in a steady wind"
        yield {"content": f"{prefix} gliders need thermals", "key": f"{prefix}-glide"}

    with HTM(robot="twins", database_url=store_url, embedder="hashing") as htm:
        by_position = await htm.aadd_many(items("one"), working_memory=False)
        by_name = await htm.aadd_many(items=items("two"))
        assert [m.key for m in by_position][1:] == ["one-glide"]
        assert [m.key for m in by_name][1:] == ["two-glide"]
        assert not by_position[0].in_working_memory and by_name[0].in_working_memory
    assert read_on == [threading.get_ident()] * 2
