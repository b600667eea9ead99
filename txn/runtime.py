"""The transaction coordinator's runtime: binds TransactionCoordinator to asyncio and storage.

* appends to `__transaction_state-N` (one v2 batch per record, uncompressed, acknowledged once fsynced,
  as Kafka's TransactionLog enforces compression none and acks=-1; CompleteCommit/CompleteAbort, which
  nothing is acknowledged on, is appended without waiting for its fsync: the partition's next fsync
  covers it, see kcoord.txn.coordinator);
* keeps each id's marker work (a task) so that the id's next request waits for it (`wait_completed`,
  at most MARKER_WAIT_S) instead of answering CONCURRENT_TRANSACTIONS;
* loads every partition by replaying its log once the server listens (its ids answer
  COORDINATOR_LOAD_IN_PROGRESS meanwhile), then completes transactions a crash left prepared;
* aborts transactions open past their timeout every
  transaction.abort.timed.out.transaction.cleanup.interval.ms.

Cluster mode (`follow_leadership`, issue #27; Kafka's TransactionCoordinator.onElection /
onResignation): no partition is loaded at start; `on_election(partition, leader_epoch)` (from
kcoord.broker.coordinator_roles) loads one with the leader epoch as its coordinator epoch, serving
COORDINATOR_LOAD_IN_PROGRESS meanwhile, then completes its prepared transactions (markers sent again);
`on_resignation` unloads it (its ids answer NOT_COORDINATOR) and stops its marker work. An append there
is answered only once the ISR holds it (`replication().wait_acks_all`, TransactionStateManager's
appendTransactionToLog with acks=-1), its failure mapped as Kafka maps it; an append whose partition
changed coordinator epoch meanwhile answers NOT_COORDINATOR, so the metadata does not change.

The clock, the periodic work and the tests' hold on loads are the group coordinator's too
(kcoord.coordinator.common). Tests (through the admin endpoint) may hold a partition's
load (`hold_load` / `release_load`) and load every partition again (`reload`).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from kcoord.coordinator.common.runtime import (
    APPEND_ERRORS,
    LeaderReplication,
    LoadGate,
    WallClock,
    append_replicated,
    every,
)
from kcoord.protocol.errors import DecodeError, ErrorCode
from kcoord.protocol.record_kv import batch_key_values
from kcoord.protocol.records import build_batch
from kcoord.storage import StorageError
from kcoord.txn.coordinator import TransactionCoordinator
from kcoord.txn.state_manager import TRANSACTION_STATE_TOPIC, TransactionStateManager, TxnConfig

log = logging.getLogger("kcoord.txn")
# How long a request of a transactional id waits for the markers of its previous transaction before the
# coordinator answers CONCURRENT_TRANSACTIONS (they take a few fsyncs; longer only if a partition is
# unavailable, when the client's retries are the right wait).
MARKER_WAIT_S = 1.0

class TransactionRuntime:
    """`broker.transactions`: the coordinator, its loading and its background work."""

    def __init__(self, config: TxnConfig, log_for: Callable[[int], Any], write_markers,
                 allocate_producer_id: Callable[[], int | ErrorCode],
                 existing_log: Callable[[int], Any] | None = None, *, follow_leadership: bool = False,
                 replication: Callable[[], LeaderReplication | None] = lambda: None,
                 transaction_version: Callable[[], int] = lambda: 0) -> None:
        self.config = config
        self.follow_leadership = follow_leadership  # cluster mode: partitions load on election only
        self._replication = replication  # the node's ReplicaManager once the cluster node runs
        self._log_for = log_for  # creates `__transaction_state` on first use, as Kafka does
        self._existing_log = existing_log or log_for  # None while the topic does not exist: nothing to load
        self.state = TransactionStateManager(config)
        self.markers = write_markers  # also WriteTxnMarkers' (broker/apis/write_txn_markers.py)
        self._tasks: set[asyncio.Task] = set()
        self._completions: dict[str, asyncio.Task] = {}  # transactional id -> its markers' task
        self.coordinator = TransactionCoordinator(
            self.state, append=self._append, write_markers=write_markers,
            allocate_producer_id=allocate_producer_id, clock=WallClock(), spawn=self._spawn, sleep=asyncio.sleep,
            transaction_version=transaction_version, append_unsynced=self._append_unsynced,
            wait_completed=self.wait_completed)
        self.loaded = asyncio.Event()
        self.load_gate = LoadGate(lambda: asyncio.get_running_loop().create_future())  # tests' holds
        self._load_task: asyncio.Task | None = None
        self._loads: dict[int, asyncio.Task] = {}  # cluster mode: partition -> its load
        self._active = False

    async def start(self) -> None:
        if self.follow_leadership:  # nothing is ours until elected: NOT_COORDINATOR
            self._active = True
            self.loaded.set()
            self._start_background()
            return
        for partition in range(self.config.num_partitions):
            self.state.begin_load(partition)
        self._active = True
        self._load_task = self._spawn(self._load_all())
        self._start_background()

    def _start_background(self) -> None:
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

    async def wait_completed(self, transactional_id: str, timeout_s: float = MARKER_WAIT_S) -> None:
        """Wait (at most timeout_s) until the id's markers are written and its transaction complete.

        EndTxn answers once PrepareCommit/PrepareAbort is durable, as Kafka's; the producer's next request
        (AddPartitionsToTxn, AddOffsetsToTxn, InitProducerId, an EndTxn retry) waits here for the markers,
        so it does not meet CONCURRENT_TRANSACTIONS and its client's retry backoff (100 ms in librdkafka),
        while the client's own work between the two overlaps the markers. The answer is the coordinator's
        either way; only when it comes changes."""
        task = self._completions.get(transactional_id)
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=timeout_s)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        for key in [k for k, t in self._completions.items() if t is task]:
            del self._completions[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task failed", exc_info=task.exception())

    async def _append(self, partition: int, key: bytes, value: bytes | None, *, synced: bool = True) -> ErrorCode:
        """Append one record; `synced=False` (single node) returns once it is written, without waiting for the
        fsync: the partition's next fsync (a later append's, or shutdown's) covers it. A cluster always waits
        for the ISR."""
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.follow_leadership:
            return await self._append_replicated(partition, key, value)
        batch = bytearray(build_batch([(key, value)]))
        try:
            if synced:
                await self._log_for(partition).append_durable(batch)
            else:
                self._log_for(partition).append(batch)
        except StorageError as exc:
            log.error("append to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, exc)
            return APPEND_ERRORS.get(exc.error_code, exc.error_code)
        return ErrorCode.NONE

    async def _append_unsynced(self, partition: int, key: bytes, value: bytes | None) -> ErrorCode:
        return await self._append(partition, key, value, synced=False)

    async def _append_replicated(self, partition: int, key: bytes, value: bytes | None) -> ErrorCode:
        """Cluster mode: append as the partition's leader, fsync, then wait until the high watermark passes
        the record; answered NOT_COORDINATOR if the partition changed hands (coordinator epoch) meanwhile."""
        coordinator_epoch = self.state.coordinator_epoch(partition)
        replication = self._replication()
        plog = self._existing_log(partition)
        if coordinator_epoch is None or replication is None or plog is None:
            return ErrorCode.NOT_COORDINATOR
        error = await append_replicated(replication, plog, TRANSACTION_STATE_TOPIC, partition,
                                        bytearray(build_batch([(key, value)])), log)
        if error != ErrorCode.NONE:
            return error
        if self.state.coordinator_epoch(partition) != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # ------------------------------------------------------------------ cluster mode: elections
    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This node now leads `__transaction_state-<partition>` at `leader_epoch`: load it (its ids answer
        COORDINATOR_LOAD_IN_PROGRESS until then), with the leader epoch as its coordinator epoch."""
        if not self._active or not self.follow_leadership:
            return
        self._stop_partition(partition)
        self.state.begin_load(partition)
        log.info("elected for %s-%d at epoch %d: loading", TRANSACTION_STATE_TOPIC, partition, leader_epoch)
        self._loads[partition] = self._spawn(self._load_elected(partition, leader_epoch))

    def on_resignation(self, partition: int, leader_epoch: int | None) -> None:
        """This node stopped leading the partition: unload it; its ids answer NOT_COORDINATOR, its marker
        work stops (the next coordinator sends them again after its load)."""
        if not self.follow_leadership:
            return
        self._stop_partition(partition)
        self.state.unload(partition)
        log.info("resigned %s-%d (epoch %s): unloaded", TRANSACTION_STATE_TOPIC, partition, leader_epoch)

    def _stop_partition(self, partition: int) -> None:
        load = self._loads.pop(partition, None)
        if load is not None:
            load.cancel()
        for transactional_id, task in list(self._completions.items()):
            if self.state.partition_for(transactional_id) == partition:
                task.cancel()

    async def _load_elected(self, partition: int, coordinator_epoch: int) -> None:
        await self.load_gate.wait(partition)
        started = time.monotonic()
        try:
            txns = self.state.load(partition, self._read(partition))
        except (StorageError, DecodeError):
            log.exception("cannot load %s-%d; not serving its transactional ids", TRANSACTION_STATE_TOPIC, partition)
            self.state.unload(partition)
            return
        finally:
            if self._loads.get(partition) is asyncio.current_task():
                del self._loads[partition]
        if partition not in self.state.loading:
            return  # resigned meanwhile
        self.state.complete_load(partition, txns, coordinator_epoch)
        log.info("loaded %d transactional ids of %s-%d (coordinator epoch %d) in %.1f ms", len(txns),
                 TRANSACTION_STATE_TOPIC, partition, coordinator_epoch, (time.monotonic() - started) * 1000)
        self.coordinator.on_loaded(partition)

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
        if self.follow_leadership:  # the partitions led here, each as if elected again at its epoch
            led = dict(self.state.coordinator_epochs)
            for partition, coordinator_epoch in sorted(led.items()):
                self.on_election(partition, coordinator_epoch)
            return len(led)
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
