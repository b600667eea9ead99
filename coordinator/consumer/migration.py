"""Online migration between a classic group and a consumer group (KIP-848), as Kafka 4's
GroupMetadataManager does it under `group.consumer.migration.policy`.

Upgrade (validateOnlineUpgrade / convertToConsumerGroup, ConsumerGroup.fromClassicGroup): a
ConsumerGroupHeartbeat joining a non-empty classic group whose members speak the "consumer" embedded
protocol turns it into a consumer group: the classic group's tombstone, then the consumer group's
records (createConsumerGroupRecords) -- every classic member kept, at the classic generation, Stable,
owning its last assignment, with its JoinGroup protocols as ClassicMemberMetadata.

Downgrade (validateOnlineDowngradeWithFencedMember / convertToClassicGroup, ClassicGroup.fromConsumerGroup):
when the last member using the consumer protocol leaves or is fenced and classic members remain, the
consumer group's tombstones (createGroupTombstoneRecords) and a GroupMetadata record of a Stable classic
group at the group epoch, each member assigned its target; it then rebalances.

Both are records like any other: nothing changes until they are durable and replayed.
"""
from __future__ import annotations

import uuid

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.consumer_group import ConsumerGroup
from kcoord.coordinator.consumer.context import ConsumerContext
from kcoord.coordinator.consumer.errors import CustomAssignorUserData, GroupError
from kcoord.coordinator.consumer.member import STABLE, Assignment, ClassicMemberMetadata, ConsumerGroupMember
from kcoord.coordinator.consumer.topics_image import TopicsImage
from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.member_metadata import MemberMetadata
from kcoord.coordinator.records import group_metadata_record, group_metadata_tombstone
from kcoord.protocol import messages as m
from kcoord.protocol.errors import DecodeError, ErrorCode

E = ErrorCode
MIGRATION = "migration"  # the rebalance cause of an upgrade's or a downgrade's epoch bump

# ---------------------------------------------------------------- the embedded consumer protocol


def parse_subscription(metadata: bytes):
    """A ConsumerProtocolSubscription (DecodeError if malformed)."""
    return m.decode_versioned("ConsumerProtocolSubscription", bytes(metadata))[0]


def protocol_version(metadata: bytes) -> int:
    """The version a member's subscription was written in: its assignment is written in the same."""
    if len(metadata) < 2:
        return 0
    return max(0, min(int.from_bytes(metadata[:2], "big", signed=True), 3))


def owned_partitions(subscription, topics: TopicsImage) -> list[tuple[uuid.UUID, list[int]]]:
    """The subscription's owned partitions (v1+) by topic id; topics not known are left out."""
    out = []
    for tp in getattr(subscription, "owned_partitions", None) or ():
        topic = topics.topic(tp.topic)
        if topic is not None:
            out.append((topic[0], list(tp.partitions)))
    return out


def assignment_from_bytes(data: bytes, topics: TopicsImage) -> Assignment:
    """A classic member's assignment (ConsumerProtocolAssignment) by topic id; unknown topics dropped."""
    if not data:
        return {}
    value = m.decode_versioned("ConsumerProtocolAssignment", bytes(data))[0]
    if value.user_data:
        raise CustomAssignorUserData("userData from a custom assignor would be lost")
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in value.assigned_partitions or ():
        topic = topics.topic(tp.topic)
        if topic is not None and tp.partitions:
            out[topic[0]] = out.get(topic[0], frozenset()) | frozenset(tp.partitions)
    return out


def assignment_to_bytes(assignment: Assignment, topics: TopicsImage, version: int) -> bytes:
    """Kafka's ConsumerProtocol.serializeAssignment of a member's partitions, by topic name."""
    cls = m.message_class("ConsumerProtocolAssignment")
    tps = []
    for topic_id, partitions in sorted(assignment.items()):
        name = topics.topic_name(topic_id)
        if name is not None and partitions:
            tps.append(cls.TopicPartition(topic=name, partitions=sorted(partitions)))
    return m.encode_versioned("ConsumerProtocolAssignment", cls(assigned_partitions=tps, user_data=None), version)


# ---------------------------------------------------------------- upgrade


def get_or_maybe_create_group(context: ConsumerContext, group_id: str, create: bool, records: list
                              ) -> tuple[ConsumerGroup, bool]:
    """Kafka's getOrMaybeCreateConsumerGroup: (the group, whether it is a classic group upgraded now). An
    empty classic group is replaced (its tombstone); a non-empty one upgraded, or GROUP_ID_NOT_FOUND."""
    group = context.groups.get(group_id)
    if group is not None:
        return group, False
    if not create:
        raise GroupError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
    classic = context.group_manager.get_group(group_id) if context.group_manager is not None else None
    if classic is None or classic.is_(GroupState.DEAD):
        return ConsumerGroup(group_id), False
    if classic.is_(GroupState.EMPTY) and not classic.members:
        records.append(group_metadata_tombstone(group_id))
        return ConsumerGroup(group_id), False
    records += upgrade_records(context, classic)
    return replayed(group_id, records), True


