"""controller_mutation_rate (KIP-599) at the wire, one kcoord over TCP: strict versions refuse a topic with
THROTTLING_QUOTA_EXCEEDED once the client's token bucket is below zero, older versions accept everything and
only throttle; both answer with the throttle time.

Kafka's side: core/src/main/scala/kafka/server/ControllerApis.scala handleCreateTopics /
handleCreatePartitions / handleDeleteTopics (quotas.controllerMutation.newQuotaFor with strictSinceVersion 6 /
3 / 5, then RequestHandlerHelper.sendResponseMaybeThrottleWithControllerQuota), metadata/src/main/java/org/
apache/kafka/controller/ReplicationControlManager.java createTopic / createPartitions / deleteTopic
(context.applyPartitionChangeQuota with the partitions created, added or deleted, after the other checks),
core/src/main/scala/kafka/server/ControllerMutationQuotaManager.scala (Strict- / Permissive-
ControllerMutationQuota, throttleTimeMs = -tokens / quota). With `controller.quota.window.num=1` the bucket
holds one second's worth: at 1 partition a second, a burst of 1.
"""
from __future__ import annotations

import pytest

from kcoord.protocol import messages as m
from tests.support.raw_kafka import RawKafka

THROTTLED = 89
MESSAGE = "The throttling quota has been exceeded."
ONE_WINDOW = {"controller.quota.window.num": "1"}


def call(port: int, key: int, version: int, body, client_id: str):
    with RawKafka(port, client_id=client_id) as c:  # a connection each: a throttled one is muted
        return c.request(key, version, body)


def set_rate(port: int, client_id: str, rate: float) -> None:
    R = m.AlterClientQuotasRequest
    resp = call(port, 49, 1, R(validate_only=False, entries=[R.EntryData(
        entity=[R.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[R.OpData(key="controller_mutation_rate", value=rate, remove=False)])]), "setup")
    assert [e.error_code for e in resp.entries] == [0]


def create(port: int, version: int, client_id: str, topics: dict[str, int], validate_only: bool = False):
    R = m.CreateTopicsRequest
    return call(port, 19, version, R(timeout_ms=10_000, validate_only=validate_only, topics=[
        R.CreatableTopic(name=name, num_partitions=n, replication_factor=1, assignments=[], configs=[])
        for name, n in topics.items()]), client_id)


def delete(port: int, version: int, client_id: str, names: list[str]):
    return call(port, 20, version, m.DeleteTopicsRequest(topic_names=names, timeout_ms=10_000), client_id)


def grow(port: int, version: int, client_id: str, counts: dict[str, int]):
    R = m.CreatePartitionsRequest
    return call(port, 37, version, R(timeout_ms=10_000, validate_only=False, topics=[
        R.CreatePartitionsTopic(name=name, count=n, assignments=None) for name, n in counts.items()]), client_id)


def outcome(results) -> dict:
    return {r.name: (r.error_code, r.error_message) for r in results}


@pytest.mark.kcoord(overrides=ONE_WINDOW)
def test_create_topics_is_strict_from_v6_and_permissive_before(kafka_broker):
    port = kafka_broker.port
    set_rate(port, "strict-admin", 1.0)
    set_rate(port, "old-admin", 1.0)
    free = create(port, 7, "free-admin", {"free-a": 50, "free-b": 50})       # no quota: no throttle
    assert free.throttle_time_ms == 0 and [t.error_code for t in free.topics] == [0, 0]

    # v6+: a full bucket takes any one topic (tokens 1 - 10 = -9), the next is refused
    strict = create(port, 6, "strict-admin", {"big": 10, "small": 1})
    assert outcome(strict.topics) == {"big": (0, None), "small": (THROTTLED, MESSAGE)}
    assert 5000 <= strict.throttle_time_ms <= 9000                           # -(-9) / 1 a second, less elapsed
    # a refused topic was not created; an invalid one costs nothing and keeps its own error
    again = create(port, 7, "strict-admin", {"big": 1, "small": 1})
    assert outcome(again.topics) == {"big": (36, "Topic 'big' already exists."), "small": (THROTTLED, MESSAGE)}

    # v5: everything is created, the response is throttled (tokens 1 - 11 = -10)
    permissive = create(port, 5, "old-admin", {"old-big": 10, "old-small": 1})
    assert [t.error_code for t in permissive.topics] == [0, 0]
    assert 5000 <= permissive.throttle_time_ms <= 10_000
    listed = call(port, 3, 12, m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False), "free-admin")
    assert {"big", "old-big", "old-small"} <= {t.name for t in listed.topics}
    assert "small" not in {t.name for t in listed.topics}


@pytest.mark.kcoord(overrides=ONE_WINDOW)
def test_validate_only_is_charged_as_kraft_charges_it(kafka_broker):
    """ReplicationControlManager.createTopics runs createTopic (and its quota) before the validate_only branch
    drops the records: a validated topic costs its partitions like a created one."""
    port = kafka_broker.port
    set_rate(port, "validator", 1.0)
    first = create(port, 7, "validator", {"v1": 5}, validate_only=True)
    assert outcome(first.topics) == {"v1": (0, None)} and first.throttle_time_ms == 0
    second = create(port, 7, "validator", {"v2": 1}, validate_only=True)
    assert outcome(second.topics) == {"v2": (THROTTLED, MESSAGE)} and second.throttle_time_ms > 0
    assert [t.error_code for t in create(port, 7, "free", {"v1": 1, "v2": 1}).topics] == [0, 0]  # none created


@pytest.mark.kcoord(overrides=ONE_WINDOW)
def test_delete_topics_and_create_partitions_charge_the_partitions_deleted_and_added(kafka_broker):
    port = kafka_broker.port
    create(port, 7, "setup", {"d1": 4, "d2": 1, "d3": 4, "d4": 1, "g1": 1, "g2": 1, "g3": 1, "g4": 1})
    for client in ("deleter", "old-deleter", "grower", "old-grower"):
        set_rate(port, client, 1.0)

    strict = delete(port, 5, "deleter", ["d1", "d2"])                     # 4 partitions: tokens -3
    assert outcome(strict.responses) == {"d1": (0, None), "d2": (THROTTLED, MESSAGE)}
    assert strict.throttle_time_ms > 0
    permissive = delete(port, 4, "old-deleter", ["d3", "d4"])
    assert [r.error_code for r in permissive.responses] == [0, 0] and permissive.throttle_time_ms > 0

    strict = grow(port, 3, "grower", {"g1": 5, "g2": 2})                   # 4 added: tokens -3
    assert outcome(strict.results) == {"g1": (0, None), "g2": (THROTTLED, MESSAGE)}
    assert strict.throttle_time_ms > 0
    permissive = grow(port, 2, "old-grower", {"g3": 5, "g4": 2})
    assert [r.error_code for r in permissive.results] == [0, 0] and permissive.throttle_time_ms > 0
    listed = call(port, 3, 12, m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False), "setup")
    partitions = {t.name: len(t.partitions) for t in listed.topics if not t.name.startswith("__")}
    assert partitions == {"d2": 1, "g1": 5, "g2": 1, "g3": 5, "g4": 2}
