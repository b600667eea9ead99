"""OffsetCommit (v2-v9) and OffsetFetch (v1-v9), and offset retention (KIP-211).

OffsetCommit: v2-v4 retention_time_ms (an expire timestamp, written as OffsetCommitValue v1);
              v5 drops it; v6 leader epoch; v7 group.instance.id; v9 GROUP_ID_NOT_FOUND for an
              unknown group committed to with a generation (ILLEGAL_GENERATION before v9).
OffsetFetch:  v2 null topics = every offset of the group; v7 require_stable; v8 several groups
              per request (the broker calls handle_fetch_offsets once per group).

A commit's offsets are pending until the writer reports them durable; only then are they applied
(by replaying the records written) and only then is the client answered.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import itemgetter

from coordinator.consumer_protocol import subscription_topics
from coordinator.core import map_write_error
from coordinator.group_metadata import GroupMetadata
from coordinator.group_state import GroupState
from coordinator.rebalance import RebalanceMixin
from coordinator.records import (
    Record,
    group_metadata_tombstone,
    offset_commit_records,
    offset_commit_tombstone,
)
from coordinator.replay import replay_offset_commit, replay_offset_commits
from coordinator.results import OffsetCommitRequestPartition, OffsetFetchPartition, OffsetFetchResult
from protocol.consumer_offsets import OffsetCommitValue
from protocol.errors import ErrorCode

S = GroupState
TopicPartition = tuple[str, int]
CommitCallback = Callable[[dict[TopicPartition, ErrorCode]], None]
RETENTION_TIMER_KEY = ("offsets-retention",)
_new_tuple = tuple.__new__  # builds an OffsetCommitValue without NamedTuple's Python-level __new__
_commit_value = functools.partial(_new_tuple, OffsetCommitValue)
_topic, _partition, _offset, _epoch, _metadata = (itemgetter(i) for i in range(5))  # OffsetCommitRequestPartition

_COMMIT_WRITE_ERRORS = {
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def subscribed_topics(group: GroupMetadata) -> set[str] | None:
    """Topics a consumer-protocol group reads, from its members' subscriptions; None if unknown."""
    if group.protocol_type != "consumer":
        return None
    if not group.members:
        return set()
    if group.protocol_name is None:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        try:
            got = subscription_topics(member.metadata(group.protocol_name))
        except KeyError:
            return None
        if got is None:
            return None
        topics |= got
    return topics


def _release_pending(group: GroupMetadata, written: dict[TopicPartition, OffsetCommitValue]) -> None:
    """One write of `written` is no longer in flight."""
    pending = group.pending_offset_commits
    # Usually this write was the only one in flight for its partitions: then the table holds exactly
    # its partitions (each is present until this write releases it), each counted once.
    if len(pending) == len(written) and max(pending.values()) == 1:
        group.pending_offset_commits = {}
        return
    for tp in written:
        left = pending.get(tp, 0) - 1
        if left > 0:
            pending[tp] = left
        else:
            pending.pop(tp, None)


