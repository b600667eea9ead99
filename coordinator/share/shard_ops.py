"""The share group side of GroupCoordinatorShard (KIP-932), a base class of the shard: the shard's
operations for share groups and the share branches of the ones over every kind of group, so that the
shard itself only routes. Group-type exclusivity (a group id is classic, consumer or share) as Kafka 4.2:
ShareGroupHeartbeat on another kind's id and ShareGroupDescribe of it answer GROUP_ID_NOT_FOUND ("Group X
is not a share group."), ConsumerGroupHeartbeat on a share group's id GROUP_ID_NOT_FOUND, JoinGroup
INCONSISTENT_GROUP_PROTOCOL (classicGroupJoin), DescribeGroups "not a classic group"."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.coordinator.consumer.steady import HeartbeatResult
from kcoord.coordinator.core import OFFSETS_TOPIC
from kcoord.coordinator.results import ListedGroup, RequestContext
from kcoord.coordinator.share import records as share_records
from kcoord.coordinator.share.manager import ShareGroupManager
from kcoord.coordinator.share.share_group import ShareGroup
from kcoord.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kcoord.coordinator.consumer.manager import ConsumerGroupManager
    from kcoord.coordinator.group_manager import GroupMetadataManager
    from kcoord.coordinator.offset_manager import OffsetMetadataManager


class ShareGroupOperations:
    share_manager: ShareGroupManager
    group_manager: GroupMetadataManager
    consumer_manager: ConsumerGroupManager
    offset_manager: OffsetMetadataManager
    consumer_group_heartbeat: Callable[[RequestContext, Any, Callable[[HeartbeatResult], None]], None]

    def _init_share_groups(self, partition: int, config, clock, timer, log, events, write, topics) -> None:
        self.share_manager = m = ShareGroupManager(f"{OFFSETS_TOPIC}-{partition}", config, clock, timer, log, events,
                                                   write, topics)
        m.is_other_group = lambda gid: gid in self.group_manager.groups or gid in self.consumer_manager.groups
        # ConsumerGroupHeartbeat (KIP-848: kcoord.coordinator.consumer.heartbeat), the hot path: the step itself,
        # bound once, so a heartbeat costs no frame of the shard's own -- until a share group exists: then the
        # id is checked first (consumer_group_heartbeat_checked)
        self.consumer_group_heartbeat = self.consumer_manager.heartbeats.handle
        m.on_first_group = self._check_consumer_heartbeats

    def replay_consumer(self, record) -> None:  # the shard's (a KIP-848 record we wrote)
        raise NotImplementedError

    def replay_decoded(self, record) -> None:
        """A group record we wrote, as `replay` of its bytes would decode it: a share group's or a consumer group's."""
        if isinstance(record, share_records.ShareRecord):
            self.share_manager.replay_record(record)
        else:
            self.replay_consumer(record)

    def replay_share(self, key: bytes, value: bytes | None) -> None:
        """A record `replay` did not take: a share group record's (key types 10-14); others are skipped."""
        if share_records.record_type(key) is not None:
            self.share_manager.replay(key, value)

    def _check_consumer_heartbeats(self) -> None:
        self.consumer_group_heartbeat = self.consumer_group_heartbeat_checked

    def consumer_group_heartbeat_checked(self, context: RequestContext, request, callback) -> None:
        """ConsumerGroupHeartbeat on a share group's id: getOrMaybeCreateConsumerGroup's GROUP_ID_NOT_FOUND."""
        if request.group_id in self.share_manager.groups:
            return callback(HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND,
                                            f"Group {request.group_id} is not a consumer group."))
        self.consumer_manager.heartbeats.handle(context, request, callback)

    def steady_consumer_heartbeat(self, group_id: str, member_id: str, member_epoch: int, client_id: str,
                                  client_host: str) -> int | None:
        """A steady ConsumerGroupHeartbeat answered from its fields: the heartbeat interval to answer with
        (ConsumerGroupHeartbeat.steady), or None: take consumer_group_heartbeat (a share group's id too)."""
        if group_id in self.share_manager.groups:
            return None
        return self.consumer_manager.heartbeats.steady(group_id, member_id, member_epoch, client_id, client_host)

    def share_group_heartbeat(self, context: RequestContext, request, callback) -> None:
        """ShareGroupHeartbeat (kcoord.coordinator.share.heartbeat)."""
        self.share_manager.heartbeat(context, request, callback)

    def share_group_describe(self, group_id: str) -> tuple[ErrorCode, str | None, ShareGroup | None]:
        """ShareGroupDescribe of one group (Kafka's shareGroupDescribe, per id)."""
        group = self.share_manager.groups.get(group_id)
        if group is not None:
            return ErrorCode.NONE, None, group
        if self.share_manager.is_other_group(group_id):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None

    def _split_share_records(self, raw: dict[bytes, bytes]) -> dict[bytes, bytes]:
        """A load's raw group records: the share groups' are loaded here, the rest returned (KIP-848's)."""
        share = {k: v for k, v in raw.items() if share_records.record_type(k) is not None}
        self.share_manager.load(share)
        return {k: v for k, v in raw.items() if k not in share} if share else raw

    def _listed_share_groups(self, wanted: set[str] | None) -> list[ListedGroup]:
        return [ListedGroup(g.group_id, "share", g.state, "share") for g in self.share_manager.groups.values()
                if wanted is None or g.state.lower() in wanted]

    def _delete_share_group(self, group_id: str, results: dict[str, ErrorCode], records: list) -> bool:
        """DeleteGroups of a share group (Empty only, no write in flight): its offsets' and records'
        tombstones. False: not a share group."""
        group = self.share_manager.groups.get(group_id)
        if group is None:
            return False
        busy = self.share_manager.busy(group_id) or not group.is_empty()
        results[group_id] = ErrorCode.NON_EMPTY_GROUP if busy else ErrorCode.NONE
        if not busy:
            records += self.offset_manager.delete_all_offsets(group_id) + self.share_manager.deletion_records(group)
        return True
