"""Loading and unloading `__consumer_offsets` partitions.

`begin_load(p)` marks a partition as loading (its groups answer COORDINATOR_LOAD_IN_PROGRESS);
`load_partition(p, records)` replays every record of it and makes its groups live. Only the last
record of each key matters, so records are first reduced to the last value per raw key (cheap
bytes hashing), then each surviving key is decoded once and replayed.
"""
from __future__ import annotations

import gc as garbage_collector
import itertools
from collections.abc import Iterable

from coordinator.group_metadata import GroupMetadata
from coordinator.group_state import GroupState
from coordinator.rebalance import RebalanceMixin
from coordinator.replay import group_from_metadata_value, replay_offset_commits
from coordinator.results import JoinGroupResult, SyncGroupResult
from protocol.consumer_offsets import (
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    split_offset_commit_key,
)
from protocol.errors import DecodeError, ErrorCode

S = GroupState


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
                pairs: Iterable = ()
            elif hasattr(first, "key"):
                pairs = itertools.chain([(first.key, first.value)], ((r.key, r.value) for r in it))
            else:
                pairs = itertools.chain([(first[0], first[1])], ((r[0], r[1]) for r in it))
            loaded = self._replay_partition(pairs)
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

    def _replay_partition(self, pairs: Iterable[tuple[bytes | None, bytes | None]]) -> list[GroupMetadata]:
        """Pass 1 keeps the last raw value of every key (what sequential replay would leave);
        pass 2 decodes only those survivors and replays them group by group."""
        now = self.now_ms()
        metadata: dict[str, bytes | None] = {}
        raw_offsets: dict[str, dict[tuple[str, int], bytes | None]] = {}
        # OffsetCommitKey = version, group, topic | partition: the (version, group, topic) prefix repeats
        # for every partition of a topic, so it is split and validated once.
        prefixes: dict[bytes, tuple[dict, str]] = {}
        from_bytes = int.from_bytes
        for key, value in pairs:
            try:
                if key[0] == 0 and key[1] <= 1:
                    known = prefixes.get(key[:-4])
                    if known is None:
                        raw_group, topic, _ = split_offset_commit_key(key)
                        group_id = raw_group.decode("utf-8")
                        group_offsets = raw_offsets.get(group_id)
                        if group_offsets is None:
                            group_offsets = raw_offsets[group_id] = {}
                        known = prefixes[key[:-4]] = (group_offsets, topic)
                    known[0][(known[1], from_bytes(key[-4:], "big", signed=True))] = value
                    continue
                k = decode_key(key)
            except (DecodeError, UnicodeDecodeError, IndexError, TypeError) as e:
                self.log.warning("Skipping undecodable __consumer_offsets record: %s", e)
                continue
            if k is not None:  # GroupMetadataKey; other record types belong to other coordinators
                metadata[k.group] = value
        loaded = []
        for group_id in metadata.keys() | raw_offsets.keys():
            value = metadata.get(group_id)
            offsets = self._decode_offsets(group_id, raw_offsets.get(group_id, {}))
            if value is not None:
                group = group_from_metadata_value(group_id, decode_group_metadata_value(value), now)
            elif offsets:
                group = GroupMetadata(group_id, now)  # offsets only: a simple (or deleted-then-reused) group
            else:
                self.groups.pop(group_id, None)  # tombstoned
                continue
            replay_offset_commits(group, offsets)
            self.groups[group_id] = group
            loaded.append(group)
        return loaded

    def _decode_offsets(self, group_id: str, raw: dict[tuple[str, int], bytes | None]) -> dict:
        decode = decode_offset_commit_value
        try:
            return {tp: decode(v) for tp, v in raw.items() if v is not None}
        except DecodeError:
            out = {}
            for tp, v in raw.items():
                if v is not None:
                    try:
                        out[tp] = decode(v)
                    except DecodeError as e:
                        self.log.warning("Skipping undecodable offset of group %s %s: %s", group_id, tp, e)
            return out

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
            group.transition_to(S.DEAD, self.now_ms())
            del self.groups[group.group_id]
        return len(gone)
