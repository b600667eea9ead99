"""SCRAM credentials managed with `kcoord users` (offline into the store, as `kafka-storage format
--add-scram`; online through AlterUserScramCredentials / DescribeUserScramCredentials, also from
confluent-kafka's admin client), and `kcoord groups` as a super user over SASL_SSL (--command-config, as
Kafka's tools)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kcoord.protocol import messages as m
from tests.security.conftest import secure_server, tls_settings
from tests.security.raw import raw, scram_login
from tests.security.test_acls_over_tcp import commit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def kcoord(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "kcoord.tools", *args], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)])), cwd=ROOT)
    assert not check or result.returncode == 0, result.stderr
    return result


def command_config(tmp_path, pki, user: str, password: str):
    path = tmp_path / f"{user}.properties"
    path.write_text("security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={pki.ca}\nsasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{password}";\n')
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki):
    workdir = tmp_path_factory.mktemp("users")
    srv = secure_server(workdir, {
        "listeners": "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0", **tls_settings(pki),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512", "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin"}, name="users")
    # the first super user, before a server runs (no SASL login is possible without one)
    kcoord("users", "--log-dirs", str(srv.data_dir), "add", "admin", "--password", "admin-pw")
    kcoord("users", "--log-dirs", str(srv.data_dir), "add", "alice", "--password", "alice-pw")
    srv.start()
    yield srv
    srv.stop()


def test_offline_users_can_log_in(server):
    with raw(server.address("SASL_SSL"), ca=str(server.overrides["ssl.truststore.location"])) as c:
        assert scram_login(c, "SCRAM-SHA-512", "admin", "admin-pw").error_code == 0


def test_users_cli_online_needs_cluster_alter(server, tmp_path, pki):
    refused = kcoord("users", "--bootstrap-server", server.address("PLAINTEXT"), "add", "dave", "--password", "x",
                     check=False)
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    as_admin = ["--bootstrap-server", server.address("SASL_SSL"),
                "--command-config", str(command_config(tmp_path, pki, "admin", "admin-pw"))]
    kcoord("users", *as_admin, "add", "dave", "--password", "dave-pw", "--mechanism", "SCRAM-SHA-256",
           "--iterations", "8192")
    listed = kcoord("users", *as_admin, "list").stdout
    assert "dave\tSCRAM-SHA-256 (iterations=8192)" in listed
    with raw(server.address("SASL_SSL"), ca=str(pki.ca)) as c:
        assert scram_login(c, "SCRAM-SHA-256", "dave", "dave-pw").error_code == 0
    kcoord("users", *as_admin, "delete", "dave", "--mechanism", "SCRAM-SHA-256")
    assert "dave" not in kcoord("users", *as_admin, "list").stdout
    missing = kcoord("users", *as_admin, "delete", "dave", check=False)
    assert missing.returncode == 1 and "RESOURCE_NOT_FOUND" in missing.stderr


def test_confluent_admin_client_manages_scram(server, pki):
    admin = AdminClient({"bootstrap.servers": server.address("SASL_SSL"), "security.protocol": "SASL_SSL",
                         "ssl.ca.location": str(pki.ca), "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": "admin", "sasl.password": "admin-pw"})
    upsert = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"erin-pw")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    described = admin.describe_user_scram_credentials(["erin"])
    info = described["erin"].result(30)
    assert [(i.mechanism, i.iterations) for i in info.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    with raw(server.address("SASL_SSL"), ca=str(pki.ca)) as c:
        assert scram_login(c, "SCRAM-SHA-512", "erin", "erin-pw").error_code == 0


def test_groups_cli_as_super_user(server, tmp_path, pki):
    as_admin = command_config(tmp_path, pki, "admin", "admin-pw")
    as_alice = command_config(tmp_path, pki, "alice", "alice-pw")
    with raw(server.address("SASL_SSL"), ca=str(pki.ca)) as c:  # a group with a committed offset, made by admin
        assert scram_login(c, "SCRAM-SHA-512", "admin", "admin-pw").error_code == 0
        T = m.CreateTopicsRequest.CreatableTopic
        created = c.request(19, 5, m.CreateTopicsRequest(topics=[T(name="tools-topic", num_partitions=1,
                                                                    replication_factor=1, assignments=[], configs=[])],
                                                          timeout_ms=5000, validate_only=False))
        assert created.topics[0].error_code == 0
        assert commit(c, "tools-group", "tools-topic") == {"tools-topic": 0}
    admin_list = kcoord("groups", "--bootstrap-server", server.address("SASL_SSL"), "--command-config",
                        str(as_admin), "list").stdout
    assert "tools-group" in admin_list
    # alice may describe no group: the tool's FindCoordinator (key "") is refused before ListGroups
    alice = kcoord("groups", "--bootstrap-server", server.address("SASL_SSL"), "--command-config", str(as_alice),
                   "list", check=False)
    assert "tools-group" not in alice.stdout and "GROUP_AUTHORIZATION_FAILED" in alice.stderr
