"""Listeners: listeners / advertised.listeners / listener.security.protocol.map with PLAINTEXT, SSL,
SASL_PLAINTEXT and SASL_SSL at once; Kafka's PEM options; ssl.client.auth; bad settings stop the server
with one line naming the key."""
from __future__ import annotations

import pytest
from cryptography import x509

from kcoord.broker.config import BrokerConfig, ConfigError
from kcoord.broker.security.tls import rfc2253
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.security.conftest import PLAIN_JAAS, tls_settings
from tests.security.raw import plain_login, raw, scram_login

FOUR = ("PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0")


def four_listeners(pki) -> dict[str, str]:
    return {"listeners": FOUR, **tls_settings(pki), "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS}


def _metadata_broker(c) -> tuple[str, int]:
    md = c.request(3, 12, m.MetadataRequest(topics=None, allow_auto_topic_creation=False))
    (b,) = md.brokers
    return b.host, b.port


def test_four_listeners_each_advertise_themselves(secure_server_factory, pki):
    """Metadata and FindCoordinator name the listener the client came in on (KafkaApis uses the
    request's listener name: MetadataCache.getAliveBrokerNodes(listenerName))."""
    srv = secure_server_factory(four_listeners(pki))
    for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        address = srv.address(name)
        with raw(address, ca=str(pki.ca) if "SSL" in name else None) as c:
            if name == "SASL_PLAINTEXT":
                assert plain_login(c, "alice", "alice-secret").error_code == ErrorCode.NONE
            elif name == "SASL_SSL":
                assert scram_login(c, "SCRAM-SHA-512", "bob", "bob-secret").error_code == ErrorCode.NONE
            assert f"{_metadata_broker(c)[0]}:{_metadata_broker(c)[1]}" == address
            fc = c.request(10, 3, m.FindCoordinatorRequest(key="g", key_type=0))
            assert (fc.error_code, f"{fc.host}:{fc.port}") in ((ErrorCode.NONE, address),
                                                              (ErrorCode.COORDINATOR_NOT_AVAILABLE, ":-1"))


def test_custom_listener_names_through_the_protocol_map(secure_server_factory, pki):
    """Any listener name works once listener.security.protocol.map gives it a protocol; settings under
    listener.name.<name>. apply to that listener only."""
    srv = secure_server_factory({
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
        "listener.name.external.ssl.keystore.type": "PEM",
        "listener.name.external.ssl.keystore.certificate.chain": pki.server_cert.read_text(),
        "listener.name.external.ssl.keystore.key": pki.server_key.read_text(),
    })
    with raw(srv.address("INTERNAL")) as c:
        assert f"{':'.join(map(str, _metadata_broker(c)))}" == srv.address("INTERNAL")
    with raw(srv.address("EXTERNAL"), ca=str(pki.ca)) as c:
        assert f"{':'.join(map(str, _metadata_broker(c)))}" == srv.address("EXTERNAL")


def test_client_auth_required_refuses_a_client_without_certificate(secure_server_factory, pki):
    srv = secure_server_factory({"listeners": "SSL://127.0.0.1:0", **tls_settings(pki, "required")})
    alice = pki.client("CN=alice,OU=eng,O=kcoord")
    with raw(srv.address("SSL"), ca=str(pki.ca), cert=str(alice.cert), key=str(alice.key)) as c:
        assert c.request(18, 3, m.ApiVersionsRequest(client_software_name="t", client_software_version="1")
                         ).error_code == ErrorCode.NONE
    with pytest.raises(OSError):  # the handshake (TLS 1.3: the first read) fails without a certificate
        with raw(srv.address("SSL"), ca=str(pki.ca)) as c:
            c.request(18, 3, m.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    srv.wait_for_log(r"TLS handshake failed")


def test_client_auth_requested_serves_both(secure_server_factory, pki):
    srv = secure_server_factory({"listeners": "SSL://127.0.0.1:0", **tls_settings(pki, "requested")})
    alice = pki.client("CN=alice,O=kcoord")
    for cert in (alice, None):
        with raw(srv.address("SSL"), ca=str(pki.ca), cert=cert and str(cert.cert), key=cert and str(cert.key)) as c:
            assert _metadata_broker(c)[1] == int(srv.address("SSL").split(":")[1])


_N = x509.NameOID
_PY = {_N.COMMON_NAME: "commonName", _N.ORGANIZATIONAL_UNIT_NAME: "organizationalUnitName",
       _N.ORGANIZATION_NAME: "organizationName", _N.COUNTRY_NAME: "countryName"}


@pytest.mark.parametrize("attributes", [
    [(_N.COUNTRY_NAME, "DE"), (_N.ORGANIZATION_NAME, "kcoord"), (_N.ORGANIZATIONAL_UNIT_NAME, "eng"),
     (_N.COMMON_NAME, "alice")],
    [(_N.ORGANIZATION_NAME, "x"), (_N.COMMON_NAME, "a,b+c")],
    [(_N.COMMON_NAME, " bob ")],
])
def test_certificate_subject_as_rfc2253(attributes):
    """Kafka's default principal is User:<X500Principal.getName()>, RFC 2253: last RDN first, special
    characters escaped -- what cryptography's RFC 4514 text gives for these names."""
    name = x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes])
    as_python = tuple(((_PY[a.oid], a.value),) for a in name)  # what SSLSocket.getpeercert() gives
    assert rfc2253(as_python) == name.rfc4514_string()


