"""The async twins of ``HTM``'s public methods, made from the sync methods.

Every public method of :class:`~htm_core.HTM` that does I/O has a twin named ``a<name>``,
declared beside it as ``a<name> = twin(<name>)``: the twin has exactly the sync method's
signature (for type checkers too) and runs the sync method off the event loop: natively
(a greenlet on the loop's thread, :mod:`htm_core._native`) when ``HTM.native_async``
(PostgreSQL), else in a worker thread; with ``native=False`` always in a thread (methods
that wait for threads or run long). See docs/postgres.md, "Async (native)".
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from ._native import run_native

__all__ = ["run_async", "twin"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


async def run_async(memory: Any, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
    """``fn(*args, **kwargs)`` without blocking the event loop, the way ``memory``'s own
    twins run: natively when ``memory.native_async`` (an :class:`~htm_core.HTM` on
    PostgreSQL), else in a worker thread. For adapters whose sync methods call ``memory``.

    >>> import asyncio
    >>> from htm_core import HTM
    >>> with HTM(database_url=":memory:", embedder="hashing") as htm:
    ...     asyncio.run(run_async(htm, htm.add, "Ada likes tea")).content
    'Ada likes tea'
    """
    if getattr(memory, "native_async", False):
        return await run_native(fn, *args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


def twin(method: Callable[Concatenate[S, P], R], *, listed: str | None = None,
         native: bool = True) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The async twin of ``method``: it calls the instance's ``method`` (looked up by name,
    so an override is honoured) through :func:`run_async` (or, when not ``native``,
    always in a worker thread).

    ``listed`` names a parameter that may be any iterable: the twin reads it into a list
    first, on the caller's thread (a generator tied to the event loop's state is consumed
    where it was made).
    """
    name = method.__name__
    signature = inspect.signature(method) if listed else None

    @functools.wraps(method)
    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        call: Callable[..., R] = getattr(self, name)
        if signature is not None and listed is not None:
            args, kwargs = _listed_first(  # type: ignore[assignment]
                signature, listed, self, args, kwargs)
        if native:
            return await run_async(self, call, *args, **kwargs)
        return await asyncio.to_thread(call, *args, **kwargs)

    run.__name__ = f"a{name}"
    run.__qualname__ = f"{method.__qualname__.rpartition('.')[0]}.a{name}".lstrip(".")
    run.__doc__ = f"Async :meth:`{name}`." if not listed else (
        f"Async :meth:`{name}` (``{listed}`` is read into a list first, on the caller's thread).")
    return run


def _listed_first(signature: inspect.Signature, parameter: str, self: Any,
                  args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with the argument bound to ``parameter`` made a list."""
    bound = signature.bind(self, *args, **kwargs)
    if parameter in bound.arguments:
        bound.arguments[parameter] = list(bound.arguments[parameter])
    return tuple(bound.args[1:]), dict(bound.kwargs)
