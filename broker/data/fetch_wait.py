"""Long-poll support for Fetch (Kafka's DelayedFetch, reduced to what one node needs).

A Fetch that has fewer than min_bytes waits until the high watermark of one of its partitions moves,
the max_wait_ms deadline passes, or the broker shuts down; then it reads again. kcoord.broker.data.visibility
calls `notify` once new batches are readable (after their fsync when appends are fsynced).
Waiters wake in the order they started waiting (as Kafka's purgatory tries delayed operations in the
order they were watched): share fetches of several consumers take turns at new records this way.
"""
from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class FetchWaiters:
    def __init__(self) -> None:
        # insertion-ordered: futures are woken first come, first served
        self._waiting: dict[TopicPartition, dict[asyncio.Future, None]] = defaultdict(dict)
        self._closed = False

    def notify(self, tp: TopicPartition) -> None:
        for fut in self._waiting.pop(tp, ()):
            if not fut.done():
                fut.set_result(tp)

    def notify_topic(self, topic: str, partitions: int) -> None:
        for p in range(partitions):
            self.notify((topic, p))

    def wake_all(self) -> None:
        self._closed = True
        for tp in list(self._waiting):
            self.notify(tp)

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> bool:
        """True when one of `partitions` got readable data before `timeout_s`; False on timeout/shutdown."""
        if self._closed or timeout_s <= 0:
            return False
        fut = asyncio.get_running_loop().create_future()
        tps = list(partitions)
        for tp in tps:
            self._waiting[tp][fut] = None
        try:
            await asyncio.wait_for(fut, timeout_s)
            return not self._closed
        except TimeoutError:
            return False
        finally:
            for tp in tps:
                waiters = self._waiting.get(tp)
                if waiters is not None:
                    waiters.pop(fut, None)
                    if not waiters:
                        del self._waiting[tp]
