"""`OffsetsTopicWriter`: the coordinator's one writer, `append(partition, records, callback(error))`.

Each write becomes one v2 batch for `__consumer_offsets-N`. The writes to a partition within one loop
tick are appended together (one write to the segment) after the tick, and one fsync waiter covers them
(storage's group commit shares the fsync with everything else in flight); none when the log leaves
flushing to the OS (log.flush.interval.messages > 1), as the transaction and share coordinators' writes. Every write's callback runs
once its records are durable (NONE), or with the error that kept them from it: a failed write or fsync
fails every write it covered, and none of them is acknowledged.

Cluster mode (issue #27; `replicas` given): acknowledged means replicated, as Kafka's coordinator runtime
appends with acks=all and completes a write's deferred event only once the high watermark passes it. A
partition's writes are appended only while this node leads it with enough in-sync replicas (else they
fail with the ReplicaManager's error: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS); once durable locally
they wait until the high watermark passes their batch, and fail if leadership is lost or the ISR does not
catch up in time. The coordinator maps those errors per API (kcoord.coordinator.core.map_write_error).
"""
from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

from kcoord.coordinator.common.runtime import LeaderReplication
from kcoord.coordinator.core import OFFSETS_TOPIC
from kcoord.coordinator.record_batch import build_coordinator_batch
from kcoord.protocol.errors import ErrorCode
from kcoord.storage import StorageError

log = logging.getLogger("kcoord.coordinator.runtime")

Callback = Callable[[ErrorCode], None]


