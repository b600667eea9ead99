"""`kcoord groups describe` for KIP-848 consumer groups: ConsumerGroupDescribe (69) gives each member's
epoch and its current and target assignment (Kafka's kafka-consumer-groups --describe --members
--verbose columns), and who owns which partition for the offsets table. A group with members of both
protocols (online migration) gets Kafka's UPGRADED column: "true" for a member using the consumer
protocol, "false" for a classic one, "-" when the server does not say (v1's MemberType; Kafka's
ConsumerGroupCommand.printMembers shows the column only for such a group)."""
from __future__ import annotations

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient, WireError
from kcoord.protocol.errors import ErrorCode

MEMBER_COLUMNS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                  "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT")


def describe_consumer_group(client: KafkaWireClient, group: str):
    """The ConsumerGroupDescribe answer for `group`, or None when the server has no such consumer group
    (a classic group, none at all, or a server without the API)."""
    try:
        client.best_version(69)
    except WireError:
        return None
    resp = client.request(m.ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
    described = resp.groups[0]
    return described if described.error_code == ErrorCode.NONE else None


def owners(described) -> dict[tuple[str, int], tuple[str, str, str]]:
    """(topic, partition) -> (member id, host, client id) of its current owner."""
    out = {}
    for member in described.members:
        for tp in member.assignment.topic_partitions:
            for p in tp.partitions:
                out[(tp.topic_name, p)] = (member.member_id, member.client_host, member.client_id)
    return out


def _show(assignment) -> str:
    parts = [f"{tp.topic_name}:{','.join(map(str, tp.partitions))}" for tp in assignment.topic_partitions]
    return ";".join(parts) or "-"


# ConsumerGroupDescribe v1's MemberType (KIP-1099); -1 (v0, or not said): unknown
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1
_UPGRADED = {CLASSIC_MEMBER: "false", CONSUMER_MEMBER: "true"}


def _migrating(described) -> bool:
    """Members of both protocols (Kafka's hasClassicMember && hasConsumerMember)."""
    types = {getattr(mm, "member_type", -1) for mm in described.members}
    return CLASSIC_MEMBER in types and CONSUMER_MEMBER in types


def member_columns(described) -> tuple[str, ...]:
    return MEMBER_COLUMNS + (("UPGRADED",) if _migrating(described) else ())


def member_rows(described) -> list[tuple[str, ...]]:
    migrating = _migrating(described)
    rows = []
    for mm in sorted(described.members, key=lambda x: x.member_id):
        count = sum(len(tp.partitions) for tp in mm.assignment.topic_partitions)
        row = (described.group_id, mm.member_id, mm.client_host, mm.client_id, str(count),
               str(mm.member_epoch), _show(mm.assignment), str(described.assignment_epoch),
               _show(mm.target_assignment))
        rows.append(row + ((_UPGRADED.get(getattr(mm, "member_type", -1), "-"),) if migrating else ()))
    return rows


def header_line(described) -> str:
    return (f"Consumer group '{described.group_id}' ({described.group_state}): group epoch "
            f"{described.group_epoch}, assignment epoch {described.assignment_epoch}, "
            f"assignor {described.assignor_name}\n")
