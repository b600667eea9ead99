"""The export of pushed client metrics to the data dir (broker/telemetry_export.py), in process: what one line
holds, that the files stay under their cap and roll, that a restart opens a new file, that the queue is
bounded, and that nothing is written while telemetry is off. Kafka hands each accepted push to its
ClientTelemetryReceiver (ClientMetricsManager.processPushTelemetryRequest -> receiver.exportMetrics); the
export hook is called at the same point."""
from __future__ import annotations

import asyncio
import json
import os
import uuid

from kcoord.broker import telemetry_export
from kcoord.broker.client_telemetry import ClientInfo, ClientTelemetry
from kcoord.broker.telemetry_export import FILES, RollingJsonLines, TelemetryExport
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import NONE
from kcoord.protocol.telemetry_export import EXPORT_DIR, file_seq
from tests.support import otlp_encode as pb

CLIENT = ClientInfo("c1", "confluent-kafka-python", "2.16.1", "127.0.0.1", 50000)
ZERO = uuid.UUID(int=0)


def payload(value: float) -> bytes:
    return pb.metrics_data(
        pb.gauge("org.apache.kafka.consumer.coordinator.rebalance.latency.max", pb.number_point(value)),
        pb.gauge("org.apache.kafka.consumer.node.request.latency.avg", pb.number_point(2.5, {"node.id": 1})),
        resource={"group_id": "g", "member_id": "c1-abc"})


def exported_lines(log_dir: str) -> list[dict]:
    directory = os.path.join(log_dir, EXPORT_DIR)
    names = sorted(n for n in os.listdir(directory) if file_seq(n) is not None)
    return [json.loads(line) for n in names for line in open(os.path.join(directory, n), encoding="utf-8")]


def receiver(tmp_path, enabled=True):
    clock = [1_000_000]
    t = ClientTelemetry(lambda: clock[0], list, enabled=enabled, max_bytes=1 << 20, default_interval_ms=1000)
    export = TelemetryExport(str(tmp_path), 1 << 20, lambda: 1_795_000_000_000 + clock[0])
    t.on_receive = export.received
    return t, export, clock


def test_each_accepted_push_becomes_one_line_with_its_client_resource_and_points(tmp_path):
    async def scenario():
        t, export, clock = receiver(tmp_path)
        sub = t.get_subscriptions(ZERO, CLIENT)
        assert t.push(sub.client_instance_id, sub.subscription_id, False, NONE, payload(15.0), CLIENT) == ErrorCode.NONE
        assert t.push(sub.client_instance_id, sub.subscription_id, False, NONE, payload(16.0),
                      CLIENT) == ErrorCode.THROTTLING_QUOTA_EXCEEDED   # refused: not exported
        clock[0] += 1000
        assert t.push(sub.client_instance_id, sub.subscription_id, True, NONE, payload(17.0), CLIENT) == ErrorCode.NONE
        await export.flush()
        return sub
    sub = asyncio.run(scenario())
    first, last = exported_lines(str(tmp_path))
    assert first["timestamp"] == 1_795_001_000_000 and last["timestamp"] == 1_795_001_001_000
    assert {k: first[k] for k in ("client_instance_id", "client_id", "client_software_name", "client_source_address",
                                  "subscription_id", "push_interval_ms", "terminating", "resource")} == {
        "client_instance_id": str(sub.client_instance_id), "client_id": "c1",
        "client_software_name": "confluent-kafka-python", "client_source_address": "127.0.0.1",
        "subscription_id": sub.subscription_id, "push_interval_ms": 1000, "terminating": False,
        "resource": {"group_id": "g", "member_id": "c1-abc"}}
    assert [(p["name"], p["value"], p["attributes"]) for p in first["points"]] == [
        ("org.apache.kafka.consumer.coordinator.rebalance.latency.max", 15.0, {}),
        ("org.apache.kafka.consumer.node.request.latency.avg", 2.5, {"node.id": "1"})]
    assert last["terminating"] and last["points"][0]["value"] == 17.0


def test_with_telemetry_off_nothing_is_written(tmp_path):
    async def scenario():
        t, export, _ = receiver(tmp_path, enabled=False)
        t.push(uuid.uuid4(), 0, False, NONE, payload(1.0), CLIENT)
        await export.flush()
    asyncio.run(scenario())
    assert not os.path.exists(os.path.join(str(tmp_path), EXPORT_DIR))


def test_files_roll_under_the_cap_keep_the_newest_lines_and_a_restart_opens_a_new_file(tmp_path):
    directory = str(tmp_path / EXPORT_DIR)
    cap = 4000
    files = RollingJsonLines(directory, cap)
    lines = [json.dumps({"n": i, "pad": "x" * 80}) + "\n" for i in range(200)]
    for i in range(0, 200, 7):
        files.write(lines[i:i + 7])
    names = sorted(os.listdir(directory))
    assert len(names) == FILES
    sizes = [os.path.getsize(os.path.join(directory, n)) for n in names]
    assert sum(sizes) <= cap + len(lines[0]) * FILES   # each file ends at most one line past its share
    kept = [json.loads(line)["n"] for n in names for line in open(os.path.join(directory, n))]
    assert kept == list(range(200 - len(kept), 200))   # the newest, in order, none lost in between
    RollingJsonLines(directory, cap).write(["{\"n\": 200}\n"])   # a restart: a new file, the oldest goes
    after = sorted(os.listdir(directory))
    assert len(after) == FILES and after[-1] > names[-1] and names[0] not in after


def test_the_queue_is_bounded_and_counts_what_it_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(telemetry_export, "MAX_QUEUED", 3)

    async def scenario():
        export = TelemetryExport(str(tmp_path), 1 << 20, lambda: 0)
        for i in range(5):
            export.offer({"n": i})
        await export.flush()
        return export
    export = asyncio.run(scenario())
    assert (export.written, export.dropped) == (3, 2)
    assert "kcoord_client_telemetry_export_dropped_total 2" in export.prometheus_lines()
    assert [r["n"] for r in exported_lines(str(tmp_path))] == [0, 1, 2]