def _append_error(exc: BaseException, what: str) -> ErrorCode:
    """The Kafka error a failed write reports (the coordinator maps it for the client)."""
    if isinstance(exc, StorageError):
        log.error("%s failed: %s", what, exc)
        return exc.error_code
    log.error("%s failed unexpectedly", what, exc_info=exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _chunks(batches: list[bytes], limit: int) -> list[list[bytes]]:
    """`batches` in order, cut so that no append exceeds `limit` bytes (segment.bytes) unless one batch
    alone does: writes that fit one by one must not fail for having been queued together."""
    chunks: list[list[bytes]] = [[]]
    size = 0
    for batch in batches:
        if chunks[-1] and size + len(batch) > limit:
            chunks.append([])
            size = 0
        chunks[-1].append(batch)
        size += len(batch)
    return chunks


class OffsetsTopicWriter:
    def __init__(self, log_for: Callable[[int], Any], loop: asyncio.AbstractEventLoop,
                 compression: int = 0, on_durable: Callable[[int], None] | None = None,
                 replicas: Callable[[], LeaderReplication | None] | None = None,
                 replication_timeout_ms: int = 5000) -> None:
        self._log_for = log_for
        self._loop = loop
        self._compression = compression
        self._on_durable = on_durable
        # cluster mode: the node's replicas (None until the node joined: nothing is led, nothing written)
        self._replicas = replicas
        self._replication_timeout_ms = replication_timeout_ms
        # partition -> (batches, callbacks) of this tick's writes, in the order they were made
        self._queued: dict[int, tuple[list[bytes], list[Callback]]] = {}
        self._flush_handle: asyncio.Handle | None = None
        self._in_flight: set[asyncio.Future] = set()  # fsync waits whose callbacks have not run
        self._failures = 0  # tests: how many of the next appends fail (fail_next; the admin endpoint)

    def append(self, partition: int, records, callback: Callback) -> None:
        try:
            if self._failures:
                self._failures -= 1
                raise StorageError("injected write fault (the admin endpoint's fail-offsets-writes)")
            to_batch = getattr(records, "to_batch", None)  # a commit's records build their batch themselves
            batch = (to_batch(self._compression) if to_batch is not None
                     else build_coordinator_batch(list(records), self._compression))
        except Exception as exc:  # the callback must run whatever happened, or a request hangs
            error = _append_error(exc, f"append to {OFFSETS_TOPIC}-{partition}")
            # Never call back re-entrantly into the coordinator that is in the middle of a handler.
            self._loop.call_soon(callback, error)
            return
        queued = self._queued.get(partition)
        if queued is None:
            queued = self._queued[partition] = ([], [])
            if self._flush_handle is None:
                self._flush_handle = self._loop.call_soon(self.flush)
        queued[0].append(batch)
        queued[1].append(callback)

    def flush(self) -> None:
        """Append every queued write (from a loop callback: callbacks never re-enter a handler)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        queued, self._queued = self._queued, {}
        for partition, (batches, callbacks) in queued.items():
            if self._replicas is not None:
                replicas = self._replicas()
                error = (ErrorCode.NOT_LEADER_OR_FOLLOWER if replicas is None
                         else replicas.produce_error(OFFSETS_TOPIC, partition, -1))
                if error != ErrorCode.NONE:  # not (or no longer) the leader, or the ISR is too small
                    self._answer(callbacks, error)
                    continue
            try:
                partition_log = self._log_for(partition)
            except Exception as exc:
                self._answer(callbacks, _append_error(exc, f"append to {OFFSETS_TOPIC}-{partition}"))
                continue
            if len(batches) == 1:
                self._write(partition, partition_log, batches[0], callbacks)
                continue
            start = 0
            for chunk in _chunks(batches, partition_log.config.segment_bytes):
                self._write(partition, partition_log, b"".join(chunk), callbacks[start:start + len(chunk)])
                start += len(chunk)

    def _write(self, partition: int, partition_log, records: bytes, callbacks: list[Callback]) -> None:
        try:
            # trusted: the batches were built here (kcoord.coordinator.record_batch), not read from a socket
            appended = partition_log.append(records, trusted=True)
            if partition_log.config.flush_on_append:
                durable = partition_log.sync_future(appended)
            else:  # log.flush.interval.messages > 1: the OS flushes, as for every other log (and Kafka's)
                durable = self._loop.create_future()
                durable.set_result(None)
        except Exception as exc:  # the segment cut the write back: nothing of it is acknowledged
            self._answer(callbacks, _append_error(exc, f"append to {OFFSETS_TOPIC}-{partition}"))
            return
        replicas = self._replicas() if self._replicas is not None else None
        if replicas is not None:
            replicas.on_leader_append(OFFSETS_TOPIC, partition)  # followers' fetches wake
        self._in_flight.add(durable)
        durable.add_done_callback(functools.partial(self._written, partition, callbacks,
                                                    appended.last_offset, replicas))

    def _written(self, partition: int, callbacks: list[Callback], last_offset: int,
                 replicas: LeaderReplication | None, durable: asyncio.Future) -> None:
        self._in_flight.discard(durable)
        if durable.cancelled():
            error = _append_error(asyncio.CancelledError(), f"fsync of {OFFSETS_TOPIC}-{partition}")
        else:
            exc = durable.exception()
            error = ErrorCode.NONE if exc is None else _append_error(exc, f"fsync of {OFFSETS_TOPIC}-{partition}")
        if error == ErrorCode.NONE and self._on_durable is not None:
            self._on_durable(partition)
        if error != ErrorCode.NONE or replicas is None:
            self._answer(callbacks, error)
            return
        waiting = self._loop.create_task(self._replicated(replicas, partition, last_offset, callbacks))
        self._in_flight.add(waiting)
        waiting.add_done_callback(self._in_flight.discard)

    async def _replicated(self, replicas: LeaderReplication, partition: int, last_offset: int,
                          callbacks: list[Callback]) -> None:
        """Cluster mode: answer once the high watermark passes `last_offset` (or with why it cannot)."""
        error = await replicas.wait_acks_all(OFFSETS_TOPIC, partition, last_offset, self._replication_timeout_ms)
        if error != ErrorCode.NONE:
            log.warning("write to %s-%d (up to offset %d) not replicated: %s", OFFSETS_TOPIC, partition,
                        last_offset, error.name)
        self._answer(callbacks, error)

    @staticmethod
    def _answer(callbacks: list[Callback], error: ErrorCode) -> None:
        """Answer every write (`error` NONE: durable); one failing callback does not stop the others."""
        for callback in callbacks:
            try:
                callback(error)
            except Exception:
                log.exception("offsets write callback failed")

    def fail_next(self, count: int = 1) -> int:
        """Tests: the next `count` appends fail (a KAFKA_STORAGE_ERROR, nothing written), on top of any
        still to fail. Returns how many will."""
        self._failures += count
        return self._failures

    async def drain(self) -> None:
        """Write what is queued and wait until every write's callback ran — part of a clean shutdown."""
        while self._queued or self._in_flight:
            self.flush()
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)
