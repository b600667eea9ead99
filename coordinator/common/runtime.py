"""The runtime parts both coordinators repeat: WallClock, the append error maps, `every`, LoadGate, and the
leader's replicated append (cluster mode)."""
from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from kcoord.protocol.errors import ErrorCode
from kcoord.storage import StorageError

E = ErrorCode

# How a failed append to a coordinator's topic reaches the client, as both Kafka coordinators map it
# (CoordinatorOperationExceptionHelper; TransactionStateManager.appendTransactionToLog): errors the client
# retries elsewhere or later. Each coordinator adds its own few (kcoord.coordinator.core, kcoord.txn.runtime).
APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}

# ... and of an acks=-1 append (cluster mode), whose ISR may shrink under it
REPLICATED_APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    **APPEND_ERRORS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE}
APPEND_TIMEOUT_MS = 30_000  # request.timeout.ms, which Kafka's coordinators give their acks=-1 appends


class LeaderReplication(Protocol):
    """A cluster node's replication as a coordinator's appends use it (kcoord.cluster.replica_manager.
    ReplicaManager): the leader and min-ISR check, waking followers, and waiting for the ISR."""

    def produce_error(self, topic: str, partition: int, acks: int) -> ErrorCode: ...

    def on_leader_append(self, topic: str, partition: int) -> None: ...

    async def wait_acks_all(self, topic: str, partition: int, last_offset: int, timeout_ms: int) -> ErrorCode: ...


async def append_replicated(replication: LeaderReplication, plog: Any, topic: str, partition: int,
                            records: bytearray, log: logging.Logger) -> ErrorCode:
    """Append `records` to `topic-partition` as its leader with acks=-1 (TransactionStateManager.
    appendTransactionToLog, the share coordinator's CoordinatorRuntime writes): the leader and min-ISR check,
    the append (the followers' fetches wake), its fsync when the log flushes on append, then the wait until
    the high watermark passes it. The error as a coordinator answers it (REPLICATED_APPEND_ERRORS)."""
    error = replication.produce_error(topic, partition, -1)
    if error != E.NONE:
        return REPLICATED_APPEND_ERRORS.get(error, error)
    try:
        info = plog.append(records)
        replication.on_leader_append(topic, partition)
        if plog.config.flush_on_append:
            await plog.sync(info)
    except StorageError as exc:
        log.error("append to %s-%d failed: %s", topic, partition, exc)
        return REPLICATED_APPEND_ERRORS.get(exc.error_code, exc.error_code)
    replication.on_leader_append(topic, partition)  # the fsync may move the high watermark
    error = await replication.wait_acks_all(topic, partition, info.last_offset, APPEND_TIMEOUT_MS)
    if error != E.NONE:
        log.info("append to %s-%d not replicated: %s", topic, partition, error.name)
    return REPLICATED_APPEND_ERRORS.get(error, error)


class WallClock:
    """`now_ms()`: wall-clock time; records carry wall-clock timestamps, like Kafka's."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)


async def every(interval_ms: int, work: Callable[[], Any], *, sleep: Callable[[float], Awaitable[Any]],
                running: Callable[[], bool], what: str, log: logging.Logger) -> None:
    """Background work: `work()` (awaited if it returns an awaitable) every `interval_ms` while `running()`.
    A failure is logged ("<what> failed") and the next round runs as planned."""
    while running():
        await sleep(interval_ms / 1000)
        try:
            result = work()
            if hasattr(result, "__await__"):  # (not inspect: importing it costs every process's collections)
                await result
        except Exception:
            log.exception("%s failed", what)


class LoadGate:
    """The tests' hold on loads (the admin endpoint's hold-load / release-load): while a partition is held,
    its load waits before reading the log, so a test sees it loading while the others serve. Nothing is
    held unless a test asks. `make_future`: the runtime's loop.create_future."""

    def __init__(self, make_future: Callable[[], Any]) -> None:
        self._make_future = make_future
        self.held: set[int] = set()
        self._waiting: dict[int, list] = {}

    def hold(self, partitions: Iterable[int]) -> list[int]:
        self.held.update(partitions)
        return sorted(self.held)

    def release(self, partitions: Iterable[int] | None = None) -> list[int]:
        """Release `partitions` (None: all); their waiting loads go on. Returns what stays held."""
        released = set(self.held) if partitions is None else self.held & set(partitions)
        self.held -= released
        for partition in sorted(released):
            for future in self._waiting.pop(partition, ()):
                if not future.done():
                    future.set_result(None)
        return sorted(self.held)

    async def wait(self, partition: int) -> None:
        """Return once `partition` is not held (at once if it is not)."""
        if partition in self.held:
            future = self._make_future()
            self._waiting.setdefault(partition, []).append(future)
            await future
