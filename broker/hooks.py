"""Test hooks: intercept, delay, replace or fail any request without monkeypatching.

    broker.hooks.before(3, fn)   # fn(ctx, request) -> None to go on, or a response object to answer with
    broker.hooks.after(0, fn)    # fn(ctx, request, response) -> None to keep it, or a replacement
Either may be a coroutine function (await asyncio.sleep(...) delays the request) and may raise, which
fails the request exactly like a handler crash: the connection is closed with a log line (raising
kcoord.broker.connection.CloseConnection closes it with just its message, as a deliberate fault rather than
a crash; it is re-exported here for the hooks that raise it).
Each registration returns a callable that removes it.
"""
from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kcoord.broker.connection import CloseConnection as CloseConnection

ANY_API = -1  # register for every api key


class Hooks:
    def __init__(self) -> None:
        self._before: dict[int, list[Callable]] = defaultdict(list)
        self._after: dict[int, list[Callable]] = defaultdict(list)
        self.installed = 0  # registrations alive: asked on every request, almost always 0

    def before(self, api_key: int, fn: Callable) -> Callable[[], None]:
        return self._add(self._before, api_key, fn)

    def after(self, api_key: int, fn: Callable) -> Callable[[], None]:
        return self._add(self._after, api_key, fn)

    def clear(self) -> None:
        self._before.clear()
        self._after.clear()
        self.installed = 0

    def _add(self, table: dict[int, list[Callable]], api_key: int, fn: Callable) -> Callable[[], None]:
        table[api_key].append(fn)
        self.installed += 1

        def remove() -> None:
            if fn in table[api_key]:
                table[api_key].remove(fn)
                self.installed -= 1

        return remove

    def active(self, api_key: int) -> bool:
        if not self.installed:
            return False
        return bool(self._before.get(api_key) or self._after.get(api_key)
                    or self._before.get(ANY_API) or self._after.get(ANY_API))

    async def run_before(self, ctx: Any, request: Any) -> Any:
        for fn in (*self._before.get(ANY_API, ()), *self._before.get(ctx.api_key, ())):
            result = await _call(fn, ctx, request)
            if result is not None:
                return result
        return None

    async def run_after(self, ctx: Any, request: Any, response: Any) -> Any:
        for fn in (*self._after.get(ANY_API, ()), *self._after.get(ctx.api_key, ())):
            result = await _call(fn, ctx, request, response)
            if result is not None:
                response = result
        return response


async def _call(fn: Callable, *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result
