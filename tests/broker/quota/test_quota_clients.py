"""Describe/AlterClientQuotas from a real admin client: @platformatic/kafka (tests/js/client_quotas.mjs),
which kafka-configs-like tools in Node use; then the quotas it set are enforced on a consumer's fetches
(consumer_byte_rate: a throttled fetch is answered empty with its throttle time, KafkaApis.handleFetchRequest
fetchContext.getThrottledResponse)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.records import build_batch
from tests.support.raw_kafka import RawKafka

NODE = shutil.which("node")
JS = os.path.join(os.path.dirname(__file__), "..", "..", "js")


@pytest.mark.skipif(NODE is None or not os.path.isdir(os.path.join(JS, "node_modules", "@platformatic")),
                    reason="node and tests/js/node_modules (make test installs them) are needed")
def test_platformatic_admin_alters_and_describes_client_quotas(kafka_broker):
    run = subprocess.run([NODE, "client_quotas.mjs", kafka_broker.bootstrap_servers], cwd=JS, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert [e["errorCode"] for e in out["altered"]] == [0, 0]
    [entry] = out["described"]
    assert entry["entity"] == [{"entityType": "client-id", "entityName": "js-app"}]
    assert {v["key"]: v["value"] for v in entry["values"]} == {"producer_byte_rate": 1048576,
                                                               "consumer_byte_rate": 2097152}
    [default] = out["defaults"]
    assert default["entity"] == [{"entityType": "user", "entityName": None}]
    assert default["values"] == [{"key": "request_percentage", "value": 50}]
    refused = json.dumps(out["refused"])
    assert "producer_byte_rate cannot be a fractional value." in refused, refused


def test_a_fetch_above_its_consumer_byte_rate_is_answered_empty_with_its_throttle_time(kafka_broker):
    port = kafka_broker.port
    R = m.AlterClientQuotasRequest
    with RawKafka(port) as c:
        c.send_request(49, 1, R(validate_only=False, entries=[R.EntryData(
            entity=[R.EntityData(entity_type="client-id", entity_name=None)],
            ops=[R.OpData(key="consumer_byte_rate", value=1000.0, remove=False)])]))
        c.read_frame()
        T = m.CreateTopicsRequest.CreatableTopic
        c.send_request(19, 7, m.CreateTopicsRequest(topics=[T(name="fq", num_partitions=1, replication_factor=1,
                                                              assignments=[], configs=[])], timeout_ms=5000,
                                                    validate_only=False))
        c.read_frame()
        P = m.ProduceRequest
        batch = build_batch([(None, b"v" * 20_000)], base_offset=0)
        c.send_request(0, 9, P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name="fq", partition_data=[P.PartitionProduceData(index=0, records=batch)])]))
        c.read_frame()

    def fetch(c):
        F = m.FetchRequest
        c.send_request(1, 12, F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                                topics=[F.FetchTopic(topic="fq", partitions=[F.FetchPartition(
                                    partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                    log_start_offset=-1, partition_max_bytes=1 << 20)])]))
        return m.response_codec(1, 12).decode(c.read_frame(), 5)[0]

    with RawKafka(port) as c:
        first = fetch(c)     # 20 kB at 1 kB/s: answered empty, throttled for about 10 s of excess
        assert first.throttle_time_ms > 0 and first.responses == []
