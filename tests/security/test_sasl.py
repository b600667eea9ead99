"""SaslHandshake (17) / SaslAuthenticate (36) over TCP at every version, PLAIN and SCRAM-SHA-256/512, the
pre-authentication gate, failures (Kafka's error, then the connection closes) and re-authentication
(KIP-368). Behaviour from Kafka's SaslServerAuthenticator (handleKafkaRequest, handleSaslToken,
ReauthInfo), PlainSaslServer.evaluateResponse and ScramSaslServer.evaluateResponse."""
from __future__ import annotations

import struct
import time

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.security.conftest import PLAIN_JAAS, tls_settings
from tests.security.raw import ScramClient, authenticate, handshake, plain_login, raw, scram_login

MECHS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


@pytest.fixture(scope="module")
def sasl_server(tmp_path_factory, pki):
    from tests.security.conftest import start_secure

    srv = start_secure(tmp_path_factory.mktemp("sasl"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", **tls_settings(pki),
        "sasl.enabled.mechanisms": MECHS, "sasl.jaas.config": PLAIN_JAAS})
    yield srv
    srv.stop()


def _address(srv):
    return srv.address("SASL_PLAINTEXT")


def _metadata(c):
    return c.request(3, 9, m.MetadataRequest(topics=None, allow_auto_topic_creation=False))


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_at_every_version(sasl_server, mechanism, version):
    with raw(_address(sasl_server)) as c:
        assert c.request(18, 3, m.ApiVersionsRequest(client_software_name="t", client_software_version="1")
                         ).error_code == ErrorCode.NONE
        final = scram_login(c, mechanism, "bob", "bob-secret", version)
        assert final.error_code == ErrorCode.NONE
        assert _metadata(c).brokers


@pytest.mark.parametrize("version", [0, 1, 2])
def test_plain_login_at_every_version(sasl_server, version):
    with raw(_address(sasl_server)) as c:
        resp = plain_login(c, "alice", "alice-secret", version)
        assert (resp.error_code, resp.auth_bytes) == (ErrorCode.NONE, b"")
        assert _metadata(c).brokers


def test_plain_over_tls(sasl_server, pki):
    with raw(sasl_server.address("SASL_SSL"), ca=str(pki.ca)) as c:
        assert plain_login(c, "admin", "admin-secret").error_code == ErrorCode.NONE
        assert _metadata(c).brokers


def test_handshake_v0_then_bare_tokens(sasl_server):
    """SaslHandshake v0: the tokens follow as bare size-prefixed frames, answered the same way."""
    with raw(_address(sasl_server)) as c:
        resp = handshake(c, "SCRAM-SHA-512", version=0)
        assert (resp.error_code, sorted(resp.mechanisms)) == (ErrorCode.NONE, sorted(MECHS.split(",")))
        client = ScramClient("SCRAM-SHA-512", "carol", "carol-secret")
        c.send_raw(struct.pack(">i", len(client.first())) + client.first())
        server_first = c.read_frame()
        final = client.final(server_first)
        c.send_raw(struct.pack(">i", len(final)) + final)
        assert c.read_frame().startswith(b"v=")
        assert _metadata(c).brokers


def test_requests_before_authentication_close_the_connection(sasl_server):
    """Only ApiVersions and SaslHandshake before the handshake ("Unexpected Kafka request of type
    METADATA during SASL handshake"), only SaslAuthenticate after it."""
    with raw(_address(sasl_server)) as c:
        c.send_request(3, 9, m.MetadataRequest(topics=None, allow_auto_topic_creation=False))
        assert c.closed_by_peer()
    with raw(_address(sasl_server)) as c:
        assert handshake(c, "PLAIN").error_code == ErrorCode.NONE
        c.send_request(3, 9, m.MetadataRequest(topics=None, allow_auto_topic_creation=False))
        assert c.closed_by_peer()
    sasl_server.wait_for_log("during SASL authentication")


