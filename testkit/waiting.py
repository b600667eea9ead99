"""Wait until a condition holds, bounded: the one wait helper of the test kit and of kcoord's own suite.

    wait_until(lambda: consumer.assignment(), 30, "the consumer's first assignment")
    await wait_until_async(lambda: not broker.server.connections, 5, "the disconnect")  # in a test's loop

`condition` is called until it returns something truthy, which is returned; after `timeout` seconds an
AssertionError names `what`. The async form polls with asyncio.sleep, for tests whose condition is state
of a broker running on their own event loop.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


def _polls(timeout: float, what: str) -> Iterator[None]:
    """One step per poll until `timeout` has passed, then the AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        yield
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def wait_until(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    for _ in _polls(timeout, what):
        if value := condition():
            return value
        time.sleep(interval)
    raise AssertionError("unreachable")


async def wait_until_async(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.01) -> T:
    for _ in _polls(timeout, what):
        if value := condition():
            return value
        await asyncio.sleep(interval)
    raise AssertionError("unreachable")
