"""The real server over TCP: ApiVersions negotiation, bad input, flow of requests, idle connections."""
from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import encode_request_frame
from kcoord.protocol.records import build_batch
from tests.support.raw_kafka import RawKafka

# Kafka 4.3's ranges (kafka-python's broker_version_data), but Produce from 3: the message definitions start
# there (Kafka advertises 0-2 only to refuse them).
# Produce from 0: Kafka 4 advertises v0-2 and refuses them (KAFKA-18659), see below.
ADVERTISED = {0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2),
              22: (0, 5), 23: (2, 4), 32: (1, 4), 33: (0, 2), 35: (1, 5), 37: (0, 3), 44: (0, 1), 60: (0, 2),
              24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 5), 61: (0, 0), 65: (0, 0), 66: (0, 2)}


def api_versions(c: RawKafka, version: int):
    body = m.ApiVersionsRequest(client_software_name="raw", client_software_version="1")
    return c.request(18, version, body)


def assert_healthy(port: int) -> None:
    with RawKafka(port) as c:
        resp = api_versions(c, 0)
        assert resp.error_code == ErrorCode.NONE


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_every_served_api(kcoord_shared_server, version):
    with RawKafka(kcoord_shared_server.port) as c:
        resp = api_versions(c, version)
    assert resp.error_code == ErrorCode.NONE
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    for key, versions in ADVERTISED.items():
        assert got[key] == versions


def test_api_versions_newer_than_ours_gets_unsupported_version_with_v0_body(kcoord_shared_server):
    with RawKafka(kcoord_shared_server.port) as c:
        # v5 does not exist yet: header v2 (client id, empty tagged fields) then a body we cannot know.
        cid = c.send_request(18, 5, body=b"\x05raw1\x021\x00")
        got, resp = c.read_response(18, 5, decode_version=0)
        assert got == cid
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]
        # The client falls back on the same connection, as kafka-python and librdkafka do.
        assert api_versions(c, 4).error_code == ErrorCode.NONE


def test_requests_pipelined_on_one_connection_are_answered_in_order(kcoord_shared_server):
    with RawKafka(kcoord_shared_server.port) as c:
        sent = []
        for i in range(50):
            version = i % 5
            sent.append((c.send_request(18, version, m.ApiVersionsRequest(
                client_software_name="raw", client_software_version="1")), version))
        for cid, version in sent:
            got, resp = c.read_response(18, version)
            assert got == cid and resp.error_code == ErrorCode.NONE


BAD_INPUTS = {
    "unknown api key": encode_request_frame(4242, 0, 1, "x", b""),
    "unsupported Metadata version": encode_request_frame(3, 99, 1, "x", b""),
    # Advertised (for librdkafka's compression check) but not served: SocketServer.parseRequestHeader
    # throws InvalidRequestException ("... which is not enabled") and the processor closes the channel.
    "Produce v0 (advertised, refused)": encode_request_frame(0, 0, 1, "x", b"\x00\x01\x00\x00\x03\xe8\x00\x00\x00\x00"),
    "Produce v2 (advertised, refused)": encode_request_frame(0, 2, 1, "x", b"\x00\x01\x00\x00\x03\xe8\x00\x00\x00\x00"),
    "absurd frame size": struct.pack(">i", 2**31 - 1) + b"\x00" * 16,
    "negative frame size": struct.pack(">i", -5) + b"\x00" * 16,
    "truncated header": struct.pack(">i", 3) + b"\x00\x03\x00",
    "truncated Metadata body": encode_request_frame(3, 1, 1, "x", b"\x00\x00\x00\x05\x00\x03ab"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_closes_only_that_connection(kcoord_shared_server, name):
    port = kcoord_shared_server.port
    with RawKafka(port) as bystander, RawKafka(port) as bad:
        assert api_versions(bystander, 3).error_code == ErrorCode.NONE
        bad.send_raw(BAD_INPUTS[name])
        assert bad.closed_by_peer(), f"{name}: connection not closed"
        assert api_versions(bystander, 3).error_code == ErrorCode.NONE  # same connection, still fine
    assert kcoord_shared_server.running


def test_closing_reason_is_logged(kcoord_shared_server):
    with RawKafka(kcoord_shared_server.port) as bad:
        bad.send_raw(encode_request_frame(31337, 0, 1, "x", b""))
        assert bad.closed_by_peer()
    kcoord_shared_server.wait_for_log(r"closing connection .*unknown api key 31337")


def test_failed_acks_zero_produce_closes_with_one_line_and_no_traceback(kcoord_shared_server):
    """An acks=0 Produce that fails is answered by closing the connection (the client expects no answer):
    an expected end, logged as one line with its reason, not as a handler bug with a traceback."""
    topic = f"acks0-{uuid.uuid4().hex[:12]}"  # unknown: never created
    R = m.ProduceRequest
    request = R(transactional_id=None, acks=0, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=0, records=build_batch([(b"k", b"v")]))])])
    with RawKafka(kcoord_shared_server.port) as c:
        c.send_request(0, 9, request)
        assert c.closed_by_peer()
    match = kcoord_shared_server.wait_for_log(rf"WARNING .*closing connection (\S+) .*acks=0 produce failed .*{topic}.*\n")
    text = kcoord_shared_server.log_text()
    mentions = [line for line in text.splitlines() if match.group(1) in line]  # the connection's id
    assert len(mentions) == 1, mentions  # one line about this connection, not a handler bug's
    assert not text[match.end():].startswith("Traceback"), text[match.end():][:2000]


