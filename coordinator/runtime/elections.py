"""The group runtime in cluster mode (issue #27): shards follow the leadership of `__consumer_offsets`.

Nothing loads at start (`kcoord.etcd.connect` set). The runtime is the `__consumer_offsets` listener of the
node's CoordinatorRoles (Kafka 4's GroupCoordinatorService.onElection / onResignation):
`on_election(partition, epoch)` loads that shard from the local replica, which the ReplicaManager has
made the leader's (CoordinatorRuntime.scheduleLoadOperation), its groups answering
COORDINATOR_LOAD_IN_PROGRESS meanwhile; `on_resignation` unloads it (scheduleUnloadOperation: timers
cancelled, parked requests and its groups answered NOT_COORDINATOR). A load that a resignation or a newer
election overtook is dropped; an election for an older epoch is ignored (GroupCoordinatorService keeps the
epochs). Writes are acknowledged once the partition's high watermark passes them (OffsetsTopicWriter's
replicas). Checkpoints are not used (a replica's log may have been truncated under its local checkpoint):
an elected shard loads from its whole log.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from kcoord.coordinator.core import OFFSETS_TOPIC
from kcoord.coordinator.shard import GroupCoordinatorShard

if TYPE_CHECKING:
    from kcoord.coordinator.common.runtime import LoadGate
    from kcoord.coordinator.service import GroupCoordinatorService

log = logging.getLogger("kcoord.coordinator.runtime")


class ElectedShards:
    """GroupRuntime's side of CoordinatorRoles (a kcoord.broker.coordinator_roles.CoordinatorElection)."""

    service: GroupCoordinatorService | None
    load_gate: LoadGate
    _active: bool
    _elections: set[asyncio.Task]

    async def _load_partition(self, partition: int, shard: GroupCoordinatorShard | None = None,
                              leader_epoch: int | None = None) -> tuple[int, bool]:
        raise NotImplementedError

    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This node leads `__consumer_offsets-<partition>` at `leader_epoch`: load its shard in the background."""
        if self.service is None or not self._active:
            return
        shard = self.service.on_election(partition, leader_epoch)
        if shard is None:
            return  # stale
        log.info("elected for %s-%d at epoch %d: loading", OFFSETS_TOPIC, partition, leader_epoch)
        task = asyncio.get_running_loop().create_task(self._load_elected(partition, leader_epoch, shard),
                                                      name=f"load {OFFSETS_TOPIC}-{partition}")
        self._elections.add(task)
        task.add_done_callback(self._elections.discard)

    def on_resignation(self, partition: int, leader_epoch: int | None) -> None:
        """This node stopped leading `__consumer_offsets-<partition>`: its shard unloads (a load under way
        is dropped when it finishes)."""
        if self.service is not None:
            self.service.on_resignation(partition, leader_epoch)

    async def _load_elected(self, partition: int, leader_epoch: int, shard: GroupCoordinatorShard) -> None:
        started = time.monotonic()
        await self.load_gate.wait(partition)
        if not self.service.is_loading(partition, leader_epoch, shard):
            return
        try:
            replayed, _ = await self._load_partition(partition, shard, leader_epoch)
        except Exception:  # (StorageError, DecodeError, ...) Kafka gives the partition up: NOT_COORDINATOR
            log.exception("cannot load %s-%d; not serving its groups", OFFSETS_TOPIC, partition)
            if self.service.is_loading(partition, leader_epoch, shard):
                self.service.on_resignation(partition, None)
            return
        if self.service.complete_election(partition, leader_epoch, shard):
            log.info("loaded %s-%d at epoch %d (%d records) in %.1f ms", OFFSETS_TOPIC, partition, leader_epoch,
                     replayed, (time.monotonic() - started) * 1000)
