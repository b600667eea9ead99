"""Scenarios for tests/broker/test_every_advertised_version.py: the security APIs at every advertised
version, against a server with a SASL listener and an authorizer (the plaintext listener's ANONYMOUS is a
super user there, so the ACL and SCRAM admin APIs answer without error)."""
from __future__ import annotations

import hashlib
import os

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.security.conftest import PLAIN_JAAS, SecureServer, add_scram_users, secure_server
from tests.security.raw import authenticate, handshake, raw

OVERRIDES = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
             "sasl.jaas.config": PLAIN_JAAS,
             "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             "super.users": "User:ANONYMOUS;User:admin"}


def start(workdir) -> SecureServer:
    srv = secure_server(workdir, OVERRIDES, name="every-version-secure")
    add_scram_users(srv.data_dir)
    return srv.start()


def _call(env, key: int, version: int, body, listener: str = "PLAINTEXT"):
    from tests.broker.test_every_advertised_version import call

    with raw(env["secure"].address(listener)) as c:
        return call(c, key, version, body)


def sasl_handshake(c, v, env):
    with raw(env["secure"].address("SASL_PLAINTEXT")) as s:
        return handshake(s, "PLAIN", version=v)


def sasl_authenticate(c, v, env):
    with raw(env["secure"].address("SASL_PLAINTEXT")) as s:
        assert handshake(s, "PLAIN").error_code == ErrorCode.NONE
        return authenticate(s, b"\0alice\0alice-secret", version=v)


def _creation(name: str):
    return m.CreateAclsRequest.AclCreation(resource_type=3, resource_name=name, resource_pattern_type=3,
                                           principal="User:alice", host="*", operation=3, permission_type=3)


def create_acls(c, v, env):
    return _call(env, 30, v, m.CreateAclsRequest(creations=[_creation(f"created-v{v}")]))


def describe_acls(c, v, env):
    assert create_acls(c, 3, env).results[0].error_code == ErrorCode.NONE
    resp = _call(env, 29, v, m.DescribeAclsRequest(resource_type_filter=3, resource_name_filter="created-v3",
                                                   pattern_type_filter=3, principal_filter=None, host_filter=None,
                                                   operation=1, permission_type=1))
    assert [r.resource_name for r in resp.resources] == ["created-v3"]
    return resp


def delete_acls(c, v, env):
    name = f"deleted-v{v}"
    assert _call(env, 30, 3, m.CreateAclsRequest(creations=[_creation(name)])).results[0].error_code == 0
    R = m.DeleteAclsRequest
    resp = _call(env, 31, v, R(filters=[R.DeleteAclsFilter(resource_type_filter=3, resource_name_filter=name,
                                                           pattern_type_filter=3, principal_filter=None,
                                                           host_filter=None, operation=1, permission_type=1)]))
    assert [a.resource_name for a in resp.filter_results[0].matching_acls] == [name]
    return resp


def describe_user_scram_credentials(c, v, env):
    R = m.DescribeUserScramCredentialsRequest
    resp = _call(env, 50, v, R(users=[R.UserName(name="bob")]))
    assert {i.mechanism for i in resp.results[0].credential_infos} == {1, 2}
    return resp


def alter_user_scram_credentials(c, v, env):
    R = m.AlterUserScramCredentialsRequest
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", salt, 4096)
    return _call(env, 51, v, R(deletions=[], upsertions=[R.ScramCredentialUpsertion(
        name=f"every-v{v}", mechanism=2, iterations=4096, salt=salt, salted_password=salted)]))


SCENARIOS = {17: sasl_handshake, 36: sasl_authenticate, 29: describe_acls, 30: create_acls, 31: delete_acls,
             50: describe_user_scram_credentials, 51: alter_user_scram_credentials}
