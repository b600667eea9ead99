"""ACLs on the transaction APIs over TCP, as KafkaApis checks them: WRITE on the transactional id for
InitProducerId / AddPartitionsToTxn / AddOffsetsToTxn / EndTxn / TxnOffsetCommit
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic added (TOPIC_AUTHORIZATION_FAILED, the rest
OPERATION_NOT_ATTEMPTED), READ on the group for AddOffsetsToTxn (GROUP_AUTHORIZATION_FAILED),
CLUSTER_ACTION for WriteTxnMarkers, DESCRIBE on the id for DescribeTransactions / ListTransactions, READ on
the topic for DescribeProducers."""
from __future__ import annotations

import pytest
from kafka.admin import ACLOperation, NewTopic, ResourceType

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.transactions.txnwire import add_offsets, add_partitions, end_txn, init_until_ready
from tests.security.conftest import PLAIN_JAAS, add_scram_users, secure_server
from tests.security.raw import plain_login, raw
from tests.security.test_acls_over_tcp import admin, allow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = secure_server(tmp_path_factory.mktemp("txn-acl"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "transaction.state.log.num.partitions": "3"}, name="txn-acl")
    add_scram_users(srv.data_dir)
    srv.start()
    a = admin(srv)
    a.create_topics([NewTopic("t-write", 1, 1), NewTopic("t-closed", 1, 1)])
    assert not a.create_acls([
        allow("User:alice", ACLOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "tx-alice"),
        allow("User:alice", ACLOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "tx-alice"),
        allow("User:alice", ACLOperation.WRITE, ResourceType.TOPIC, "t-write"),
    ])["failed"]
    a.close()
    yield srv
    srv.stop()


@pytest.fixture
def alice(server):
    c = raw(server.address("SASL_PLAINTEXT"))
    assert plain_login(c, "alice", "alice-secret").error_code == E.NONE
    with c:
        yield c


def test_transactional_id_write_is_needed(alice):
    assert init_until_ready(alice, "tx-other")[0] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    error, pid, epoch = init_until_ready(alice, "tx-alice")
    assert error == E.NONE
    assert add_partitions(alice, "tx-other", pid, epoch, [("t-write", 0)]) == {
        ("t-write", 0): E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert add_partitions(alice, "tx-alice", pid, epoch, [("t-write", 0), ("t-closed", 0)]) == {
        ("t-write", 0): E.OPERATION_NOT_ATTEMPTED, ("t-closed", 0): E.TOPIC_AUTHORIZATION_FAILED}
    assert add_offsets(alice, "tx-alice", pid, epoch, "g-closed") == E.GROUP_AUTHORIZATION_FAILED
    assert end_txn(alice, "tx-other", pid, epoch, True) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert add_partitions(alice, "tx-alice", pid, epoch, [("t-write", 0)]) == {("t-write", 0): E.NONE}
    assert end_txn(alice, "tx-alice", pid, epoch, False) == E.NONE


def test_admin_views_and_markers_need_their_acls(alice):
    init_until_ready(alice, "tx-alice")
    listed = alice.request(66, 1, m.ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                                            duration_filter=-1))
    assert {t.transactional_id for t in listed.transaction_states} <= {"tx-alice"}
    described = alice.request(65, 0, m.DescribeTransactionsRequest(transactional_ids=["tx-alice", "tx-other"]))
    assert {t.transactional_id: t.error_code for t in described.transaction_states} == {
        "tx-alice": E.NONE, "tx-other": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    Rq = m.DescribeProducersRequest
    producers = alice.request(61, 0, Rq(topics=[Rq.TopicRequest(name="t-closed", partition_indexes=[0])]))
    assert producers.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    W = m.WriteTxnMarkersRequest
    markers = alice.request(27, 1, W(markers=[W.WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[W.WritableTxnMarker.WritableTxnMarkerTopic(name="t-write", partition_indexes=[0])])]))
    assert markers.markers[0].topics[0].partitions[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
