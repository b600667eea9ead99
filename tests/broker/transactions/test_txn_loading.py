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
from tests.broker.transactions.txnwire import end_txn, init_pid, init_until_ready
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
