"""Loading and unloading `__consumer_offsets` partitions.

`begin_load(p)` marks a partition as loading (its groups answer COORDINATOR_LOAD_IN_PROGRESS);
`load_partition(p, records, state)` replays records into the partition's materialised state
(coordinator.partition_state: empty for a full replay, or a checkpoint's state followed by the
log's tail) and makes the resulting groups live.
"""
from __future__ import annotations

from collections.abc import Iterable

from coordinator.gc_pause import gc_paused
from coordinator.group_metadata import GroupMetadata
from coordinator.group_state import GroupState
from coordinator.partition_state import PartitionState
from coordinator.rebalance import RebalanceMixin
from coordinator.replay import group_from_metadata_value, replay_offset_commits
from coordinator.results import JoinGroupResult, SyncGroupResult
from protocol.consumer_offsets import decode_group_metadata_value
from protocol.errors import ErrorCode

S = GroupState


class LoadingMixin(RebalanceMixin):

    def begin_load(self, partition: int) -> None:
        self.loading_partitions.add(partition)

    def load_partition(self, partition: int, records: Iterable, state: PartitionState | None = None,
                       keep_state: bool = False) -> int:
        """Replay `records`, oldest first: protocol.records.Record objects (anything with .key and
        .value) or (key, value[, headers]) tuples, on top of `state` (what the log before them left,
        e.g. a checkpoint's; it is updated in place). The groups take the state's offset tables
        unless `keep_state` (the caller still needs it, e.g. to write it as a checkpoint): then
        they get copies. Returns how many groups were loaded."""
        self.loading_partitions.add(partition)
        state = PartitionState() if state is None else state
        try:
            with gc_paused():
                state.decode_all()
                touched = state.replay(records, self.log)
                loaded = self._build_groups(state, keep_state)
            for group_id in touched - state.groups():
                self.groups.pop(group_id, None)  # tombstoned
        finally:
            self.loading_partitions.discard(partition)
        if self.owned_partitions is not None:
            self.owned_partitions.add(partition)
        for group in loaded:
            self.on_group_loaded(group)
        self.log.info("Finished loading offsets and group metadata from %s-%d: %d groups", "__consumer_offsets",
                      partition, len(loaded))
        return len(loaded)

    def _build_groups(self, state: PartitionState, keep_state: bool) -> list[GroupMetadata]:
        """A group per group of the state: from its last GroupMetadata value if it has one (else a
        simple group holding only offsets), with its offsets replayed."""
        now = self.now_ms()
        loaded = []
        for group_id in state.groups():
            value = state.metadata.get(group_id)
            if value is not None:
                group = group_from_metadata_value(group_id, decode_group_metadata_value(value), now)
            else:
                group = GroupMetadata(group_id, now)  # offsets only: a simple (or deleted-then-reused) group
            offsets = state.offsets.get(group_id)
            if offsets is not None:
                if keep_state:
                    replay_offset_commits(group, offsets)  # into the group's own table (a copy)
                else:
                    group.offsets = offsets  # what that replay leaves in a fresh group, without the copy
            self.groups[group_id] = group
            loaded.append(group)
        return loaded

    def on_group_loaded(self, group: GroupMetadata) -> None:
        # Restored members get a fresh session; those that are gone will expire.
        for member in group.all_member_metadata():
            self.complete_and_schedule_next_heartbeat_expiration(group, member)
        if group.size > self.config.group_max_size:
            self.prepare_rebalance(group, f"Freshly-loaded group is over capacity ({self.config.group_max_size}). "
                                          "Rebalancing in order to give a chance for consumers to commit offsets",
                                   "group_max_size")

    def unload_partition(self, partition: int) -> int:
        """Give up a partition: its groups go Dead and parked requests are told NOT_COORDINATOR."""
        if self.owned_partitions is None:
            self.owned_partitions = set(range(self.config.offsets_topic_num_partitions))
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        gone = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        for group in gone:
            for member in group.all_member_metadata():
                group.maybe_invoke_join_callback(member, JoinGroupResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.NOT_COORDINATOR))
                self.remove_heartbeat_for_leaving_member(group, member.member_id)
            for member_id in group.pending_members:
                self.remove_heartbeat_for_leaving_member(group, member_id)
            self.remove_sync_expiration(group)
            op = self.join_purgatory.watched(group.group_id)
            if op is not None:
                self.join_purgatory.unwatch(group.group_id, op)
            group.transition_to(S.DEAD, self.now_ms())
            del self.groups[group.group_id]
        return len(gone)
