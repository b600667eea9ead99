"""What kafka-python 3.0.12 infers of kcoord: Kafka 4.3. Its inference (kafka/protocol/broker_version_data.py,
infer_broker_version_from_api_versions) keys 4.3 on DescribeLogDirs v5 (KIP-1066's IsCordoned), and its
4.3 table differs from 4.2's in that range only; the rest of what it then assumes of a 4.3 broker is
exercised by the kafka-python admin tests (tests/broker/test_features.py, test_describe_log_dirs.py,
tests/security/test_acls_over_tcp.py, ...), which let it pick its versions itself."""
from __future__ import annotations

from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

from kcoord.protocol import messages as m
from tests.support.raw_kafka import RawKafka


def test_kafka_python_infers_kafka_4_3(kcoord_shared_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_shared_server.bootstrap, api_version=None)
    try:
        assert admin._client.check_version() == (4, 3)
        (answer,) = admin.describe_log_dirs()
        assert answer["log_dirs"][0]["is_cordoned"] is False  # read at v5
        assert admin.describe_features()["metadata.version"]["finalized"] == (30, 30)  # 4.3-IV0
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=kcoord_shared_server.bootstrap, api_version=None)
    try:
        assert consumer.config["api_version"] == (4, 3)
    finally:
        consumer.close()


def test_kcoord_serves_at_least_kafka_4_3s_ranges_where_kafka_python_knows_them(kcoord_shared_server):
    """Every API kafka-python lists for 4.3 that kcoord serves covers 4.3's range (kcoord serves no
    inter-broker API, and Produce's v0-2 as Kafka: advertised to be refused)."""
    with RawKafka(kcoord_shared_server.port) as c:
        resp = c.request(18, 3, m.ApiVersionsRequest(client_software_name="raw", client_software_version="1"))
    served = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    short = {key: (served[key], want) for key, want in BROKER_API_VERSIONS[(4, 3)].items()
             if key in served and served[key][1] < want[1]}
    assert short == {}
    assert served[35] == (1, 5)