@pytest.mark.parametrize("mechanism, user, password, message", [
    ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
    ("PLAIN", "nobody", "x", "Authentication failed: Invalid username or password"),
    ("SCRAM-SHA-512", "bob", "wrong", "Authentication failed during authentication due to invalid "
                                      "credentials with SASL mechanism SCRAM-SHA-512"),
])
def test_wrong_password_answers_then_closes(sasl_server, mechanism, user, password, message):
    with raw(_address(sasl_server)) as c:
        if mechanism == "PLAIN":
            resp = plain_login(c, user, password)
        else:
            resp = scram_login(c, mechanism, user, password)
        assert (resp.error_code, resp.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message)
        assert c.closed_by_peer()


def test_unknown_scram_user_does_not_say_so(sasl_server):
    """ScramSaslServer throws a SaslException for an unknown user: the client gets the fixed message."""
    with raw(_address(sasl_server)) as c:
        assert handshake(c, "SCRAM-SHA-256").error_code == ErrorCode.NONE
        resp = authenticate(c, ScramClient("SCRAM-SHA-256", "mallory", "x").first())
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "mallory" not in resp.error_message
        assert c.closed_by_peer()


def test_unknown_mechanism_answers_the_enabled_ones_then_closes(sasl_server):
    with raw(_address(sasl_server)) as c:
        resp = handshake(c, "GSSAPI")
        assert resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert sorted(resp.mechanisms) == sorted(MECHS.split(","))
        assert c.closed_by_peer()
    sasl_server.wait_for_log("unsupported SASL mechanism 'GSSAPI'")


@pytest.mark.parametrize("token", [b"", b"\0\0\0\0", b"n,,garbage", b"\xff\xfe", b"p=tls-unique,,n=bob,r=x"])
def test_malformed_tokens_fail_and_close(sasl_server, token):
    with raw(_address(sasl_server)) as c:
        mechanism = "PLAIN" if token.count(b"\0") else "SCRAM-SHA-256"
        assert handshake(c, mechanism).error_code == ErrorCode.NONE
        resp = authenticate(c, token)
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert c.closed_by_peer()


def test_authenticate_after_success_is_illegal_state(sasl_server):
    """KafkaApis.handleSaslAuthenticateRequest: ILLEGAL_SASL_STATE; the connection stays."""
    with raw(_address(sasl_server)) as c:
        assert plain_login(c, "alice", "alice-secret").error_code == ErrorCode.NONE
        assert authenticate(c, b"\0alice\0alice-secret").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert _metadata(c).brokers


def test_sasl_apis_on_a_plaintext_listener(kcoord_server):
    with raw(kcoord_server.bootstrap) as c:
        assert handshake(c, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert authenticate(c, b"x").error_code == ErrorCode.ILLEGAL_SASL_STATE


@pytest.fixture
def reauth_server(secure_server_factory):
    return secure_server_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": MECHS,
                                  "sasl.jaas.config": PLAIN_JAAS, "connections.max.reauth.ms": "1500"})


def test_session_lifetime_and_expiry(reauth_server):
    """KIP-368: SaslAuthenticate v1+ carries session_lifetime_ms = connections.max.reauth.ms; a request on
    an expired session closes the connection (SocketServer: "Disconnecting expired channel")."""
    with raw(_address(reauth_server)) as c:
        resp = scram_login(c, "SCRAM-SHA-512", "bob", "bob-secret", version=1)
        assert resp.session_lifetime_ms == 1500
        assert _metadata(c).brokers
        time.sleep(1.7)
        c.send_request(3, 9, m.MetadataRequest(topics=None, allow_auto_topic_creation=False))
        assert c.closed_by_peer()
    reauth_server.wait_for_log("SASL session expired")


def test_reauthentication_extends_the_session(reauth_server):
    with raw(_address(reauth_server)) as c:
        assert scram_login(c, "SCRAM-SHA-512", "bob", "bob-secret").session_lifetime_ms == 1500
        for _ in range(3):
            time.sleep(1.0)
            assert scram_login(c, "SCRAM-SHA-512", "bob", "bob-secret").error_code == ErrorCode.NONE
            assert _metadata(c).brokers


