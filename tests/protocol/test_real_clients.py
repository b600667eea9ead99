"""Real clients parse what our headers, framing and codecs produce: a tiny server (127.0.0.1, port 0)
answers ApiVersions and Metadata, and librdkafka (confluent-kafka) and kafka-python list its brokers.
ApiVersions responses use header v0 and flexible Metadata responses header v1 -- a mistake in either
makes the clients fail to bootstrap."""
from __future__ import annotations

import socketserver
import threading

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.framing import FrameSplitter
from kcoord.protocol.headers import decode_request_header, encode_response_frame

API_VERSIONS, METADATA = 18, 3
# ApiVersions capped at v2 so a client opening with v3 exercises the KIP-511 fallback below.
SERVED = {API_VERSIONS: (0, 2), METADATA: (0, 12)}


def _answer(hdr, body, port: int):
    key, version = hdr.api_key, hdr.api_version
    if key == API_VERSIONS and version > SERVED[key][1]:
        # KIP-511: answer an unknown ApiVersions version with a v0 body saying what we support.
        version = 0
        response = m.ApiVersionsResponse(error_code=35)
    elif key == API_VERSIONS:
        response = m.ApiVersionsResponse()
    else:
        response = m.MetadataResponse(
            brokers=[m.MetadataResponse.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=port)],
            cluster_id="kcoord-test", controller_id=1, topics=[])
        m.request_codec(key, version).decode(body, hdr.body_offset)   # the request must parse too
    if key == API_VERSIONS:
        # Sorted by key, as Kafka sends it.
        response.api_keys = [m.ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                             for k, (lo, hi) in sorted(SERVED.items())]
    return encode_response_frame(hdr.correlation_id, key, version,
                                 m.response_codec(key, version).encode(response))


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        splitter = FrameSplitter()
        port = self.server.server_address[1]
        while chunk := self.request.recv(65536):
            for frame in splitter.feed(chunk):
                hdr = decode_request_header(frame)
                self.server.seen.append((hdr.api_key, hdr.api_version))
                self.request.sendall(_answer(hdr, frame, port))


@pytest.fixture
def server():
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.seen = []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_librdkafka_bootstraps_against_our_codecs(server):
    confluent_kafka = pytest.importorskip("confluent_kafka.admin")
    port = server.server_address[1]
    admin = confluent_kafka.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                                         "broker.address.family": "v4"})
    md = admin.list_topics(timeout=10)
    assert list(md.brokers) == [1] and md.brokers[1].port == port
    assert md.cluster_id == "kcoord-test"
    assert (METADATA, 12) in server.seen        # a flexible request header v2 was parsed
    # librdkafka opens with ApiVersions v3, parses our v0 "unsupported" answer (header v0, v0 body)
    # and retries with v0.
    assert server.seen[:2] == [(API_VERSIONS, 3), (API_VERSIONS, 0)]


def test_kafka_python_bootstraps_against_our_codecs(server):
    from kafka import KafkaAdminClient
    port = server.server_address[1]
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=5000)
    try:
        assert [b.node_id for b in admin._client.cluster.brokers()] == [1]
    finally:
        admin.close()
    assert any(key == API_VERSIONS for key, _ in server.seen)

