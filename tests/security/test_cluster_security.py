"""ClusterSecurity on one LocalStore shared by two "nodes": what one writes, the other's authorizer and
SCRAM store follow (no sockets: tests/cluster/test_cluster_security_e2e.py runs it on etcd and TCP)."""
from __future__ import annotations

from kcoord.broker.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from kcoord.broker.security.authorizer import StandardAuthorizer
from kcoord.broker.security.cluster_security import ClusterSecurity, decode, scram_key
from kcoord.broker.security.scram import make_credential
from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.local_store import LocalStore
from kcoord.metadata.scram_store import ScramStore
from kcoord.metadata.store import Put
from kcoord.testkit.waiting import wait_until_async

DENY = AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:erin", "*", AclOperation.WRITE,
                  AclPermissionType.DENY)


def _node(store, tmp_path, name: str) -> tuple[ClusterSecurity, StandardAuthorizer, ScramStore]:
    authz = StandardAuthorizer(str(tmp_path / f"{name}-acls.json"), [], allow_if_no_acl=True, read_file=False)
    scram = ScramStore(str(tmp_path), read_file=False)
    return ClusterSecurity(store, authz, scram), authz, scram



async def test_acls_and_credentials_written_through_one_node_are_followed_by_another(tmp_path):
    store = LocalStore(timer=ManualClock().timers)
    one, authz1, scram1 = _node(store, tmp_path, "one")
    two, authz2, scram2 = _node(store, tmp_path, "two")
    # before the cluster's ACLs are loaded, nothing is allowed (but to super users)
    assert not authz1.authorize("User:x", "h", AclOperation.READ, ResourceType.TOPIC, "t")
    await one.start()
    assert authz1.authorize("User:x", "h", AclOperation.READ, ResourceType.TOPIC, "t")  # allow if no ACL
    await two.start()
    await one.create_acls([DENY, DENY])
    assert authz1.acls == [DENY]  # the writer answers once its own copy has it
    await wait_until_async(lambda: authz2.acls == [DENY], 5, "the other node following")
    assert not authz2.authorize("User:erin", "h", AclOperation.WRITE, ResourceType.TOPIC, "t")

    credential = make_credential("SCRAM-SHA-256", "pw")
    await two.alter_scram([("a/b", "SCRAM-SHA-256", credential)], [])
    await wait_until_async(lambda: scram1.get("a/b", "SCRAM-SHA-256") == credential, 5, "the other node following")
    await two.delete_acls([DENY])
    await one.alter_scram([], [("a/b", "SCRAM-SHA-256")])
    await wait_until_async(lambda: authz1.acls == [] and scram2.get("a/b", "SCRAM-SHA-256") is None, 5, "the other node following")
    assert not (tmp_path / "one-acls.json").exists()  # nothing of it in the node's files
    await one.close()
    await two.close()


async def test_a_bad_value_is_skipped_not_fatal(tmp_path):
    store = LocalStore(timer=ManualClock().timers)
    await store.txn([], [Put("acls/bad", b"{not json"), Put(scram_key("u", "SCRAM-SHA-512"), b"")])
    node, authz, _scram = _node(store, tmp_path, "n")
    await node.start()
    await node.create_acls([DENY])
    assert authz.acls == [DENY]
    assert decode({"acls/x": b"[]"}) == ([], {})
    await node.close()
