"""The pipeline over a store written by the REAL kcoord server for a KIP-848 group: confluent-kafka
consumers with `group.protocol=consumer` join, leave (epoch -1) and are killed (fenced when their session
expires) while a classic kafka-python group runs beside them; the emptied group is then deleted. Each group epoch must be a generation with
its members, and each bump a rebalance with the cause the coordinator recorded; the cause inferred from
the records alone (what a Kafka broker's store offers) must agree with it as far as records can tell.
Records and the order they are written in: Kafka 4's GroupMetadataManager.consumerGroupHeartbeat."""
import collections

import pyarrow.parquet as pq
import pytest

from kcoord.analytics import cli, pipeline
from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.testkit.waiting import wait_until
from tests.broker.groups import procs
from tests.broker.groups.group_server import GROUP_TEST_OVERRIDES, start_group_server
from tests.broker.groups.procs import disjoint_cover

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPIC, PARTITIONS, GROUP, CLASSIC = "an-orders", 6, "an-kip848", "an-classic"
OVERRIDES = dict(GROUP_TEST_OVERRIDES, **{"group.consumer.heartbeat.interval.ms": "500",
                                          "group.consumer.min.heartbeat.interval.ms": "100",
                                          "group.consumer.session.timeout.ms": "6000",
                                          "group.consumer.min.session.timeout.ms": "1000",
                                          "offsets.topic.num.partitions": "4"})
# The member sets the test walks the group through, and the cause kcoord records for reaching each.
EXPECTED = [({"c1"}, "member_joined"), ({"c1", "c2"}, "member_joined"), ({"c1", "c2", "c3"}, "member_joined"),
            ({"c1", "c3"}, "member_left"), ({"c1"}, "session_timeout"), (set(), "member_left")]
# What the records alone can say for each recorded cause (left, fenced and expired look alike).
RECORDS_SAY = {"member_joined": "member_joined", "member_left": "member_removed", "session_timeout": "member_removed",
               "rebalance_timeout": "member_removed", "subscription_changed": "subscription_changed",
               "metadata_changed": "metadata_changed"}


def reconciled(server, names):
    """ConsumerGroupDescribe: the group has exactly these clients, each at the group epoch holding its target."""
    with KafkaWireClient.connect(server.bootstrap) as client:
        (g,) = client.request(m.ConsumerGroupDescribeRequest(group_ids=[GROUP], include_authorized_operations=False),
                              0).groups
    if g.error_code or {x.client_id for x in g.members} != names or g.assignment_epoch != g.group_epoch:
        return None

    def parts(a):
        return sorted((tp.topic_name, p) for tp in a.topic_partitions for p in tp.partitions)
    done = all(x.member_epoch == g.group_epoch and parts(x.assignment) == parts(x.target_assignment)
               for x in g.members)
    return (g.group_epoch,) if done else None


def delete_group(server):
    """DeleteGroups once the last member's leave emptied the group (NON_EMPTY_GROUP until then)."""
    with KafkaWireClient.connect(server.bootstrap) as client:
        (result,) = client.request(m.DeleteGroupsRequest(groups_names=[GROUP]), 2).results
    return (True,) if result.error_code == 0 else None


def settle(server, consumers, what):
    names = {c.name for c in consumers}
    wait_until(lambda: all(c.alive for c in consumers) and disjoint_cover([c.assignment for c in consumers],
                                                                          PARTITIONS), 60,
               f"{what}: disjoint assignments covering every partition\n" + "\n".join(c.describe() for c in consumers))
    return wait_until(lambda: reconciled(server, names), 30, f"{what}: every member reconciled")[0]


