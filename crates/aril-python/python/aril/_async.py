"""``aril.AsyncMemory``: ``aril.Memory``'s methods as coroutines. Each call runs on a worker
thread (``asyncio.to_thread``) and the engine releases the GIL while it works, so concurrent
searches really run in parallel and the event loop never waits on the engine."""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Mapping, Optional, TypeVar

from ._memory import Memory

if TYPE_CHECKING:  # type checkers see each coroutine with its method's parameters
    from typing import Concatenate, ParamSpec

    P = ParamSpec("P")

R = TypeVar("R")


def _threaded(
    method: "Callable[Concatenate[Memory, P], R]",
) -> "Callable[Concatenate[AsyncMemory, P], Coroutine[Any, Any, R]]":
    """The coroutine form of a ``Memory`` method, with its signature and docs."""

    @functools.wraps(method)
    async def run(self: "AsyncMemory", *args: Any, **kwargs: Any) -> R:
        return await asyncio.to_thread(method, self._memory, *args, **kwargs)

    return run


class AsyncMemory:
    """``aril.Memory`` with every method a coroutine: ``await memory.search(...)``."""

    def __init__(self, path: Any, config: Optional[Mapping[str, Any]] = None, *, store: Optional[str] = None) -> None:
        self._memory = Memory(path, config, store=store)

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    close = _threaded(Memory.close)
    add = _threaded(Memory.add)
    search = _threaded(Memory.search)
    get = _threaded(Memory.get)
    get_all = _threaded(Memory.get_all)
    update = _threaded(Memory.update)
    forget = _threaded(Memory.forget)
    restore = _threaded(Memory.restore)
    delete = _threaded(Memory.delete)
    delete_all = _threaded(Memory.delete_all)
    history = _threaded(Memory.history)
    segments = _threaded(Memory.segments)
    profile = _threaded(Memory.profile)
    ask = _threaded(Memory.ask)
    consolidate = _threaded(Memory.consolidate)
    stats = _threaded(Memory.stats)
    users = _threaded(Memory.users)


__all__ = ["AsyncMemory"]
