"""`kcoord groups`: list, describe, delete consumer groups and reset their offsets, like Kafka's
kafka-consumer-groups tool, built on the server's own admin APIs over the wire:

  list                    ListGroups
  describe <group>        FindCoordinator + DescribeGroups (assignments decoded as
                          ConsumerProtocolAssignment) + OffsetFetch + ListOffsets (latest); a KIP-848
                          consumer group: ConsumerGroupDescribe, with a table of members (epochs,
                          current and target assignment)
  delete <group>          DeleteGroups
  reset-offsets <group>   DescribeGroups (the group must be Empty or Dead) + Metadata + ListOffsets,
                          then OffsetCommit with generation -1 (an admin commit); dry run unless --execute
  expire-member, fire-timers, run-retention   timer control through the admin endpoint (tools/admin_cli.py)

Any node of a cluster will do, as for kafka-consumer-groups (and a comma-separated list, tried in turn):
`list` asks every broker Metadata names (Kafka's AdminClient.listConsumerGroups: each broker lists the
groups it coordinates), a group's requests go to the coordinator FindCoordinator names for it, and
ListOffsets to each partition's leader (KafkaAdminClient.listOffsets).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.tools import consumer_groups_cli
from kcoord.tools.client_login import add_command_config, use_command_config
from kcoord.tools.tool_run import run_tool

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
LATEST = -1
EARLIEST = -2
INACTIVE_STATES = ("Empty", "Dead")
DESCRIBE_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID")


class GroupsError(Exception):
    """A failure to report to the user (exit status 1)."""


def _check(error_code: int, what: str) -> None:
    if error_code:
        raise GroupsError(f"{what} failed: {ErrorCode(error_code).name}")


@dataclass
class PartitionRow:
    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str = "-"
    host: str = "-"
    client_id: str = "-"

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return max(0, self.log_end_offset - self.current_offset)

    def cells(self) -> tuple[str, ...]:
        def show(v):
            return "-" if v is None else str(v)
        return (self.group, self.topic, str(self.partition), show(self.current_offset),
                show(self.log_end_offset), show(self.lag), self.consumer_id, self.host, self.client_id)


# ---------------------------------------------------------------------------------------------- wire
def connect_any(bootstrap: str) -> KafkaWireClient:
    """A connection to the first of the comma-separated `bootstrap` addresses that accepts one."""
    addresses = [a.strip() for a in bootstrap.split(",") if a.strip()]
    for address in addresses[:-1]:
        try:
            return KafkaWireClient.connect(address)
        except OSError:
            continue
    return KafkaWireClient.connect(addresses[-1] if addresses else bootstrap)


def coordinator_client(bootstrap: str, group: str = "") -> KafkaWireClient:
    """A connection to the coordinator of `group` (FindCoordinator through any of `bootstrap`)."""
    client = connect_any(bootstrap)
    bootstrap = client.address
    resp = client.request(m.FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group]))
    if resp.coordinators:
        coordinator = resp.coordinators[0]
        _check(coordinator.error_code, "FindCoordinator")
        host, port = coordinator.host, coordinator.port
    else:
        _check(resp.error_code, "FindCoordinator")
        host, port = resp.host, resp.port
    if f"{host}:{port}" == bootstrap:
        return client
    client.close()
    return KafkaWireClient.connect(f"{host}:{port}")


def brokers(client: KafkaWireClient) -> dict[int, str]:
    """node id -> host:port of every broker Metadata names."""
    resp = client.request(m.MetadataRequest(topics=[], allow_auto_topic_creation=False), min(client.best_version(3), 9))
    return {b.node_id: f"{b.host}:{b.port}" for b in resp.brokers}


def list_groups(client: KafkaWireClient) -> list[tuple[str, str, str]]:
    """[(group_id, state, protocol_type)] from every broker (each lists the groups it coordinates)."""
    groups: dict[str, tuple[str, str, str]] = {}
    for address in brokers(client).values():
        with KafkaWireClient.connect(address) as node:
            resp = node.request(m.ListGroupsRequest(states_filter=[], types_filter=[]))
        _check(resp.error_code, f"ListGroups on {address}")
        for g in resp.groups:
            groups.setdefault(g.group_id, (g.group_id, g.group_state or "", g.protocol_type))
    return sorted(groups.values())


def describe_group(client: KafkaWireClient, group: str, must_exist: bool = True):
    """The DescribedGroup; a group that does not exist is an error, or state Dead if not `must_exist`."""
    resp = client.request(m.DescribeGroupsRequest(groups=[group], include_authorized_operations=False))
    described = resp.groups[0]
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:  # v6+; older versions say state Dead
        described.error_code, described.group_state = ErrorCode.NONE, "Dead"
    _check(described.error_code, "DescribeGroups")
    if must_exist and described.group_state == "Dead":
        raise GroupsError(f"Consumer group '{group}' does not exist.")
    return described


def committed_offsets(client: KafkaWireClient, group: str) -> dict[tuple[str, int], int]:
    version = min(client.best_version(9), 9)  # v10 names topics by id only; we show names
    if version >= 8:
        request = m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group, topics=None)], require_stable=False)
        resp = client.request(request, version)
        result = resp.groups[0]
        _check(result.error_code, "OffsetFetch")
        topics = result.topics
    else:
        resp = client.request(m.OffsetFetchRequest(group_id=group, topics=None), version)
        _check(resp.error_code, "OffsetFetch")
        topics = resp.topics
    return {(t.name, p.partition_index): p.committed_offset
            for t in topics for p in t.partitions if p.committed_offset >= 0}


def leaders(client: KafkaWireClient, topics) -> dict[tuple[str, int], str]:
    """(topic, partition) -> host:port of its leader, from Metadata."""
    request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(topics)],
                                allow_auto_topic_creation=False)
    resp = client.request(request, min(client.best_version(3), 9))
    where = {b.node_id: f"{b.host}:{b.port}" for b in resp.brokers}
    return {(t.name, p.partition_index): where[p.leader_id] for t in resp.topics for p in t.partitions
            if p.leader_id in where}


def list_offsets(client: KafkaWireClient, partitions, timestamp: int) -> dict[tuple[str, int], int]:
    """Each partition's offset at `timestamp`, asked of its leader (a partition without one: an error)."""
    partitions = list(partitions)
    led_by = leaders(client, {t for t, _p in partitions})
    here = client.address
    by_leader: dict[str, list[tuple[str, int]]] = {}
    for tp in partitions:
        by_leader.setdefault(led_by.get(tp, here), []).append(tp)
    out: dict[tuple[str, int], int] = {}
    for address, tps in by_leader.items():
        if address == here:
            out.update(_list_offsets(client, tps, timestamp))
        else:
            with KafkaWireClient.connect(address) as leader:
                out.update(_list_offsets(leader, tps, timestamp))
    return out


