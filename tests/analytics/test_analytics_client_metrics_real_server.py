"""Pushed client metrics (KIP-714) in the analytics report, end to end: kcoord with its telemetry receiver on,
confluent-kafka (librdkafka) consumers with `enable.metrics.push=true` forming a group and rebalancing, then
the pipeline over the broker's data dir. Each rebalance the coordinator recorded must show its members'
own pushed metrics (org.apache.kafka.consumer.coordinator.*) from the generation it produced.

librdkafka sends its group_id and member_id as the push's resource attributes (rdkafka_telemetry_encode.c);
the receiver's export sits where Kafka hands a push to its ClientTelemetryReceiver
(server/src/main/java/org/apache/kafka/server/ClientMetricsManager.java, processPushTelemetryRequest).
"""
import os

import pyarrow.parquet as pq
import pytest

from kcoord.analytics import cli, pipeline
from kcoord.protocol.telemetry_export import EXPORT_DIR, file_name, file_seq
from kcoord.testkit.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]

GROUP, TOPIC, PARTITIONS = "telemetry-group", "telemetry-orders", 4
ON = {"kcoord.client.telemetry.enable": "true", "kcoord.client.telemetry.push.interval.ms": "200",
      "num.partitions": str(PARTITIONS)}
COORDINATOR = "org.apache.kafka.consumer.coordinator."


def rows(out, name):
    return pq.read_table(pipeline.table_dir(out, name)).to_pylist()


CONSUMER_PROTOCOL = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "100"}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_report_shows_each_members_pushed_metrics_beside_the_rebalance(kafka_broker_factory, spark, tmp_path,
                                                                           protocol):
    """Classic: JoinGroup / SyncGroup, the GroupMetadata record; consumer (KIP-848): ConsumerGroupHeartbeat,
    the group epoch record. librdkafka names its member id in its pushes under both."""
    from confluent_kafka import Consumer, Producer

    kafka_broker = kafka_broker_factory(dict(ON, **CONSUMER_PROTOCOL) if protocol == "consumer" else ON)

    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(TOPIC, b"x")
    producer.flush(10)

    def consumer(client_id):
        c = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": GROUP, "client.id": client_id,
                      "enable.metrics.push": True, "auto.offset.reset": "earliest", "group.protocol": protocol})
        c.subscribe([TOPIC])
        return c

    def pushes(client_id):
        found = kafka_broker.clients(client_id=client_id)
        return found[0]["pushes"] if found else 0

    def poll_until(consumers, condition, what):
        def step():
            for c in consumers:
                c.poll(0.05)
            return condition()
        wait_until(step, 60, what)

    c1 = consumer("c1")
    poll_until([c1], lambda: len(c1.assignment()) == PARTITIONS, "c1 to own every partition")
    c2 = consumer("c2")
    poll_until([c1, c2], lambda: len(c1.assignment()) + len(c2.assignment()) == PARTITIONS
               and c1.assignment() and c2.assignment(), "the partitions to be shared")
    seen = pushes("c1"), pushes("c2")
    poll_until([c1, c2], lambda: pushes("c1") >= seen[0] + 3 and pushes("c2") >= seen[1] + 3,
               "both members to push after the rebalance")
    c2.close()   # a third generation: c2 left
    poll_until([c1], lambda: len(c1.assignment()) == PARTITIONS, "c1 to own every partition again")
    seen = pushes("c1")
    poll_until([c1], lambda: pushes("c1") >= seen + 3, "c1 to push after the last rebalance")
    c1.close()
    kafka_broker.stop()   # a clean stop writes the export's queue
    # What a crash mid-write leaves: a torn last line (the next start writes a new file); readers skip it.
    export = kafka_broker.data_dir / EXPORT_DIR
    newest = max(n for n in os.listdir(export) if file_seq(n) is not None)
    (export / file_name(file_seq(newest) + 1)).write_text('{"timestamp": 1, "client_instance_id": "torn", "poi')

    out = str(tmp_path / "out")
    assert cli.main(["all", "--log-dirs", str(kafka_broker.data_dir), "--out", out], spark=spark) == 0

    points = rows(out, "client_metrics")
    assert "torn" not in {r["client_instance_id"] for r in points}
    for client_id in ("c1", "c2"):   # librdkafka names its group and member in every push while in the group
        mine = [r for r in points if r["client_id"] == client_id]
        assert mine and {r["group_id"] for r in mine} == {GROUP}
        assert any(r["member_id"] for r in mine) and mine[0]["client_software_name"] == "confluent-kafka-python"

    rebalances = {r["generation"]: r for r in rows(out, "rebalances") if r["group"] == GROUP}
    members, assigned = {}, {}
    for m in rows(out, "generation_members"):
        if m["group"] == GROUP:
            members.setdefault(m["generation"], {})[m["consumer_id"]] = m["client_id"]
            assigned[(m["generation"], m["client_id"])] = m["assigned_partitions"]   # the target, KIP-848
    two = next(g for g, ms in members.items() if sorted(ms.values()) == ["c1", "c2"])
    last = max(g for g, ms in members.items() if sorted(ms.values()) == ["c1"])
    assert last > two and rebalances[two]["cause"] == "member_joined" and rebalances[last]["cause"] == "member_left"

    got = {}
    for r in rows(out, "rebalance_client_metrics"):
        if r["group"] == GROUP and not r["attributes"]:
            got.setdefault((r["generation"], r["client_id"]), {})[r["metric"]] = r
    for generation in (two, last):
        for consumer_id, client_id in members[generation].items():
            pushed = got.get((generation, client_id))
            assert pushed, f"no pushed metrics of {client_id} beside generation {generation}: {sorted(got)}"
            latency = pushed[COORDINATOR + "rebalance.latency.max"]
            assert (latency["matched_by"], latency["consumer_id"]) == ("member_id", consumer_id)
            assert latency["pushes"] >= 1 and latency["first_push_delay_ms"] >= 0
            assert [latency[k] for k in ("cause", "join_ms", "reconcile_ms")] == [
                rebalances[generation][k] for k in ("cause", "join_ms", "reconcile_ms")]
    # The member the test held steady through a generation settled on what the coordinator assigned it.
    assert got[(two, "c2")][COORDINATOR + "assigned.partitions"]["last_value"] == assigned[(two, "c2")] == 2
    assert got[(last, "c1")][COORDINATOR + "assigned.partitions"]["last_value"] == PARTITIONS
    page = open(os.path.join(out, "report.html"), encoding="utf-8").read()
    section = page.split("Rebalances as their members saw them")[1].split("</section>")[0]
    assert "rebalance latency max (ms)" in section and "assigned partitions" in section
    assert "<td>c1</td>" in section and "<td>c2</td>" in section

    if protocol == "consumer":
        return
    # c2's JoinGroup began generation two's join phase and it waited through it: its own rebalance latency
    # covers the phase the coordinator recorded (both clocks count whole ms: one of slack).
    assert got[(two, "c2")][COORDINATOR + "rebalance.latency.max"]["max_value"] >= rebalances[two]["join_ms"] - 1