def validate_online_upgrade(context: ConsumerContext, classic: GroupMetadata) -> None:
    """Kafka's validateOnlineUpgrade: GROUP_ID_NOT_FOUND with its message when the upgrade is refused."""
    gid = classic.group_id
    if not context.config.upgrade_enabled:
        reason = "online upgrade is disabled"
    elif classic.protocol_type != "consumer":
        reason = "the group does not use the consumer embedded protocol"
    elif len(classic.members) > context.config.consumer_group_max_size:
        reason = "the group size exceeds the consumer group maximum size"
    else:
        return
    context.log.info("Cannot upgrade classic group %s to consumer group because %s.", gid, reason)
    raise GroupError(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group because {reason}.")


def upgrade_records(context: ConsumerContext, classic: GroupMetadata) -> list:
    """The classic group's tombstone, then the records creating its consumer group (Kafka's
    convertToConsumerGroup: createGroupTombstoneRecords + ConsumerGroup.createConsumerGroupRecords)."""
    validate_online_upgrade(context, classic)
    gid, epoch, topics = classic.group_id, classic.generation_id, context.topics
    members: list[tuple[ConsumerGroupMember, Assignment]] = []
    try:
        for cm in classic.members.values():
            protocol = classic.protocol_name if classic.protocol_name in cm.protocols() else cm.supported_protocols[0][0]
            subscription = parse_subscription(cm.metadata(protocol))
            assigned = assignment_from_bytes(cm.assignment, topics)
            members.append((ConsumerGroupMember(
                cm.member_id, member_epoch=epoch, previous_member_epoch=epoch, state=STABLE,
                instance_id=cm.group_instance_id, rack_id=getattr(subscription, "rack_id", None),
                rebalance_timeout_ms=cm.rebalance_timeout_ms, client_id=cm.client_id, client_host=cm.client_host,
                subscribed_topic_names=frozenset(subscription.topics or ()), assigned_partitions=assigned,
                classic=ClassicMemberMetadata(cm.session_timeout_ms, tuple(
                    (n, bytes(d)) for n, d in cm.supported_protocols))), assigned))
    except CustomAssignorUserData as e:  # Kafka 4.1+: UnsupportedVersionException in fromClassicGroup
        context.log.warning("Cannot upgrade classic group %s to consumer group: %s.", gid, e)
        raise GroupError(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group because an "
                                               "unsupported custom assignor is in use. Please refer to the documentation "
                                               "or switch to a default assignor before re-attempting the upgrade.") from None
    except (DecodeError, ValueError, IndexError, KeyError) as e:
        context.log.warning("Cannot upgrade classic group %s to consumer group because the embedded consumer "
                            "protocol is malformed: %s.", gid, e)
        raise GroupError(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group because the "
                                               "embedded consumer protocol is malformed.") from None
    records = [group_metadata_tombstone(gid)]
    records += [r.member_subscription_record(gid, member) for member, _ in members]
    records.append(r.group_epoch_record(gid, epoch))
    records += [r.target_member_record(gid, member.member_id, assigned) for member, assigned in members]
    records.append(r.target_epoch_record(gid, epoch))
    records += [r.current_assignment_record(gid, member) for member, _ in members]
    context.log.info("[GroupId %s] Converted the classic group to a consumer group.", gid)
    return records


def replayed(group_id: str, records: list) -> ConsumerGroup:
    """The consumer group those records make (what their replay will install)."""
    group = ConsumerGroup(group_id)
    for key, value, *_ in records:
        if r.record_type(key) is not None:
            group.replay(r.decode(key, value))
    return group


# ---------------------------------------------------------------- downgrade


def validate_online_downgrade(context: ConsumerContext, group: ConsumerGroup, leaving_member_id: str) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember: the leaving member is the last one using the
    consumer protocol, some classic member stays, the policy allows it and the classic group would fit."""
    if not group.all_members_use_classic_protocol_except(leaving_member_id) or len(group.members) <= 1:
        return False
    return _downgrade_allowed(context, group, len(group.members) - 1)


def validate_online_downgrade_with_fenced_members(context: ConsumerContext, group: ConsumerGroup,
                                                  leaving: set[str]) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMembers (a LeaveGroup fencing several members at once):
    every member that stays uses the classic protocol, one stays at least, and the policy and the classic
    group's maximum size allow it."""
    gone = [group.members[i] for i in leaving if i in group.members]
    remaining = len(group.members) - len(gone)
    classic_left = group.num_classic_members - sum(1 for x in gone if x.classic is not None)
    if classic_left != remaining or remaining <= 0:
        return False
    return _downgrade_allowed(context, group, remaining)


def validate_online_downgrade_with_replaced_member(context: ConsumerContext, group: ConsumerGroup,
                                                   replaced_member_id: str) -> bool:
    """Kafka's validateOnlineDowngradeWithReplacedMember: a classic static member replaces the last member
    using the consumer protocol."""
    if not group.all_members_use_classic_protocol_except(replaced_member_id):
        return False
    return _downgrade_allowed(context, group, len(group.members))


def _downgrade_allowed(context: ConsumerContext, group: ConsumerGroup, remaining: int) -> bool:
    if not context.config.downgrade_enabled:
        context.log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is "
                         "disabled.", group.group_id)
        return False
    if remaining > context.config.group_max_size:
        context.log.info("Cannot downgrade consumer group %s to classic group because its group size is greater "
                         "than classic group max size.", group.group_id)
        return False
    return True


