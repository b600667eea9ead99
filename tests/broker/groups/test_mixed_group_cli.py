"""`kcoord groups describe` on a group mid-migration: one kafka-python member (classic protocol, JoinGroup) and
one confluent-kafka member (`group.protocol=consumer`) in one consumer group. The member table carries Kafka's
UPGRADED column, from ConsumerGroupDescribe v1's MemberType (KIP-1099, ConsumerGroupMember's
asConsumerGroupDescribeMember: 0 classic, 1 consumer) as Kafka's ConsumerGroupCommand.printMembers prints it
(tools/src/main/java/org/apache/kafka/tools/consumer/group/ConsumerGroupCommand.java): only when the group has
members of both protocols, "true" for one using the consumer protocol, "false" for a classic one."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kcoord.testkit.waiting import wait_until
from kcoord.tools import consumer_groups_cli
from tests.broker.groups import procs
from tests.broker.groups.group_server import start_group_server
from tests.broker.groups.test_admin_and_cli import kcoord_groups
from tests.broker.groups.test_consumer_protocol import OVERRIDES

PARTITIONS = 4


@pytest.fixture
def server(tmp_path):
    srv = start_group_server(tmp_path, dict(OVERRIDES), name="mixed-cli")
    yield srv
    srv.stop()


def member_table(stdout: str) -> list[dict[str, str]]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP") and "CONSUMER-ID" in line
                 and "CURRENT-EPOCH" in line)
    header = lines[start].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[start + 1:]]


def test_describe_marks_each_members_protocol(server):
    topic, group = "mixed-cli", "mixed-cli-group"
    server.create_topic(topic, PARTITIONS)
    classic = procs.python_consumer("kafka-python", server.bootstrap, group, topic, "kp-classic")
    everyone = [classic]
    try:
        wait_until(lambda: classic.alive and classic.assignment, 60, "the kafka-python member assigned\n"
                   + classic.describe())
        modern = procs.python_consumer("confluent", server.bootstrap, group, topic, "ck-consumer",
                                       group_protocol="consumer")
        everyone.append(modern)

        def both_assigned():
            return all(c.alive and c.assignment for c in everyone) and not (
                set(classic.assignment) & set(modern.assignment))

        wait_until(both_assigned, 90, "both members assigned\n" + "\n".join(c.describe() for c in everyone))
        out = kcoord_groups(server.bootstrap, "describe", group)
        assert out.returncode == 0, out.stderr
        rows = {row["CLIENT-ID"]: row for row in member_table(out.stdout)}
        assert set(rows) == {"kp-classic", "ck-consumer"}, out.stdout
        assert rows["kp-classic"]["UPGRADED"] == "false", out.stdout
        assert rows["ck-consumer"]["UPGRADED"] == "true", out.stdout
    finally:
        procs.stop_all(everyone)


def _described(*member_types):
    members = [SimpleNamespace(member_id=f"m{i}", client_host="/h", client_id=f"c{i}", member_epoch=3,
                               member_type=t, assignment=SimpleNamespace(topic_partitions=[]),
                               target_assignment=SimpleNamespace(topic_partitions=[]))
               for i, t in enumerate(member_types)]
    return SimpleNamespace(group_id="g", assignment_epoch=3, members=members)


def test_the_column_shows_only_for_a_group_of_both_protocols():
    """printMembers: hasMigrationMember = hasClassicMember && hasConsumerMember; an unknown MemberType (-1, as v0
    answers) prints MISSING_COLUMN_VALUE ("-")."""
    for types in [(1, 1), (0, 0), (-1, 1), ()]:
        described = _described(*types)
        assert consumer_groups_cli.member_columns(described) == consumer_groups_cli.MEMBER_COLUMNS, types
        assert all(len(row) == len(consumer_groups_cli.MEMBER_COLUMNS)
                   for row in consumer_groups_cli.member_rows(described))
    described = _described(0, 1, -1)
    assert consumer_groups_cli.member_columns(described)[-1] == "UPGRADED"
    assert [row[-1] for row in consumer_groups_cli.member_rows(described)] == ["false", "true", "-"]
