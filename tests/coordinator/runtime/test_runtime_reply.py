"""GroupRuntime.call's Reply: done at once when the coordinator calls back synchronously, awaitable
otherwise; the first answer counts."""
from __future__ import annotations

import asyncio

import pytest

from kcoord.coordinator.runtime import Reply


async def test_an_answer_given_before_returning_is_there_without_awaiting():
    reply = Reply()
    reply("first")
    reply("second")  # a late second call changes nothing
    assert reply.done() and reply.result() == "first"
    assert await reply == "first"


async def test_an_answer_given_later_wakes_the_awaiter():
    reply = Reply()
    assert not reply.done()
    with pytest.raises(asyncio.InvalidStateError):
        reply.result()
    waiter = asyncio.ensure_future(reply)
    await asyncio.sleep(0)
    assert not waiter.done()
    asyncio.get_running_loop().call_soon(reply, 7)
    assert await asyncio.wait_for(waiter, 5) == 7
    reply(8)
    assert reply.result() == 7
