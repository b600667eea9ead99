"""kafka-python's KafkaAdminClient lists, describes and deletes groups and lists their offsets against
us; `kcoord groups` shows the same numbers and resets offsets of an inactive group."""
from __future__ import annotations

import os
import subprocess
import sys

from kafka import KafkaAdminClient
from kafka.structs import TopicPartition

from kcoord.testkit.waiting import wait_until
from tests.broker.groups import procs
from tests.broker.groups.procs import ROOT, committed_max, disjoint_cover

PARTITIONS = 3
TOPIC, GROUP = "admin-topic", "admin-group"


def kcoord_groups(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "kcoord.tools", "groups", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60, env=env, cwd=str(ROOT))


def describe_table(bootstrap: str, group: str) -> list[dict[str, str]]:
    out = kcoord_groups(bootstrap, "describe", group)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP"))
    header = lines[start].split()
    assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                      "CONSUMER-ID", "HOST", "CLIENT-ID"]
    return [dict(zip(header, line.split(), strict=True)) for line in lines[start + 1:]]


def test_admin_client_and_kcoord_groups_agree(server):
    server.create_topic(TOPIC, PARTITIONS)
    server.produce_keyed(TOPIC, 30)
    ends = server.end_offsets(TOPIC, PARTITIONS)
    consumers = [procs.python_consumer("kafka-python", server.bootstrap, GROUP, TOPIC, f"adm{i}")
                 for i in range(2)]
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="kcoord-admin-test")
    try:
        wait_until(lambda: disjoint_cover([c.assignment for c in consumers], PARTITIONS)
                   and committed_max(consumers) == ends, 60,
                   "a stable group that committed everything\n" + "\n".join(c.describe() for c in consumers))

        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[GROUP]["protocol_type"] == "consumer" and listed[GROUP]["group_state"] == "Stable"
        described = admin.describe_groups([GROUP])[GROUP]
        assert described["group_state"] == "Stable"
        assert described["protocol_type"] == "consumer" and described["protocol_data"] == "roundrobin"
        owners = {}
        for member in described["members"]:
            assert member["member_metadata"]["topics"] == [TOPIC]
            for tp in member["member_assignment"]["assigned_partitions"]:
                owners.update(dict.fromkeys(tp["partitions"], member["member_id"]))
        assert sorted(owners) == list(range(PARTITIONS))
        offsets = admin.list_group_offsets({GROUP: None})[GROUP]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == ends

        rows = describe_table(server.bootstrap, GROUP)
        assert {int(r["PARTITION"]): int(r["CURRENT-OFFSET"]) for r in rows} == ends
        assert {int(r["PARTITION"]): int(r["LOG-END-OFFSET"]) for r in rows} == ends
        assert {r["LAG"] for r in rows} == {"0"}
        assert {int(r["PARTITION"]): r["CONSUMER-ID"] for r in rows} == owners

        refused = kcoord_groups(server.bootstrap, "reset-offsets", GROUP, "--topic", TOPIC,
                                "--to-earliest", "--execute")
        assert refused.returncode == 1 and "inactive" in refused.stderr
    finally:
        procs.stop_all(consumers)

    try:
        wait_until(lambda: admin.describe_groups([GROUP])[GROUP]["group_state"] == "Empty", 30, "an Empty group")
        server.produce_keyed(TOPIC, 12, prefix="later-")
        new_ends = server.end_offsets(TOPIC, PARTITIONS)
        rows = describe_table(server.bootstrap, GROUP)
        assert {int(r["PARTITION"]): int(r["LAG"]) for r in rows} == {
            p: new_ends[p] - ends[p] for p in range(PARTITIONS)}
        assert {r["CONSUMER-ID"] for r in rows} == {"-"}

        reset = kcoord_groups(server.bootstrap, "reset-offsets", GROUP, "--topic", TOPIC,
                              "--to-earliest", "--execute")
        assert reset.returncode == 0, reset.stderr
        offsets = admin.list_group_offsets({GROUP: [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]})[GROUP]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == dict.fromkeys(range(PARTITIONS), 0)
        to_offset = kcoord_groups(server.bootstrap, "reset-offsets", GROUP, "--topic", TOPIC,
                                  "--to-offset", "2", "--execute")
        assert to_offset.returncode == 0, to_offset.stderr
        assert {int(r["PARTITION"]): int(r["CURRENT-OFFSET"]) for r in describe_table(
            server.bootstrap, GROUP)} == {p: min(2, new_ends[p]) for p in range(PARTITIONS)}

        fresh = kcoord_groups(server.bootstrap, "reset-offsets", "fresh-group", "--topic", TOPIC,
                              "--to-latest", "--execute")  # a group that does not exist yet
        assert fresh.returncode == 0, fresh.stderr
        assert {int(r["PARTITION"]): int(r["CURRENT-OFFSET"])
                for r in describe_table(server.bootstrap, "fresh-group")} == new_ends

        assert GROUP in kcoord_groups(server.bootstrap, "list").stdout.split()
        assert admin.delete_groups([GROUP]) == {GROUP: "OK"}
        assert GROUP not in {g["group_id"] for g in admin.list_groups()}
        assert GROUP not in kcoord_groups(server.bootstrap, "list").stdout.split()
        gone = kcoord_groups(server.bootstrap, "delete", GROUP)
        assert gone.returncode == 1 and "GROUP_ID_NOT_FOUND" in gone.stderr
    finally:
        admin.close()
