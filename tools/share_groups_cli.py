"""`kcoord groups describe` for KIP-932 share groups, with the columns of Kafka's kafka-share-groups.sh
--describe: per share-partition its start offset and lag (DescribeShareGroupOffsets, 90), then the
members and what each is assigned (ShareGroupDescribe, 77; ShareGroupCommand.printMembers)."""
from __future__ import annotations

from typing import TextIO

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient, WireError
from kcoord.protocol.errors import ErrorCode

OFFSET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG")
MEMBER_COLUMNS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")


def describe_share_group(client: KafkaWireClient, group: str):
    """The ShareGroupDescribe answer for `group`, or None when it is not a share group here."""
    try:
        client.best_version(77)
    except WireError:
        return None
    (described,) = client.request(m.ShareGroupDescribeRequest(group_ids=[group],
                                                              include_authorized_operations=False)).groups
    return described if described.error_code == ErrorCode.NONE else None


def offset_rows(client: KafkaWireClient, group: str) -> list[tuple]:
    D = m.DescribeShareGroupOffsetsRequest
    (g,) = client.request(D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)])).groups
    return sorted((group, t.topic_name, p.partition_index, "-" if p.start_offset < 0 else p.start_offset,
                   "-" if p.lag < 0 else p.lag) for t in g.topics for p in t.partitions)


def member_rows(described) -> list[tuple]:
    rows = []
    for member in sorted(described.members, key=lambda mm: mm.member_id):
        parts = [(tp.topic_name, p) for tp in member.assignment.topic_partitions for p in tp.partitions]
        shown = ",".join(f"{t}:{p}" for t, p in sorted(parts)) or "-"
        rows.append((described.group_id, member.member_id, member.client_host, member.client_id, len(parts), shown))
    return rows


def print_describe(client: KafkaWireClient, described, out: TextIO, print_table) -> None:
    out.write(f"GROUP {described.group_id} (share group) STATE {described.group_state} "
              f"EPOCH {described.group_epoch} ASSIGNOR {described.assignor_name}\n\n")
    if not described.members:
        out.write(f"Share group '{described.group_id}' has no active members.\n\n")
    print_table(OFFSET_COLUMNS, offset_rows(client, described.group_id), out)
    if described.members:
        out.write("\n")
        print_table(MEMBER_COLUMNS, member_rows(described), out)
