"""The high watermark, and making appended batches visible to consumers.

A consumer may read below the high watermark only. Kafka's high watermark is what every in-sync
replica has, i.e. what a produce with acks=all may be acknowledged for; a single kcoord node has one
replica, and acknowledges (with log.flush.interval.messages=1, the log's `flush_on_append`) only once
the batch is fsynced. So there the high watermark is the log's recovery point: a consumer never sees
a batch that a crash could still take back, nor one its producer has not been told about. With a
larger interval the OS flushes when it likes and acks come before any fsync, so there the high
watermark is the log end offset.

Long-polling fetches are woken when the high watermark moves: on the fsync, not on the write.

In cluster mode (`Visibility.replication` set) the high watermark is the ISR's (kcoord.cluster.
replica_manager), still bounded by the leader's fsynced end, and it wakes the long polls itself.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcoord.cluster.replica_manager import ReplicaManager

log = logging.getLogger("kcoord.produce")


def high_watermark(plog: Any) -> int:
    if plog.config.flush_on_append:
        return min(plog.recovery_point, plog.log_end_offset)
    return plog.log_end_offset


class Visibility:
    """Runs the fsync a produce waits for (or not, for acks=0) and then wakes the fetch waiters."""

    def __init__(self, waiters: Any, metrics: Any) -> None:
        self._waiters = waiters
        self._metrics = metrics
        self._background: set[asyncio.Task] = set()
        # Cluster mode: the replicas' high watermarks (over the ISR) and the leader checks; the cluster
        # node sets it. None on a single node, where nothing below changes.
        self.replication: ReplicaManager | None = None

    async def publish(self, logs: Sequence[Any]) -> list[BaseException | None]:
        """Make what was appended to `logs` so far readable; per log, None or the fsync's error."""
        durable = [lg for lg in logs if lg.config.flush_on_append]
        # sync() fixes what it covers when called, so calling them all before awaiting is exact.
        syncs = {id(lg): lg.sync() for lg in durable}
        for lg in logs:
            if id(lg) not in syncs:
                self._wake(lg)
        if not syncs:
            return [None] * len(logs)
        started = time.perf_counter()
        outcomes = dict(zip(syncs, await asyncio.gather(*syncs.values(), return_exceptions=True), strict=True))
        self._metrics.storage_latency("fsync", time.perf_counter() - started)
        results: list[BaseException | None] = []
        for lg in logs:
            outcome = outcomes.get(id(lg))
            if isinstance(outcome, BaseException):
                log.error("fsync failed for %s: %s", lg, outcome)
                results.append(outcome)
                continue
            self._wake(lg)
            results.append(None)
        return results

    def publish_soon(self, logs: Sequence[Any]) -> None:
        """publish() without waiting (acks=0: nobody awaits the fsync, but consumers need it)."""
        if not logs:
            return
        task = asyncio.get_running_loop().create_task(self.publish(logs), name="kcoord publish")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        """Let fsyncs started for acks=0 produces finish (shutdown, before storage closes)."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    def _wake(self, plog: Any) -> None:
        self._waiters.notify((plog.topic, plog.partition))
