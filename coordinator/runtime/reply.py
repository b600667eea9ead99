"""Reply: the callback handed to the coordinator, and an awaitable of its answer for the handlers."""
from __future__ import annotations

import asyncio


class Reply:
    """The callback handed to the coordinator, and an awaitable of what it is called with (the first
    call counts). No future is made unless someone awaits before the answer is there."""

    __slots__ = ("_done", "_result", "_future")

    def __init__(self) -> None:
        self._done = False
        self._result = None
        self._future: asyncio.Future | None = None

    def __call__(self, result) -> None:
        if self._done:
            return
        self._done = True
        self._result = result
        if self._future is not None and not self._future.done():
            self._future.set_result(result)

    def done(self) -> bool:
        return self._done

    def result(self):
        if not self._done:
            raise asyncio.InvalidStateError("the coordinator has not answered yet")
        return self._result

    def __await__(self):
        if not self._done:
            if self._future is None:
                self._future = asyncio.get_running_loop().create_future()
            return (yield from self._future.__await__())
        return self._result