@pytest.mark.parametrize("raw_props, key", [
    ({"listeners": "SSL://:9093"}, "ssl.keystore.location"),
    ({"listeners": "SSL://:9093", "ssl.keystore.location": "/x.pem"}, "ssl.keystore.type"),
    ({"listeners": "CLIENT://:9093"}, "listener.security.protocol.map"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map"),
    ({"listeners": "SASL_PLAINTEXT://:9093"}, "sasl.enabled.mechanisms"),
    ({"listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "PLAIN"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "PLAIN",
      "sasl.jaas.config": "PlainLoginModule sometimes;"}, "sasl.jaas.config"),
    ({"listeners": "SSL://:9093", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/x.pem",
      "ssl.client.auth": "required"}, "ssl.truststore.location"),
    ({"listener.name.plaintext.no.such": "1"}, "listener.name.plaintext.no.such"),
    ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "authorizer.class.name"),
    ({"super.users": "alice"}, "super.users"),
    ({"ssl.client.auth": "maybe"}, "ssl.client.auth"),
])
def test_bad_security_settings_name_the_key(raw_props, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig(raw_props)


def test_unreadable_keystore_stops_the_server_naming_the_key(tmp_path):
    from tests.support.kcoord_server import KcoordServer, ServerFailed

    srv = KcoordServer(tmp_path, {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                  "ssl.keystore.location": str(tmp_path / "missing.pem")})
    with pytest.raises(ServerFailed):
        srv.start(timeout=20)
    assert "ssl.keystore.location" in srv.log_text()


def test_client_certificate_is_the_principal(secure_server_factory, pki):
    """SslPrincipalMapper DEFAULT: an ACL for User:CN=alice,OU=eng,O=kcoord lets exactly that certificate in."""
    from tests.security.test_acls_over_tcp import join

    srv = secure_server_factory({"listeners": "SSL://127.0.0.1:0", **tls_settings(pki, "required"),
                                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                 "super.users": "User:CN=admin,O=kcoord"})
    admin, alice, mallory = (pki.client(s) for s in ("CN=admin,O=kcoord", "CN=alice,OU=eng,O=kcoord",
                                                     "CN=mallory,OU=eng,O=kcoord"))

    def connect(cert):
        return raw(srv.address("SSL"), ca=str(pki.ca), cert=str(cert.cert), key=str(cert.key))

    with connect(admin) as c:
        R = m.CreateAclsRequest
        resp = c.request(30, 3, R(creations=[R.AclCreation(
            resource_type=3, resource_name="cert-group", resource_pattern_type=3, principal="User:CN=alice,OU=eng,O=kcoord",
            host="*", operation=3, permission_type=3)]))
        assert [r.error_code for r in resp.results] == [ErrorCode.NONE]
    with connect(alice) as c:
        assert join(c, "cert-group").error_code == ErrorCode.NONE
    with connect(mallory) as c:
        assert join(c, "cert-group").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_encrypted_pem_key_with_ssl_key_password(tmp_path, pki):
    """Kafka's PEM keystore may hold an encrypted PKCS#8 key, opened with ssl.key.password; a wrong
    password stops the server naming the key."""
    from cryptography.hazmat.primitives import serialization

    from kcoord.broker.security.tls import server_context

    key = serialization.load_pem_private_key(pki.server_key.read_bytes(), password=None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"key-pw"))
    store = tmp_path / "encrypted.pem"
    store.write_bytes(encrypted + pki.server_cert.read_bytes())
    props = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.location": str(store)}
    assert server_context(BrokerConfig({**props, "ssl.key.password": "key-pw"}), "SSL").verify_mode == 0
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        server_context(BrokerConfig({**props, "ssl.key.password": "wrong"}), "SSL")


def test_tls_requests_larger_than_a_read_and_pipelined_are_answered_in_order(secure_server_factory, pki):
    """The TLS listener reads decrypted data at most a record's worth at a time (broker/security/
    tls_accept.py): a request of many TLS records, sent behind a small one and ahead of another before any
    answer is read, is read in many chunks and every answer comes back whole and in order (Kafka: one
    response per request, in request order -- SocketServer's Processor mutes a channel until its response
    is sent)."""
    srv = secure_server_factory({"listeners": "SSL://127.0.0.1:0", **tls_settings(pki)})
    names = [f"no-such-topic-{i:05d}-{'x' * 40}" for i in range(3000)]  # ~190 KiB of request
    with raw(srv.address("SSL"), ca=str(pki.ca)) as c:
        big = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                                allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        versions = m.ApiVersionsRequest(client_software_name="t", client_software_version="1")
        sent = [(18, 3, c.send_request(18, 3, versions)), (3, 12, c.send_request(3, 12, big)),
                (18, 3, c.send_request(18, 3, versions))]
        answers = [c.read_response(key, version) for key, version, _cid in sent]
    assert [cid for cid, _answer in answers] == [cid for _key, _version, cid in sent]
    assert answers[0][1].error_code == answers[2][1].error_code == ErrorCode.NONE
    topics = answers[1][1].topics
    assert [t.name for t in topics] == names
    assert {t.error_code for t in topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