def _values_with_metadata(offsets: list[OffsetCommitRequestPartition], now: int, expire: int,
                          limit: int) -> tuple[dict[TopicPartition, OffsetCommitValue], dict[TopicPartition, ErrorCode]]:
    """(values to write, partitions refused for metadata over `limit` bytes) of a commit."""
    written: dict[TopicPartition, OffsetCommitValue] = {}
    too_large: dict[TopicPartition, ErrorCode] = {}
    for topic, partition, offset, leader_epoch, metadata in offsets:
        tp = (topic, partition)
        metadata = metadata or ""
        # UTF-8 takes at most 4 bytes a character: only long metadata needs encoding to be measured.
        if len(metadata) * 4 > limit and len(metadata.encode("utf-8")) > limit:
            too_large[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            continue
        if too_large:
            too_large.pop(tp, None)  # a later entry for the same partition decides, as before
        written[tp] = _new_tuple(OffsetCommitValue, (offset, metadata, now, leader_epoch, expire, None))
    return written, too_large


class OffsetsMixin(RebalanceMixin):

    # ------------------------------------------------------------ OffsetCommit

    def handle_commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                              generation_id: int, offsets: list[OffsetCommitRequestPartition],
                              callback: CommitCallback, retention_time_ms: int = -1,
                              request_version: int = 8) -> None:
        def fail(error: ErrorCode) -> None:
            callback({(p.topic, p.partition): error for p in offsets})

        error = self.validate_group_status(group_id)
        if error is not None:
            return fail(error)
        group = self.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # Committing as a member of a group that does not exist.
                return fail(ErrorCode.GROUP_ID_NOT_FOUND if request_version >= 9 else ErrorCode.ILLEGAL_GENERATION)
            # A "simple" group: Kafka only stores its offsets (manual assignment, admin tools).
            group = self.get_or_maybe_create_group(group_id, True)
        self.do_commit_offsets(group, member_id, group_instance_id, generation_id, offsets, callback,
                               retention_time_ms)

    def do_commit_offsets(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                          generation_id: int, offsets: list[OffsetCommitRequestPartition],
                          callback: CommitCallback, retention_time_ms: int) -> None:
        def fail(error: ErrorCode) -> None:
            callback({(p.topic, p.partition): error for p in offsets})

        if group.is_(S.DEAD):
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.is_(S.EMPTY):
            return self.store_offsets(group, offsets, callback, retention_time_ms)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return fail(ErrorCode.FENCED_INSTANCE_ID)
        if not group.has(member_id):
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return fail(ErrorCode.ILLEGAL_GENERATION)
        match group.state:
            case S.STABLE | S.PREPARING_REBALANCE:
                # A commit proves the member alive (and the previous generation may still commit).
                self.complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
                self.store_offsets(group, offsets, callback, retention_time_ms)
            case _:  # CompletingRebalance: the assignment is about to change
                fail(ErrorCode.REBALANCE_IN_PROGRESS)

    def store_offsets(self, group: GroupMetadata, offsets: list[OffsetCommitRequestPartition],
                      callback: CommitCallback, retention_time_ms: int = -1) -> None:
        # The hot path of a busy coordinator: the table of values that is both written (one record per
        # partition) and, once durable, applied.
        now = self.now_ms()
        expire = now + retention_time_ms if retention_time_ms >= 0 else -1
        group_id = group.group_id
        # The last value per partition wins, as on replay.
        if not any(map(_metadata, offsets)):
            # No metadata (what consumers nearly always commit): the table is made in C, no step per partition.
            values = map(_commit_value, zip(map(_offset, offsets), repeat(""), repeat(now), map(_epoch, offsets),
                                            repeat(expire), repeat(None), strict=False))  # repeat() never ends
            written = dict(zip(zip(map(_topic, offsets), map(_partition, offsets), strict=True), values, strict=True))
            too_large: dict[TopicPartition, ErrorCode] = {}
        else:
            written, too_large = _values_with_metadata(offsets, now, expire, self.config.offset_metadata_max_bytes)
        results: dict[TopicPartition, ErrorCode] = dict.fromkeys(written, ErrorCode.NONE)
        results.update(too_large)
        if not written:
            callback(results)
            return
        pending = group.pending_offset_commits
        if pending:
            for tp in written:
                pending[tp] = pending.get(tp, 0) + 1
        else:
            group.pending_offset_commits = dict.fromkeys(written, 1)

        def on_written(error: ErrorCode) -> None:
            _release_pending(group, written)
            if error == ErrorCode.NONE:
                replay_offset_commits(group, written)  # the same replay a load goes through
            else:
                mapped = _COMMIT_WRITE_ERRORS.get(error) or map_write_error(error)
                self.log.warning("Offset commit for group %s failed: %s", group_id, error.name)
                for tp in written:
                    results[tp] = mapped
            callback(results)

        self.append_records(group_id, offset_commit_records(group_id, written), on_written)

    # ------------------------------------------------------------ OffsetFetch

    def handle_fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None,
                             require_stable: bool = False) -> OffsetFetchResult:
        """`partitions` None = every committed offset of the group (v2+)."""
        error = self.validate_group_status(group_id, require_non_empty=False)
        if error is not None:
            return OffsetFetchResult(group_id, error)
        group = self.get_group(group_id)
        if group is None or group.is_(S.DEAD):
            offsets: dict[TopicPartition, OffsetCommitValue] = {}
            pending: dict[TopicPartition, int] = {}
        else:
            offsets, pending = group.offsets, group.pending_offset_commits
        wanted = list(offsets) if partitions is None else list(partitions)
        out = []
        for tp in wanted:
            if require_stable and tp in pending:
                out.append(OffsetFetchPartition(tp[0], tp[1], error=ErrorCode.UNSTABLE_OFFSET_COMMIT))
                continue
            v = offsets.get(tp)
            if v is None:
                out.append(OffsetFetchPartition(tp[0], tp[1]))
            else:
                out.append(OffsetFetchPartition(tp[0], tp[1], v.offset, v.leader_epoch, v.metadata))
        return OffsetFetchResult(group_id, ErrorCode.NONE, out)

    # ------------------------------------------------------------ retention (KIP-211)

    def schedule_offset_expiration(self) -> None:
        self.schedule(RETENTION_TIMER_KEY, self.config.offsets_retention_check_interval_ms,
                      self._run_offset_expiration)

    def _run_offset_expiration(self) -> None:
        try:
            self.cleanup_group_metadata()
        finally:
            self.schedule_offset_expiration()

    def expired_offsets(self, group: GroupMetadata, now_ms: int) -> list[TopicPartition]:
        retention = self.config.offsets_retention_ms

        def expired(base: Callable[[OffsetCommitValue], int], keep_topics: set[str]) -> list[TopicPartition]:
            out = []
            for tp, v in group.offsets.items():
                if tp[0] in keep_topics or tp in group.pending_offset_commits:
                    continue
                if (now_ms >= v.expire_timestamp) if v.expire_timestamp >= 0 else (now_ms - base(v) >= retention):
                    out.append(tp)
            return out

        if group.protocol_type is not None and group.is_(S.EMPTY):
            # Nobody consumes: the clock runs from the moment the group became Empty.
            state_ts = group.current_state_timestamp
            return expired(lambda v: state_ts if state_ts >= 0 else v.commit_timestamp, set())
        if group.protocol_type == "consumer" and group.is_(S.STABLE):
            topics = subscribed_topics(group)
            if topics is not None:
                # Offsets of topics still read are never expired; others age from their commit.
                return expired(lambda v: v.commit_timestamp, topics)
            return []
        if group.protocol_type is None:
            return expired(lambda v: v.commit_timestamp, set())  # a simple group: from the commit
        return []

    def cleanup_group_metadata(self) -> int:
        """Expire offsets and delete groups left Empty without offsets; returns records written."""
        now = self.now_ms()
        written = 0
        for group in list(self.groups.values()):
            if not self.is_group_local(group.group_id) or self.is_group_loading(group.group_id):
                continue
            tps = self.expired_offsets(group, now)
            records: list[Record] = [offset_commit_tombstone(group.group_id, t, p) for t, p in tps]
            for t, p in tps:
                replay_offset_commit(group, t, p, None)
            if tps:
                self.log.info("Removed %d expired offsets of group %s", len(tps), group.group_id,
                              extra={"group_id": group.group_id, "event": "offsets_expired"})
            if group.is_(S.EMPTY) and not group.offsets and not group.pending_offset_commits:
                group.transition_to(S.DEAD, now)
                del self.groups[group.group_id]
                records.append(group_metadata_tombstone(group.group_id))
                self.log.info("Group %s transitioned to Dead in generation %d (no members, no offsets)",
                              group.group_id, group.generation_id,
                              extra={"group_id": group.group_id, "event": "group_expired"})
            if records:
                written += len(records)
                self.append_records(group.group_id, records, lambda e, g=group.group_id: self._log_cleanup(g, e))
        return written

    def _log_cleanup(self, group_id: str, error: ErrorCode) -> None:
        if error != ErrorCode.NONE:
            self.log.warning("Failed to write tombstones for group %s: %s", group_id, error.name)