@pytest.fixture(scope="module")
def history(tmp_path_factory, spark):
    work = tmp_path_factory.mktemp("kip848-real-server")
    server = start_group_server(work, dict(OVERRIDES), name="kip848-analytics")
    everyone, settled = [], []      # (clients, the group epoch they reconciled at)
    try:
        server.create_topic(TOPIC, PARTITIONS)
        server.produce_keyed(TOPIC, 60)
        classic = procs.python_consumer("kafka-python", server.bootstrap, CLASSIC, TOPIC, "k1")
        everyone.append(classic)

        def start(name):
            c = procs.python_consumer("confluent", server.bootstrap, GROUP, TOPIC, name, group_protocol="consumer")
            everyone.append(c)
            return c
        c1 = start("c1")
        settled.append(({"c1"}, settle(server, [c1], "c1 alone")))
        c2 = start("c2")
        settled.append(({"c1", "c2"}, settle(server, [c1, c2], "c2 joined")))
        c3 = start("c3")
        settled.append(({"c1", "c2", "c3"}, settle(server, [c1, c2, c3], "c3 joined")))
        c2.terminate()                                        # leaves: heartbeat with epoch -1
        settled.append(({"c1", "c3"}, settle(server, [c1, c3], "c2 left")))
        c3.kill()                                             # dies: fenced when its session expires
        settled.append(({"c1"}, settle(server, [c1], "c3 expired")))
        c1.terminate()
        wait_until(lambda: delete_group(server), 30, "DeleteGroups of the emptied group")
        wait_until(lambda: classic.committed(), 60, "the classic group committed\n" + classic.describe())
        classic.terminate()
    finally:
        procs.stop_all(everyone)
        server.stop()
    out = work / "out"
    assert cli.main(["all", "--log-dirs", str(server.data_dir), "--out", str(out)], spark=spark) == 0
    return str(out), settled


def rows(out, name, group):
    got = [r for r in pq.read_table(pipeline.table_dir(out, name)).to_pylist() if r["group"] == group]
    return sorted(got, key=lambda r: (r["log_partition"], r["log_offset"]))


def test_each_group_epoch_is_a_generation_and_its_bump_a_rebalance_with_its_cause(history):
    out, _ = history
    clients = collections.defaultdict(set)
    for r in rows(out, "generation_members", GROUP):
        clients[r["generation"]].add(r["client_id"])
    rebalances = rows(out, "rebalances", GROUP)
    assert [r["generation"] for r in rebalances] == list(range(1, len(rebalances) + 1))   # every epoch, in order
    got = [(clients[r["generation"]], r["cause"]) for r in rebalances]
    changes = [got[0]] + [now for before, now in zip(got, got[1:], strict=False) if now[0] != before[0]]
    assert changes == EXPECTED, got
    for r in rebalances:
        assert r["cause_source"] == "header" and r["inferred_cause"] == RECORDS_SAY[r["cause"]], r
    assert rebalances[-1]["is_empty"]
    gens = rows(out, "generations", GROUP)
    assert {r["group_type"] for r in gens} == {"consumer"}
    # DeleteGroups wrote the group's tombstones (ConsumerGroup.createGroupTombstoneRecords): the last row.
    assert [r["tombstone"] for r in gens] == [False] * len(rebalances) + [True]


def test_settled_epochs_have_their_target_and_reconciliation(history):
    out, settled = history
    gens = {r["generation"]: r for r in rows(out, "generations", GROUP)}
    for names, epoch in settled:
        g = gens[epoch]
        members = {m["client_id"]: m for m in g["members"]}
        assert set(members) == names, (names, epoch)
        owned = [(a["topic"], a["partition"]) for x in members.values() for a in x["assignment"]]
        assert sorted(owned) == [(TOPIC, p) for p in range(PARTITIONS)]
        assert g["assignment_epoch"] == epoch and g["reconcile_ms"] is not None and g["reconcile_ms"] >= 0
        for x in members.values():       # what they held when the epoch ended is their target
            assert (x["member_epoch"], x["current_assignment"]) == (epoch, x["assignment"])


def test_the_classic_group_beside_it_keeps_its_rows(history):
    out, _ = history
    gens = rows(out, "generations", CLASSIC)
    assert gens and {r["group_type"] for r in gens} == {"classic"}
    assert rows(out, "rebalances", CLASSIC)[0]["cause"] == "initial_join"
    assert rows(out, "offset_commits", CLASSIC)


def test_the_report_shows_the_consumer_group(history):
    out, settled = history
    text = open(f"{out}/report.html", encoding="utf-8").read()
    section = text[text.index("Consumer groups (KIP-848)"):]
    assert f"<td>{CLASSIC}</td>" not in section
    row = section[section.index(f"<td>{GROUP}</td>"):]
    assert "<td>deleted</td>" in row[:row.index("</tr>")]
    assert len(settled) == 5
