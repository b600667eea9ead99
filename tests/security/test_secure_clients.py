"""Acceptance: every client library runs a consumer group over SASL_SSL with SCRAM-SHA-512, and over SSL
with a client certificate (ssl.client.auth=required): two members of one group split a 4-partition
topic, and every message produced is consumed exactly once. Certificates are made by the test."""
from __future__ import annotations

import collections
import itertools

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.testkit.waiting import wait_until
from tests.broker.groups import procs
from tests.broker.groups.procs import disjoint_cover, stop_all
from tests.security.conftest import start_secure, tls_settings

PARTITIONS = 4
MESSAGES = 100
_ids = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki):
    srv = start_secure(tmp_path_factory.mktemp("secure-clients"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        **tls_settings(pki), "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "group.initial.rebalance.delay.ms": "200"})
    yield srv
    srv.stop()


def _security(kind: str, pki, srv) -> tuple[str, dict]:
    if kind == "scram":
        return srv.address("SASL_SSL"), {"protocol": "SASL_SSL", "ca": str(pki.ca), "mechanism": "SCRAM-SHA-512",
                                          "username": "bob", "password": "bob-secret"}
    alice = pki.client("CN=alice,OU=eng,O=kcoord")
    return srv.address("SSL"), {"protocol": "SSL", "ca": str(pki.ca), "cert": str(alice.cert), "key": str(alice.key)}


def _start(client: str, bootstrap: str, group: str, topic: str, name: str, sec: dict):
    if client == "kafkajs":
        if procs.NODE is None or not procs.KAFKAJS_PRESENT:
            pytest.skip("kafkajs is not installed: run `bash scripts/ensure-test-tools.sh`")
        return procs.kafkajs_consumer(bootstrap, group, topic, name, security=sec)
    if client == "kcat":
        if procs.KCAT is None:
            pytest.skip("kcat is not installed: run `bash scripts/ensure-test-tools.sh`")
        return procs.kcat_consumer(bootstrap, group, topic, name, security=sec)
    return procs.python_consumer(client, bootstrap, group, topic, name, security=sec)


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "confluent", "kafkajs", "kcat"])
@pytest.mark.parametrize("kind", ["scram", "client-cert"])
def test_consumer_group_over_tls(server, pki, client, kind):
    n = next(_ids)
    topic, group = f"secure-{n}", f"secure-group-{n}"
    admin = KafkaAdminClient(bootstrap_servers=server.address("PLAINTEXT"))
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    bootstrap, sec = _security(kind, pki, server)
    consumers = [_start(client, bootstrap, group, topic, f"{client}-{i}", sec) for i in range(2)]
    try:
        wait_until(lambda: all(c.alive for c in consumers) and disjoint_cover(
            [c.assignment for c in consumers], PARTITIONS), 90,
            "a stable group over TLS\n" + "\n".join(c.describe() for c in consumers))
        producer = KafkaProducer(bootstrap_servers=server.address("PLAINTEXT"), acks="all")
        keys = [f"k-{i}" for i in range(MESSAGES)]
        for key in keys:
            producer.send(topic, key=key.encode(), value=b"v")
        producer.flush(30)
        producer.close()
        wait_until(lambda: sum(len(c.records()) for c in consumers) >= MESSAGES, 60,
                   "every message consumed\n" + "\n".join(c.describe() for c in consumers))
        records = [r for c in consumers for r in c.records()]
        assert max(collections.Counter((p, o) for p, o, _k in records).values()) == 1
        assert sorted(k for _p, _o, k in records) == sorted(keys)
    finally:
        stop_all(consumers)


def _metric(srv, name: str, **labels) -> float:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_librdkafka_reauthenticates_while_its_group_runs(tmp_path, pki):
    """KIP-368 with a real client: given session_lifetime_ms by SaslAuthenticate v1+, librdkafka
    re-authenticates its connections (SaslHandshake + SaslAuthenticate again on the same connection) and
    the member keeps its place in the group. (A connection that sat idle past its lifetime is closed at
    its next request, as Kafka's SocketServer does; the client reconnects.)"""
    srv = start_secure(tmp_path, {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", **tls_settings(pki),
                                  "sasl.enabled.mechanisms": "SCRAM-SHA-512", "connections.max.reauth.ms": "3000",
                                  "metrics.port": "0"})
    try:
        admin = KafkaAdminClient(bootstrap_servers=srv.address("PLAINTEXT"))
        admin.create_topics([NewTopic("reauth", 2, 1)])
        admin.close()
        bootstrap, sec = _security("scram", pki, srv)
        consumer = _start("confluent", bootstrap, "reauth-group", "reauth", "reauth-0", sec)
        try:
            wait_until(lambda: consumer.assignment == [0, 1], 60, "the member owns both partitions\n"
                       + consumer.describe())
            import time

            time.sleep(10)  # three session lifetimes
            assert consumer.alive and consumer.assignment_count == 1, consumer.describe()
            handshakes = _metric(srv, "kcoord_requests_total", api="SaslHandshake", error_code="0")
            connections = _metric(srv, "kcoord_connections_opened_total", listener="SASL_SSL")
            assert handshakes >= connections + 2, (handshakes, connections)
        finally:
            stop_all([consumer])
    finally:
        srv.stop()