def test_reauthentication_cannot_change_principal(reauth_server):
    with raw(_address(reauth_server)) as c:
        assert scram_login(c, "SCRAM-SHA-512", "bob", "bob-secret").error_code == ErrorCode.NONE
        resp = scram_login(c, "SCRAM-SHA-512", "carol", "carol-secret")
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert resp.error_message == "Cannot change principals during re-authentication from User.bob: User.carol"
        assert c.closed_by_peer()


def test_v0_clients_are_not_expired(reauth_server):
    """A client that only spoke SaslAuthenticate v0 cannot learn the lifetime: it is not held to it."""
    with raw(_address(reauth_server)) as c:
        assert scram_login(c, "SCRAM-SHA-512", "bob", "bob-secret", version=0).error_code == ErrorCode.NONE
        time.sleep(1.7)
        assert _metadata(c).brokers


def test_final_nonce_with_the_client_nonce_repeated_is_accepted(sasl_server):
    """librdkafka before 2.6.1 (kcat on Debian: 2.0.2) sends r=<client nonce><server's r>; Kafka accepts a
    final nonce that ends with the server's (ScramSaslServer.evaluateResponse: endsWith, since 3.8.1)."""
    with raw(_address(sasl_server)) as c:
        assert handshake(c, "SCRAM-SHA-512").error_code == ErrorCode.NONE
        client = ScramClient("SCRAM-SHA-512", "bob", "bob-secret")
        first = authenticate(c, client.first())
        resp = authenticate(c, client.final(first.auth_bytes, echo_prefix=client.nonce))
        assert resp.error_code == ErrorCode.NONE
        assert _metadata(c).brokers
    with raw(_address(sasl_server)) as c:  # a nonce that does not end with the server's fails
        assert handshake(c, "SCRAM-SHA-512").error_code == ErrorCode.NONE
        client = ScramClient("SCRAM-SHA-512", "bob", "bob-secret")
        first = authenticate(c, client.first())
        tampered = first.auth_bytes.replace(b",s=", b"x,s=", 1)
        assert authenticate(c, client.final(tampered)).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert c.closed_by_peer()


def test_secrets_are_never_described(sasl_server):
    """DescribeConfigs of this broker (node 1; "" would be the cluster-default dynamic configs) answers
    PASSWORD-type settings (sasl.jaas.config...) with a null value and
    is_sensitive, as Kafka's ConfigHelper does; `kcoord config` hides them."""
    R = m.DescribeConfigsRequest
    with raw(_address(sasl_server)) as c:
        assert plain_login(c, "alice", "alice-secret").error_code == ErrorCode.NONE
        resp = c.request(32, 4, R(resources=[R.DescribeConfigsResource(resource_type=4, resource_name="1",
                                                                         configuration_keys=["sasl.jaas.config"])],
                                  include_synonyms=True, include_documentation=False))
    (entry,) = resp.results[0].configs
    assert (entry.value, entry.is_sensitive) == (None, True)
    assert all(s.value is None for s in entry.synonyms)
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "kcoord.tools", "config", "--override", f"sasl.jaas.config={PLAIN_JAAS}"],
                         capture_output=True, text=True, timeout=30).stdout
    assert "sasl.jaas.config=[hidden]" in out and "alice-secret" not in out


def test_reauthentication_cannot_change_mechanism(reauth_server):
    """SaslServerAuthenticator.ReauthInfo.saslMechanismUnchanged: the handshake is answered, the first token
    then closes the connection without an answer (REAUTH_BAD_MECHANISM)."""
    with raw(_address(reauth_server)) as c:
        assert scram_login(c, "SCRAM-SHA-512", "bob", "bob-secret").error_code == ErrorCode.NONE
        assert handshake(c, "PLAIN").error_code == ErrorCode.NONE
        c.send_request(36, 2, m.SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        assert c.sock.recv(100) == b""  # closed, nothing answered
    reauth_server.wait_for_log("not supported for re-authentication of mechanism 'SCRAM-SHA-512'")