def consumer_group_tombstones(group: ConsumerGroup, replaced: tuple[str, str] | None = None) -> list:
    """Kafka's ConsumerGroup.createGroupTombstoneRecords, in its order; `replaced` (leaving id, joining id):
    createGroupTombstoneRecordsWithReplacedMember, the joining member's records deleted in its stead."""
    gid = group.group_id
    ids = [replaced[1] if replaced is not None and i == replaced[0] else i for i in group.members]
    return ([r.current_assignment_tombstone(gid, i) for i in ids] + [r.target_member_tombstone(gid, i) for i in ids]
            + [r.target_epoch_tombstone(gid)] + [r.member_subscription_tombstone(gid, i) for i in ids]
            + [r.subscription_metadata_tombstone(gid)]
            + [r.regex_tombstone(gid, regex) for regex in sorted(group.resolved_regexes)] + [r.group_epoch_tombstone(gid)])


def classic_group_of(group: ConsumerGroup, leaving: str | set[str], topics: TopicsImage, now_ms: int,
                     joining: ConsumerGroupMember | None = None) -> tuple[GroupMetadata, dict[str, bytes]]:
    """Kafka's ClassicGroup.fromConsumerGroup: Stable at the group epoch, protocol type "consumer", each
    remaining member assigned its target (in its protocol's version); `leaving`: the id (or ids) of the
    members that go; a `joining` static member takes the leaving one's place and target."""
    gone = {leaving} if isinstance(leaving, str) else leaving
    leaving_member_id = leaving if isinstance(leaving, str) else None
    classic = GroupMetadata(group.group_id, now_ms, GroupState.STABLE)
    classic.generation_id = group.group_epoch
    classic.protocol_type = "consumer"
    members = [x for x in group.members.values() if x.member_id not in gone and x.classic is not None]
    for member in members + ([joining] if joining is not None else []):
        classic.add(MemberMetadata(member.member_id, group.group_id, member.instance_id, member.client_id,
                                   member.client_host, member.rebalance_timeout_ms, member.classic.session_timeout_ms,
                                   "consumer", list(member.classic.supported_protocols)))
        if member.instance_id is not None:
            classic.add_static_member(member.instance_id, member.member_id)
    classic.protocol_name = classic.select_protocol()
    def target(mid: str) -> Assignment:
        return group.target_assignment.get(leaving_member_id if joining is not None and mid == joining.member_id
                                           else mid, {})

    assignment = {mid: assignment_to_bytes(target(mid), topics, protocol_version(cm.metadata(classic.protocol_name)))
                  for mid, cm in classic.members.items()}
    for mid, data in assignment.items():
        classic.members[mid].assignment = data
    return classic, assignment


def downgrade_records(context: ConsumerContext, group: ConsumerGroup, leaving: str | set[str],
                      joining: ConsumerGroupMember | None = None) -> list:
    """The consumer group's tombstones, then the classic group's GroupMetadata record (`leaving`: the id or
    ids of the members that go; one id when a `joining` static member replaces it)."""
    classic, assignment = classic_group_of(group, leaving, context.topics, context.clock.now_ms(), joining)
    context.log.info("[GroupId %s] Converted the consumer group to a classic group.", group.group_id)
    replaced = None if joining is None else (leaving, joining.member_id)
    return consumer_group_tombstones(group, replaced) + [group_metadata_record(classic, assignment)]


def after_downgrade(context: ConsumerContext, group: ConsumerGroup, rebalance_too: bool = True) -> None:
    """Once the classic group is replayed: its members' sessions run on the classic side, and it
    rebalances (unless a static member replaced another with the same subscription)."""
    for member_id in group.members:
        context.cancel_member_timers(group.group_id, member_id)
    classic = context.group_manager.get_group(group.group_id) if context.group_manager is not None else None
    if classic is None:
        return
    context.events.group_members(group.group_id, len(classic.members))
    rebalance = context.group_manager.rebalance
    for member in classic.all_member_metadata():
        rebalance.complete_and_schedule_next_heartbeat_expiration(classic, member)
    if rebalance_too:
        rebalance.prepare_rebalance(classic, f"Downgrade group {group.group_id} from consumer to classic.", MIGRATION)