def test_frame_above_socket_request_max_bytes_is_refused(kcoord_server_factory):
    srv = kcoord_server_factory({"socket.request.max.bytes": "1000"})
    with RawKafka(srv.port) as c:
        c.send_raw(struct.pack(">i", 1001))
        assert c.closed_by_peer()
    srv.wait_for_log(r"frame of 1001 bytes exceeds max 1000")
    assert_healthy(srv.port)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=st.binary(min_size=1, max_size=300))
def test_random_bytes_never_hurt_other_connections(kcoord_shared_server, junk):
    port = kcoord_shared_server.port
    with RawKafka(port) as bystander:
        with RawKafka(port) as fuzz:
            fuzz.send_raw(junk)
        assert api_versions(bystander, 2).error_code == ErrorCode.NONE


def test_idle_connection_is_closed_after_connections_max_idle_ms(kcoord_server_factory):
    srv = kcoord_server_factory({"connections.max.idle.ms": "300"})
    with RawKafka(srv.port) as c:
        assert api_versions(c, 0).error_code == ErrorCode.NONE
        assert c.closed_by_peer(timeout=10)
    srv.wait_for_log(r"idle for more than connections.max.idle.ms=300")


def test_each_listener_advertises_itself(kcoord_server_factory, tmp_path):
    srv = kcoord_server_factory({
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "advertised.listeners": "PLAINTEXT://localhost:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"})  # Kafka requires it
    ready = srv.wait_for_log(r"kcoord ready: listening on 127.0.0.1:(\d+), 127.0.0.1:(\d+)")
    plaintext, internal = int(ready.group(1)), int(ready.group(2))
    seen = {}
    for port in (plaintext, internal):
        with RawKafka(port) as c:
            (b,) = c.request(3, 9, m.MetadataRequest(topics=[], allow_auto_topic_creation=False)).brokers
            seen[port] = (b.host, b.port)
    assert seen == {plaintext: ("localhost", plaintext), internal: ("127.0.0.1", internal)}


def test_an_ipv4_mapped_client_address_is_named_as_its_ipv4_address():
    """A dual-stack listener's IPv4 client arrives as `::ffff:a.b.c.d`; Kafka (Java's InetAddress) names it
    `a.b.c.d`, which ACL hosts, ip quotas and DescribeGroups' client_host then compare and show."""
    from kcoord.broker.server import client_host

    assert client_host("::ffff:127.0.0.1") == "127.0.0.1"
    assert client_host("127.0.0.1") == "127.0.0.1"
    assert client_host("::1") == "::1"
    assert client_host("::ffff:7f00:1") == "::ffff:7f00:1"  # not the dotted form a socket reports for a mapped one
