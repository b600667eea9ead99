"""The transaction coordinator's runtime: binds TransactionCoordinator to asyncio and storage.

* appends to `__transaction_state-N` (one v2 batch per record, uncompressed, acknowledged once fsynced,
  as Kafka's TransactionLog enforces compression none and acks=-1);
* loads every partition by replaying its log once the server listens (its ids answer
  COORDINATOR_LOAD_IN_PROGRESS meanwhile), then completes transactions a crash left prepared;
* aborts transactions open past their timeout every
  transaction.abort.timed.out.transaction.cleanup.interval.ms.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from kcoord.protocol.errors import DecodeError, ErrorCode
from kcoord.protocol.record_kv import batch_key_values
from kcoord.protocol.records import build_batch
from kcoord.storage import StorageError
from kcoord.txn.coordinator import TransactionCoordinator
from kcoord.txn.state_manager import TRANSACTION_STATE_TOPIC, TransactionStateManager, TxnConfig

log = logging.getLogger("kcoord.txn")
# Tests: while the file this names lists a partition number, that partition's load waits (so a test sees
# its ids answer COORDINATOR_LOAD_IN_PROGRESS), as kcoord.coordinator.runtime's KCOORD_TEST_HOLD_LOAD_FILE.
HOLD_LOAD_FILE_ENV = "KCOORD_TEST_HOLD_TXN_LOAD_FILE"

# Kafka's TransactionStateManager.appendTransactionToLog maps append errors to what clients retry on.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class WallClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class TransactionRuntime:
    """`broker.transactions`: the coordinator, its loading and its background work."""

    def __init__(self, config: TxnConfig, log_for: Callable[[int], Any], write_markers,
                 allocate_producer_id: Callable[[], int],
                 existing_log: Callable[[int], Any] | None = None) -> None:
        self.config = config
        self._log_for = log_for  # creates `__transaction_state` on first use, as Kafka does
        self._existing_log = existing_log or log_for  # None while the topic does not exist: nothing to load
        self.state = TransactionStateManager(config)
        self.markers = write_markers  # also WriteTxnMarkers' (broker/apis/write_txn_markers.py)
        self._tasks: set[asyncio.Task] = set()
        self._completions: dict[str, asyncio.Task] = {}  # transactional id -> its markers' task
        self.coordinator = TransactionCoordinator(
            self.state, append=self._append, write_markers=write_markers,
            allocate_producer_id=allocate_producer_id, clock=WallClock(), spawn=self._spawn, sleep=asyncio.sleep)
        self.loaded = asyncio.Event()
        self._active = False

    async def start(self) -> None:
        for partition in range(self.config.num_partitions):
            self.state.begin_load(partition)
        self._active = True
        self._spawn(self._load_all())
        self._spawn(self._abort_timed_out_loop())
        self._spawn(self._remove_expired_loop())

    def _spawn(self, coro, key: str | None = None) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        if key is not None:
            self._completions[key] = task

    async def wait_completed(self, transactional_id: str, timeout_s: float) -> None:
        """Wait (at most timeout_s) until the id's markers are written and its transaction complete.

        EndTxn answers once PrepareCommit/PrepareAbort is durable, as Kafka's; kcoord's handler then waits
        a little for the markers too, so the producer's next AddPartitionsToTxn does not meet
        CONCURRENT_TRANSACTIONS and its client's retry backoff (100 ms in librdkafka). The answer is the
        same either way; only when it comes changes."""
        task = self._completions.get(transactional_id)
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=timeout_s)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        for key in [k for k, t in self._completions.items() if t is task]:
            del self._completions[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task failed", exc_info=task.exception())

    async def _append(self, partition: int, key: bytes, value: bytes | None) -> ErrorCode:
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            await self._log_for(partition).append_durable(bytearray(build_batch([(key, value)])))
        except StorageError as exc:
            log.error("append to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, exc)
            return _APPEND_ERRORS.get(exc.error_code, exc.error_code)
        return ErrorCode.NONE

    async def _load_all(self) -> None:
        started = time.monotonic()
        await asyncio.sleep(0)  # the server opens its port first
        count = 0
        for partition in range(self.config.num_partitions):
            await self._maybe_hold(partition)
            try:
                txns = self.state.load(partition, self._read(partition))
            except (StorageError, DecodeError):
                log.exception("cannot load %s-%d; not serving its transactional ids", TRANSACTION_STATE_TOPIC,
                              partition)
                self.state.unload(partition)
                continue
            self.state.complete_load(partition, txns)
            count += len(txns)
            self.coordinator.on_loaded(partition)
            await asyncio.sleep(0)
        self.loaded.set()
        log.info("loaded %d transactional ids from %s in %.1f ms", count, TRANSACTION_STATE_TOPIC,
                 (time.monotonic() - started) * 1000)

    async def _maybe_hold(self, partition: int) -> None:
        path = os.environ.get(HOLD_LOAD_FILE_ENV)
        while path and self._active:
            try:
                with open(path, encoding="utf-8") as f:
                    if partition not in {int(word) for word in f.read().split()}:
                        return
            except (FileNotFoundError, ValueError):
                return
            await asyncio.sleep(0.01)

    def _read(self, partition: int) -> list:
        plog = self._existing_log(partition)
        records: list = []
        if plog is None:
            return records
        for header, batch in plog.batches(max_offset=plog.log_end_offset):
            if not header.is_control:
                records.extend(batch_key_values(batch, header))
        return records

    async def _abort_timed_out_loop(self) -> None:
        while self._active:
            await asyncio.sleep(self.config.abort_timed_out_interval_ms / 1000)
            try:
                await self.coordinator.abort_timed_out_transactions()
            except Exception:
                log.exception("aborting timed-out transactions failed")

    async def _remove_expired_loop(self) -> None:
        while self._active:
            await asyncio.sleep(self.config.remove_expired_interval_ms / 1000)
            try:
                await self.coordinator.remove_expired_transactional_ids()
            except Exception:
                log.exception("removing expired transactional ids failed")

    async def close(self) -> None:
        self._active = False
        self.coordinator.active = False
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
