"""`__transaction_state` is loaded by replay after a restart, a partition at a time; until an id's partition
is loaded its requests answer COORDINATOR_LOAD_IN_PROGRESS (TransactionStateManager.getTransactionState
while the partition is in loadingPartitions), ids of loaded partitions are served meanwhile, and the
loaded state continues where it was (the epoch bump goes on from the stored epoch).

The load is held deterministically through the admin endpoint: after the restart every partition loads
again in order (/transactions/reload) with one held (/transactions/hold-load)."""
from __future__ import annotations

from kcoord.protocol import messages as m
from kcoord.protocol.consumer_offsets import partition_for
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.transactions.test_tv2_wire import TOPIC, create_topic
from tests.broker.transactions.txnwire import end_txn, init_pid, init_until_ready, produce_txn
from tests.support.kcoord_server import KcoordServer
from tests.support.raw_kafka import RawKafka

PARTITIONS = 5


def _id_in(partition: int, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(1000) if partition_for(f"{prefix}-{i}", PARTITIONS) == partition)


def test_loading_partition_answers_load_in_progress(tmp_path):
    held, served, before = _id_in(2, "held"), _id_in(4, "served"), _id_in(1, "before")
    server = KcoordServer(tmp_path, {"transaction.state.log.num.partitions": str(PARTITIONS),
                                     "kcoord.admin.listener": "http://127.0.0.1:0"}, "txn-loading").start()
    try:
        with RawKafka(server.port) as raw:
            _, pid, _ = init_until_ready(raw, held)
            assert init_pid(raw, held)[0] == E.NONE  # epoch 1
            init_until_ready(raw, served)
        server.stop()
        server.start()
        server.hold_load([partition_for(held, PARTITIONS)], of="transactions")
        server.reload(of="transactions")
        with RawKafka(server.port) as raw:
            assert init_pid(raw, held)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
            assert end_txn(raw, held, pid, 1, True) == E.COORDINATOR_LOAD_IN_PROGRESS
            resp = raw.request(65, 0, m.DescribeTransactionsRequest(transactional_ids=[held]))
            assert resp.transaction_states[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
            assert init_pid(raw, served)[0] == E.COORDINATOR_LOAD_IN_PROGRESS  # after the held one
            assert init_until_ready(raw, before)[0] == E.NONE  # before it: loaded and served
            assert server.release_load(of="transactions") == []
            assert init_until_ready(raw, held) == (E.NONE, pid, 2)
            assert init_until_ready(raw, served)[2] == 1
    finally:
        server.stop()


def test_a_partition_already_in_the_transaction_takes_produce_v12_without_asking_the_coordinator(tmp_path):
    """core/.../log/UnifiedLog.scala maybeStartTransactionVerification: a partition whose log holds an
    ongoing transaction of the producer gets the SENTINEL guard, and ReplicaManager.scala
    maybeStartTransactionVerificationForPartitions sends only the other partitions to the coordinator
    (AddPartitionsToTxnManager). So while the id's coordinator partition is loading, the transaction's next
    batch to a partition it already wrote is taken, and a new partition waits (the coordinator's
    COORDINATOR_LOAD_IN_PROGRESS, which the produce answers as the retriable NOT_ENOUGH_REPLICAS)."""
    txn = _id_in(3, "ongoing")
    server = KcoordServer(tmp_path, {"transaction.state.log.num.partitions": str(PARTITIONS),
                                     "kcoord.admin.listener": "http://127.0.0.1:0"}, "txn-ongoing").start()
    try:
        with RawKafka(server.port) as raw:
            create_topic(server.port)
            _, pid, epoch = init_until_ready(raw, txn)
            assert produce_txn(raw, txn, pid, epoch, TOPIC, 0, [b"a"], version=12) == E.NONE
            server.hold_load([partition_for(txn, PARTITIONS)], of="transactions")
            server.reload(of="transactions")
            assert init_pid(raw, txn)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
            assert produce_txn(raw, txn, pid, epoch, TOPIC, 0, [b"b"], sequence=1, version=12) == E.NONE
            assert produce_txn(raw, txn, pid, epoch, TOPIC, 1, [b"c"], version=12) == E.NOT_ENOUGH_REPLICAS
            assert server.release_load(of="transactions") == []
            assert produce_txn(raw, txn, pid, epoch, TOPIC, 1, [b"c"], version=12) == E.NONE
    finally:
        server.stop()
