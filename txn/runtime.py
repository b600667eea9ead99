"""The transaction coordinator's runtime: binds TransactionCoordinator to asyncio and storage.

* appends to `__transaction_state-N` (one v2 batch per record, uncompressed, acknowledged once fsynced,
  as Kafka's TransactionLog enforces compression none and acks=-1);
* loads every partition by replaying its log once the server listens (its ids answer
  COORDINATOR_LOAD_IN_PROGRESS meanwhile), then completes transactions a crash left prepared;
* aborts transactions open past their timeout every
  transaction.abort.timed.out.transaction.cleanup.interval.ms.

The clock, the append error map, the periodic work and the tests' hold on loads are the group
coordinator's too (kcoord.coordinator.common). Tests (through the admin endpoint) may hold a partition's
load (`hold_load` / `release_load`) and load every partition again (`reload`).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from kcoord.coordinator.common.runtime import APPEND_ERRORS, LoadGate, WallClock, every
from kcoord.protocol.errors import DecodeError, ErrorCode
from kcoord.protocol.record_kv import batch_key_values
from kcoord.protocol.records import build_batch
from kcoord.storage import StorageError
from kcoord.txn.coordinator import TransactionCoordinator
from kcoord.txn.state_manager import TRANSACTION_STATE_TOPIC, TransactionStateManager, TxnConfig

log = logging.getLogger("kcoord.txn")


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
        self.load_gate = LoadGate(lambda: asyncio.get_running_loop().create_future())  # tests' holds
        self._load_task: asyncio.Task | None = None
        self._active = False

    async def start(self) -> None:
        for partition in range(self.config.num_partitions):
            self.state.begin_load(partition)
        self._active = True
        self._load_task = self._spawn(self._load_all())
        running = lambda: self._active  # noqa: E731
        self._spawn(every(self.config.abort_timed_out_interval_ms, self.coordinator.abort_timed_out_transactions,
                          sleep=asyncio.sleep, running=running, what="aborting timed-out transactions", log=log))
        self._spawn(every(self.config.remove_expired_interval_ms, self.coordinator.remove_expired_transactional_ids,
                          sleep=asyncio.sleep, running=running, what="removing expired transactional ids", log=log))

    def _spawn(self, coro, key: str | None = None) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        if key is not None:
            self._completions[key] = task
        return task

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
            return APPEND_ERRORS.get(exc.error_code, exc.error_code)
        return ErrorCode.NONE

    async def _load_all(self) -> None:
        started = time.monotonic()
        await asyncio.sleep(0)  # the server opens its port first
        count = 0
        for partition in range(self.config.num_partitions):
            await self.load_gate.wait(partition)
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

    # ------------------------------------------------------------------ tests' controls (the admin endpoint)
    def hold_load(self, partitions) -> list[int]:
        """From now on a load of these partitions waits until they are released. Returns the held ones."""
        return self.load_gate.hold(partitions)

    def release_load(self, partitions=None) -> list[int]:
        """Let held loads go on (`partitions` None: all). Returns the partitions still held."""
        return self.load_gate.release(partitions)

    def reload(self) -> int:
        """Load every partition again by replaying its log, in order as at start (held ones wait): as if this
        node gave up every partition and was elected for them again. Their ids answer
        COORDINATOR_LOAD_IN_PROGRESS meanwhile. Returns the partitions."""
        if not self._active:
            raise RuntimeError("the transaction coordinator is not running")
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
        for partition in range(self.config.num_partitions):
            self.state.begin_load(partition)  # (its transactions dropped until replayed again)
        self.loaded.clear()
        self._load_task = self._spawn(self._load_all())
        return self.config.num_partitions

    def _read(self, partition: int) -> list:
        plog = self._existing_log(partition)
        records: list = []
        if plog is None:
            return records
        for header, batch in plog.batches(max_offset=plog.log_end_offset):
            if not header.is_control:
                records.extend(batch_key_values(batch, header))
        return records

    async def close(self) -> None:
        self._active = False
        self.coordinator.active = False
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
