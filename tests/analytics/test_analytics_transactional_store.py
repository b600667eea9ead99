"""The offsets decoder over a `__consumer_offsets` store written by the REAL kcoord transaction path:
TxnOffsetCommit's offsets (transactional batches) appear in offset_commits only once the COMMIT marker the
transaction coordinator wrote is there; an aborted transaction's never do, nor one still open."""
import glob
import os

from kcoord.analytics.segment import SegmentDecoder
from kcoord.protocol.consumer_offsets import partition_for
from kcoord.protocol.errors import ErrorCode as E
from kcoord.testkit.pytest_plugin import start_broker
from tests.broker.transactions.txnwire import add_offsets, end_txn, init_until_ready, txn_commit
from tests.support.raw_kafka import RawKafka

PARTITIONS = 5


def test_only_committed_transactional_offsets_reach_offset_commits(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    server = start_broker(tmp_path, {"offsets.topic.num.partitions": str(PARTITIONS),
                                     "transaction.state.log.num.partitions": "3"}, "analytics-txn")
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        [f.result(30) for f in admin.create_topics([NewTopic("t", 3)]).values()]
        del admin
        with RawKafka(server.port) as raw:
            for txn_id, offset, how in (("a-commit", 10, True), ("a-abort", 20, False), ("a-open", 30, None)):
                _, pid, epoch = init_until_ready(raw, txn_id)
                assert add_offsets(raw, txn_id, pid, epoch, "g-txn") == E.NONE
                assert txn_commit(raw, txn_id, pid, epoch, "g-txn", {("t", offset // 10 - 1): offset}) == {
                    ("t", offset // 10 - 1): E.NONE}
                if how is not None:
                    assert end_txn(raw, txn_id, pid, epoch, how) == E.NONE
    finally:
        server.stop()
    partition = partition_for("g-txn", PARTITIONS)
    [directory] = glob.glob(os.path.join(str(tmp_path), "**", f"__consumer_offsets-{partition}"), recursive=True)
    rows = []
    for path in sorted(glob.glob(os.path.join(directory, "*.log"))):
        with open(path, "rb") as f:
            decoder = SegmentDecoder(f.read(), partition)
        rows += [r for b in decoder.commits() for r in b.to_pylist()]
    assert [(r["group"], r["partition"], r["current_offset"], r["transactional"]) for r in rows
            if r["group"] == "g-txn"] == [("g-txn", 0, 10, True)]
