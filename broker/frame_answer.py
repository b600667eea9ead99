"""The callback a frame handler hands the coordinator, and the answer the server waits on.

The coordinator calls it with its result: at once when it answers before returning (a refused request, a
heartbeat that changes nothing), else once the request's records are durable. `answer()` then gives the
server the (error code, response frame) pair, or a future of it that the connection waits for.
Subclasses say how a result becomes that pair (`_frame`).
"""
from __future__ import annotations

import asyncio

_NOT_YET = object()


class FrameAnswer:
    __slots__ = ("_result", "_future")

    def __init__(self) -> None:
        self._result = _NOT_YET
        self._future: asyncio.Future | None = None

    def _frame(self, result) -> tuple[int, bytes]:
        raise NotImplementedError

    def __call__(self, result) -> None:
        if self._result is not _NOT_YET:  # the first answer counts
            return
        self._result = result
        future = self._future
        if future is not None and not future.done():
            try:
                future.set_result(self._frame(result))
            except Exception as exc:  # a bug here must not reach the coordinator's writer: the connection fails
                future.set_exception(exc)

    def answer(self) -> tuple[int, bytes] | asyncio.Future:
        if self._result is not _NOT_YET:
            return self._frame(self._result)
        self._future = asyncio.get_running_loop().create_future()
        return self._future
