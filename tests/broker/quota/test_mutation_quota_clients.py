"""controller_mutation_rate (KIP-599) with real admin clients against one kcoord.

- kafka-python 3's KafkaAdminClient sends CreateTopics v7, where the quota is strict (ControllerApis.
  handleCreateTopics: newQuotaFor(request, strictSinceVersion = 6)): the topics past the client's burst come
  back THROTTLING_QUOTA_EXCEEDED and `create_topics` raises ThrottlingQuotaExceededError (it raises the first
  topic error; raise_errors=False shows them per topic). kafka-python then pauses the node for the throttle
  time and fails requests to it meanwhile (NodeNotReadyError "Node paused"); it does not retry by itself,
  so the application retries the refused topics, as Kafka's Java admin client does internally (KIP-599's
  `retries` on THROTTLING_QUOTA_EXCEEDED).
- confluent-kafka 2.16 (librdkafka) sends CreateTopics v4, below the strict versions: every topic is created
  (PermissiveControllerMutationQuota) and the throttle reaches the application through throttle_cb only;
  librdkafka never sees THROTTLING_QUOTA_EXCEEDED from kcoord or Kafka for CreateTopics.

With `controller.quota.window.num=1` and 2 partitions a second, a client's burst is 2 partitions.
"""
from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import errors as Errors
from kafka.admin import KafkaAdminClient

from kcoord.testkit.waiting import wait_until
from tests.broker.quota.test_mutation_quota_wire import set_rate

ONE_WINDOW = {"controller.quota.window.num": "1"}
THROTTLED = Errors.ThrottlingQuotaExceededError.errno


@pytest.mark.kcoord(overrides=ONE_WINDOW)
def test_kafka_python_admin_gets_throttling_quota_exceeded_and_a_retry_paces_it(kafka_broker):
    set_rate(kafka_broker.port, "kp-admin", 2.0)
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers, client_id="kp-admin")
    try:
        wanted = {f"kp{i}": {"num_partitions": 3, "replication_factor": 1} for i in range(4)}
        with pytest.raises(Errors.ThrottlingQuotaExceededError):
            admin.create_topics(wanted)
        # the first topic fit the full bucket (2 - 3 = -1); the others were refused, not created
        listed = wait_until(lambda: _try(admin.list_topics), 30, "the node's throttle to end")
        assert {t for t in listed if not t.startswith("__")} == {"kp0"}

        refused = {"kp1", "kp2", "kp3"}
        throttled_answers = 0

        def retry() -> bool:  # the refused topics again, as an application (or the Java admin client) retries
            nonlocal throttled_answers
            result = _try(lambda: admin.create_topics({t: wanted[t] for t in sorted(refused)}, raise_errors=False))
            for topic in (result or {}).get("topics", []):
                if topic["error_code"] == 0:
                    refused.discard(topic["name"])
                elif topic["error_code"] == THROTTLED:
                    throttled_answers += 1
                    assert topic["error_message"] == "The throttling quota has been exceeded."
            return not refused

        wait_until(retry, 60, "every topic to be created in the end")
        assert throttled_answers > 0           # the quota paced the retries
        assert {t for t in admin.list_topics() if not t.startswith("__")} == set(wanted)
    finally:
        admin.close()


def _try(call):
    """kafka-python fails requests to a node it paused for a throttle: None until the pause is over."""
    try:
        return call()
    except Errors.KafkaError:
        return None


@pytest.mark.kcoord(overrides=ONE_WINDOW)
def test_confluent_kafka_admin_is_served_permissively_and_told_through_throttle_cb(kafka_broker):
    set_rate(kafka_broker.port, "ck-admin", 2.0)
    throttles: list[float] = []
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers, "client.id": "ck-admin",
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    futures = admin.create_topics([NewTopic(f"ck{i}", 3, 1) for i in range(4)], request_timeout=30)
    for future in futures.values():
        future.result()                        # CreateTopics v4: every topic is created
    wait_until(lambda: admin.poll(0.1) >= 0 and throttles, 30, "throttle_cb to fire")
    assert throttles[0] > 0                    # 12 partitions on a burst of 2: 5 s at 2 a second, less elapsed
    assert {f"ck{i}" for i in range(4)} <= set(admin.list_topics(timeout=10).topics)
