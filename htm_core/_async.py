"""The async twins of ``HTM``'s public methods, made from the sync methods.

Every public method of :class:`~htm_core.HTM` that does I/O has a twin named ``a<name>``,
declared beside it as ``a<name> = twin(<name>)``: the twin has exactly the sync method's
signature (parameters, defaults, annotations, return type; for type checkers too) and
runs the sync method in a worker thread (:func:`asyncio.to_thread`) so the event loop
never blocks on the database, the embedder or a lock. ``tests/unit/test_async_twins.py``
checks that every public method has its twin.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["twin"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def twin(method: Callable[Concatenate[S, P], R], *, listed: str | None = None
         ) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The async twin of ``method``: it calls the instance's ``method`` (looked up by name,
    so an override is honoured) in a worker thread.

    ``listed`` names a parameter that may be any iterable: the twin reads it into a list
    first, on the caller's thread (a generator tied to the event loop's state is consumed
    where it was made).
    """
    name = method.__name__
    signature = inspect.signature(method) if listed else None

    @functools.wraps(method)
    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        call: Callable[..., R] = getattr(self, name)
        if signature is None or listed is None:
            return await asyncio.to_thread(call, *args, **kwargs)
        read_args, read_kwargs = _listed_first(signature, listed, self, args, kwargs)
        return await asyncio.to_thread(call, *read_args, **read_kwargs)

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