def _list_offsets(client: KafkaWireClient, partitions, timestamp: int) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    topic_type = m.ListOffsetsRequest.ListOffsetsTopic
    partition_type = topic_type.ListOffsetsPartition
    version = min(client.best_version(2), 7)
    request = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        topic_type(name=t, partitions=[partition_type(partition_index=p, timestamp=timestamp,
                                                      current_leader_epoch=-1, max_num_offsets=1)
                                       for p in sorted(ps)])
        for t, ps in sorted(by_topic.items())])
    resp = client.request(request, version)
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            _check(p.error_code, f"ListOffsets {t.name}-{p.partition_index}")
            out[(t.name, p.partition_index)] = p.offset
    return out


def topic_partitions(client: KafkaWireClient, topic: str) -> list[int]:
    version = min(client.best_version(3), 9)
    request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
                                allow_auto_topic_creation=False)
    resp = client.request(request, version)
    for t in resp.topics:
        if t.name == topic:
            _check(t.error_code, f"Metadata for {topic}")
            return sorted(p.partition_index for p in t.partitions)
    raise GroupsError(f"topic {topic} not found")


def assigned_partitions(assignment: bytes) -> list[tuple[str, int]]:
    if not assignment:
        return []
    obj, _version = m.decode_versioned("ConsumerProtocolAssignment", assignment)
    return [(tp.topic, p) for tp in obj.assigned_partitions for p in tp.partitions]


def describe_rows(client: KafkaWireClient, group: str, consumer_group=None) -> tuple[str, list[PartitionRow]]:
    """(state, rows): one row per partition the group is assigned or has committed. `consumer_group`: its
    ConsumerGroupDescribe answer if it is a KIP-848 group."""
    owners: dict[tuple[str, int], tuple[str, str, str]] = {}
    if consumer_group is not None:
        described = consumer_group
        owners = consumer_groups_cli.owners(consumer_group)
    else:
        described = describe_group(client, group)
    if consumer_group is None and described.protocol_type == "consumer":
        for member in described.members:
            for tp in assigned_partitions(member.member_assignment):
                owners[tp] = (member.member_id, member.client_host, member.client_id)
    committed = committed_offsets(client, group)
    partitions = sorted(set(owners) | set(committed))
    ends = list_offsets(client, partitions, LATEST) if partitions else {}
    rows = []
    for tp in partitions:
        consumer_id, host, client_id = owners.get(tp, ("-", "-", "-"))
        rows.append(PartitionRow(group, tp[0], tp[1], committed.get(tp), ends.get(tp),
                                 consumer_id, host, client_id))
    return described.group_state, rows


def delete_group(client: KafkaWireClient, group: str) -> None:
    resp = client.request(m.DeleteGroupsRequest(groups_names=[group]))
    _check(resp.results[0].error_code, f"Deleting group '{group}'")


