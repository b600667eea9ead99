"""Shards follow `__consumer_offsets` leadership (cluster mode, issue #27): the service's side of Kafka 4's
GroupCoordinatorService.onElection / onResignation and CoordinatorRuntime.scheduleLoadOperation /
scheduleUnloadOperation. Each loaded or loading shard keeps the leader epoch it was elected at: a load or
an unload for an older term is ignored, and a load that a resignation or a newer election overtook is
dropped when it completes. Pure: the runtime (kcoord.coordinator.runtime.elections) reads the log."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kcoord.coordinator.core import OFFSETS_TOPIC

if TYPE_CHECKING:
    from kcoord.coordinator.shard import GroupCoordinatorShard


class ShardElections:
    """GroupCoordinatorService's leadership operations (its shards, loading and epochs)."""

    shards: dict[int, GroupCoordinatorShard]
    loading: dict[int, GroupCoordinatorShard]
    epochs: dict[int, int]
    log: logging.Logger

    def begin_load(self, partition: int) -> GroupCoordinatorShard:
        raise NotImplementedError

    def complete_load(self, partition: int) -> GroupCoordinatorShard:
        raise NotImplementedError

    def unload_partition(self, partition: int) -> int:
        raise NotImplementedError

    def on_election(self, partition: int, leader_epoch: int) -> GroupCoordinatorShard | None:
        """This node leads `partition` at `leader_epoch` (GroupCoordinatorService.onElection, the runtime's
        scheduleLoadOperation): a new shard starts loading, its groups answer COORDINATOR_LOAD_IN_PROGRESS
        until `complete_election`. An epoch not above the current shard's is stale: None, nothing changes."""
        current = self.epochs.get(partition)
        if current is not None and leader_epoch <= current:
            self.log.info("Ignored the load of %s-%d at epoch %d: the coordinator is at epoch %d",
                          OFFSETS_TOPIC, partition, leader_epoch, current)
            return None
        if current is not None:
            self.unload_partition(partition)
        self.epochs[partition] = leader_epoch
        return self.begin_load(partition)

    def is_loading(self, partition: int, leader_epoch: int, shard: GroupCoordinatorShard) -> bool:
        """Whether `shard` is still the one loading for `partition` at `leader_epoch` (a resignation or a
        newer election since makes a running load's result stale)."""
        return self.loading.get(partition) is shard and self.epochs.get(partition) == leader_epoch

    def complete_election(self, partition: int, leader_epoch: int, shard: GroupCoordinatorShard) -> bool:
        """The load for `leader_epoch` is replayed into `shard`: it serves (session timers restarted by
        on_loaded), unless the load went stale meanwhile (then False and nothing changes)."""
        if not self.is_loading(partition, leader_epoch, shard):
            return False
        self.complete_load(partition)
        shard.group_manager.on_moved_here()
        return True

    def on_resignation(self, partition: int, leader_epoch: int | None) -> int:
        """This node stopped leading `partition` (GroupCoordinatorService.onResignation, the runtime's
        scheduleUnloadOperation): the shard unloads (timers cancelled, parked JoinGroup / SyncGroup /
        heartbeats answered NOT_COORDINATOR, its groups NOT_COORDINATOR from now on). `leader_epoch` below
        the shard's is a stale resignation, ignored; None (unknown, a lease loss) always unloads. Returns
        the groups unloaded."""
        current = self.epochs.get(partition)
        if current is None and partition not in self.shards and partition not in self.loading:
            return 0
        if leader_epoch is not None and current is not None and leader_epoch < current:
            return 0
        unloaded = self.unload_partition(partition)
        self.log.info("Unloaded %s-%d (resigned at epoch %s): %d groups", OFFSETS_TOPIC, partition,
                      leader_epoch, unloaded)
        return unloaded
