"""Loading and unloading `__consumer_offsets` partitions.

`begin_load(p)` marks a partition as loading (its groups answer COORDINATOR_LOAD_IN_PROGRESS);
`load_partition(p, records)` replays every record of it and makes its groups live. Only the last
record of each key matters, so records are first reduced to the last value per raw key (a dict
built in C), then each surviving key and value is decoded once and replayed.
"""
from __future__ import annotations

import gc as garbage_collector
import itertools
import struct
from collections.abc import Iterable
from operator import attrgetter, itemgetter

from coordinator.group_metadata import GroupMetadata
from coordinator.group_state import GroupState
from coordinator.rebalance import RebalanceMixin
from coordinator.replay import group_from_metadata_value, replay_offset_commits
from coordinator.results import JoinGroupResult, SyncGroupResult
from protocol.consumer_offsets import (
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    split_offset_commit_key,
)
from protocol.errors import DecodeError, ErrorCode

S = GroupState
_PARTITION = struct.Struct(">i")


class LoadingMixin(RebalanceMixin):

    def begin_load(self, partition: int) -> None:
        self.loading_partitions.add(partition)

    def load_partition(self, partition: int, records: Iterable) -> int:
        """Replay `records`, oldest first: protocol.records.Record objects (anything with .key and
        .value) or (key, value[, headers]) tuples. Returns how many groups were loaded."""
        self.loading_partitions.add(partition)
        # A load allocates an object per offset and frees none: the cyclic GC would rescan the
        # growing heap again and again for nothing (it dominated load time), so it pauses meanwhile.
        gc_was_enabled = garbage_collector.isenabled()
        garbage_collector.disable()
        try:
            it = iter(records)
            first = next(it, None)
            if first is None:
                latest: dict = {}
            else:
                get_key_value = attrgetter("key", "value") if hasattr(first, "key") else itemgetter(0, 1)
                # Pass 1, in C: the last value of every key, which is what sequential replay leaves.
                latest = dict(map(get_key_value, itertools.chain((first,), it)))
            loaded = self._replay_partition(latest)
        finally:
            if gc_was_enabled:
                garbage_collector.enable()
            self.loading_partitions.discard(partition)
        if self.owned_partitions is not None:
            self.owned_partitions.add(partition)
        for group in loaded:
            self.on_group_loaded(group)
        self.log.info("Finished loading offsets and group metadata from %s-%d: %d groups", "__consumer_offsets",
                      partition, len(loaded))
        return len(loaded)

    def _replay_partition(self, latest: dict[bytes | None, bytes | None]) -> list[GroupMetadata]:
        """Decode each surviving key once, then replay the records group by group."""
        now = self.now_ms()
        metadata: dict[str, bytes | None] = {}
        offsets_by_group: dict[str, dict[tuple[str, int], OffsetCommitValue | None]] = {}
        # OffsetCommitKey = version, group, topic | partition: the (version, group, topic) prefix repeats
        # for every partition of a topic, so it is split and validated once.
        prefixes: dict[bytes, tuple[dict, str]] = {}
        unpack_partition = _PARTITION.unpack_from
        decode_value = decode_offset_commit_value
        for key, value in latest.items():
            try:
                if key[0] == 0 and key[1] <= 1:
                    n = len(key) - 4
                    known = prefixes.get(key[:n])
                    if known is None:
                        raw_group, topic, _ = split_offset_commit_key(key)
                        group_id = raw_group.decode("utf-8")
                        group_offsets = offsets_by_group.get(group_id)
                        if group_offsets is None:
                            group_offsets = offsets_by_group[group_id] = {}
                        known = prefixes[key[:n]] = (group_offsets, topic)
                    # A tombstone stays as None so that replay deletes the offset.
                    known[0][(known[1], unpack_partition(key, n)[0])] = \
                        None if value is None else decode_value(value)
                    continue
                k = decode_key(key)
            except (DecodeError, UnicodeDecodeError, IndexError, TypeError) as e:
                self.log.warning("Skipping undecodable __consumer_offsets record: %s", e)
                continue
            if k is not None:  # GroupMetadataKey; other record types belong to other coordinators
                metadata[k.group] = value
        loaded = []
        for group_id in metadata.keys() | offsets_by_group.keys():
            value = metadata.get(group_id)
            offsets = offsets_by_group.get(group_id, {})
            if value is not None:
                group = group_from_metadata_value(group_id, decode_group_metadata_value(value), now)
            elif any(v is not None for v in offsets.values()):
                group = GroupMetadata(group_id, now)  # offsets only: a simple (or deleted-then-reused) group
            else:
                self.groups.pop(group_id, None)  # tombstoned
                continue
            replay_offset_commits(group, offsets)
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