def reset_offsets(client: KafkaWireClient, group: str, topic: str, target: str, offset: int | None,
                  execute: bool) -> dict[tuple[str, int], int]:
    described = describe_group(client, group, must_exist=False)  # resetting may create the group
    consumer_group = consumer_groups_cli.describe_consumer_group(client, group)  # KIP-848: DescribeGroups says Dead
    if consumer_group is not None:
        described = consumer_group
    if execute and described.group_state not in INACTIVE_STATES:
        raise GroupsError(f"Assignments can only be reset if the group '{group}' is inactive, "
                          f"but the current state is {described.group_state}.")
    partitions = [(topic, p) for p in topic_partitions(client, topic)]
    earliest = list_offsets(client, partitions, EARLIEST)
    latest = list_offsets(client, partitions, LATEST)
    if target == "earliest":
        plan = earliest
    elif target == "latest":
        plan = latest
    else:  # like Kafka: a requested offset outside the log is clamped to its bounds
        plan = {tp: min(max(offset, earliest[tp]), latest[tp]) for tp in partitions}
    if execute:
        commit_offsets(client, group, plan)
    return plan


def commit_offsets(client: KafkaWireClient, group: str, offsets: dict[tuple[str, int], int]) -> None:
    topic_type = m.OffsetCommitRequest.OffsetCommitRequestTopic
    partition_type = topic_type.OffsetCommitRequestPartition
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(partition_type(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=""))
    request = m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        retention_time_ms=-1, topics=[topic_type(name=t, partitions=ps) for t, ps in by_topic.items()])
    resp = client.request(request, min(client.best_version(8), 9))
    for t in resp.topics:
        for p in t.partitions:
            _check(p.error_code, f"OffsetCommit {t.name}-{p.partition_index}")


# ---------------------------------------------------------------------------------------------- CLI
def print_table(header, rows, out) -> None:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    for row in (header, *rows):
        out.write(" ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() + "\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcoord groups", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP,
                        help=f"host:port of a running kcoord (default {DEFAULT_BOOTSTRAP})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    listing = sub.add_parser("list", help="list consumer groups")
    listing.add_argument("--state", action="store_true", help="show each group's state too")
    describe = sub.add_parser("describe", help="members, offsets and lag of a group")
    describe.add_argument("group")
    delete = sub.add_parser("delete", help="delete an Empty group and its offsets")
    delete.add_argument("group")
    reset = sub.add_parser("reset-offsets", help="move an inactive group's offsets for a topic")
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true")
    where.add_argument("--to-latest", action="store_true")
    where.add_argument("--to-offset", type=int)
    reset.add_argument("--execute", action="store_true", help="commit the new offsets (default: dry run)")
    # Accept the option after the subcommand too, as kafka-consumer-groups users type it.
    for p in (listing, describe, delete, reset):
        p.add_argument("--bootstrap-server", default=argparse.SUPPRESS)
    add_command_config(parser, listing, describe, delete, reset)
    from kcoord.tools.admin_cli import add_timer_commands

    add_timer_commands(sub)  # expire-member, fire-timers, run-retention: through the admin endpoint
    return parser


def run(args, out) -> None:
    with coordinator_client(args.bootstrap_server, getattr(args, "group", "")) as client:
        if args.command == "list":
            groups = list_groups(client)
            if args.state:
                print_table(("GROUP", "STATE"), [(g, s) for g, s, _t in groups], out)
            else:
                for group, _state, _type in groups:
                    out.write(group + "\n")
        elif args.command == "describe":
            consumer_group = consumer_groups_cli.describe_consumer_group(client, args.group)
            state, rows = describe_rows(client, args.group, consumer_group)
            if consumer_group is not None:
                out.write(consumer_groups_cli.header_line(consumer_group) + "\n")
            if state in INACTIVE_STATES:
                out.write(f"Consumer group '{args.group}' has no active members.\n\n")
            print_table(DESCRIBE_COLUMNS, [r.cells() for r in rows], out)
            if consumer_group is not None and consumer_group.members:
                out.write("\n")
                print_table(consumer_groups_cli.member_columns(consumer_group),
                            consumer_groups_cli.member_rows(consumer_group), out)
        elif args.command == "delete":
            delete_group(client, args.group)
            out.write(f"Deletion of requested consumer groups ('{args.group}') was successful.\n")
        else:
            target = "earliest" if args.to_earliest else "latest" if args.to_latest else "offset"
            plan = reset_offsets(client, args.group, args.topic, target, args.to_offset, args.execute)
            print_table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                        [(args.group, t, p, o) for (t, p), o in sorted(plan.items())], out)
            if not args.execute:
                out.write("\n(dry run: add --execute to commit these offsets)\n")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    from kcoord.tools.admin_cli import TIMER_COMMANDS, timers_main

    if args.command in TIMER_COMMANDS:
        return timers_main(args)
    def action() -> None:
        use_command_config(args)
        run(args, sys.stdout)

    return run_tool(args.bootstrap_server, action, GroupsError)


if __name__ == "__main__":
    sys.exit(main())
