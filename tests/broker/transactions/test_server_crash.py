"""The server SIGKILLed at random points of transactional commits, 20 rounds: after each restart every
transaction is wholly committed or wholly aborted -- its records in both data partitions and its group's
offset together, or none of them -- and OffsetFetch with require_stable never returns half of one.

Kafka's guarantees this follows: TransactionCoordinator.endTransaction answers once PrepareCommit is in
the transaction log, and TransactionStateManager.loadTransactionsForTxnTopicPartition hands every
PrepareCommit/PrepareAbort it loads back to the marker channel, so a crash between PrepareCommit and the
markers completes the commit on restart; an Ongoing transaction is aborted when its producer comes back
(handleInitProducerId fences it). The group coordinator replays markers in __consumer_offsets
(GroupCoordinatorShard.replayEndTransactionMarker) on load as live.
"""
from __future__ import annotations

import random
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.transactions.txnwire import (
    END_TXN,
    add_offsets,
    add_partitions,
    init_until_ready,
    produce_txn,
    txn_commit,
)
from tests.support.raw_kafka import RawKafka

ROUNDS = 20
SMALL = {"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"}


def _stable_offset(raw, group: str) -> int:
    """The group's committed offset for crash-0, with require_stable: retried while UNSTABLE_OFFSET_COMMIT
    (or loading); never a value in between."""
    Rq = m.OffsetFetchRequest
    for _ in range(400):
        resp = raw.request(9, 7, Rq(group_id=group, require_stable=True, topics=[
            Rq.OffsetFetchRequestTopic(name="crash", partition_indexes=[0])]))
        error = resp.error_code or resp.topics[0].partitions[0].error_code
        if error == E.NONE:
            return resp.topics[0].partitions[0].committed_offset
        assert error in (E.UNSTABLE_OFFSET_COMMIT, E.COORDINATOR_LOAD_IN_PROGRESS), error
        time.sleep(0.025)
    raise AssertionError(f"{group}: offsets stayed unstable")


def _committed_values(bootstrap: str) -> dict[int, set[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-reader", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition("crash", p, 0) for p in (0, 1)])
    values: dict[int, set[bytes]] = {0: set(), 1: set()}
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    while eof != {0, 1} and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            eof.add(msg.partition())
            continue
        values[msg.partition()].add(msg.value())
    consumer.close()
    assert eof == {0, 1}
    return values


def test_commits_survive_sigkill_whole_or_not_at_all(kcoord_server_factory):
    server = kcoord_server_factory(SMALL)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for f in admin.create_topics([NewTopic("crash", 2)]).values():
        f.result(30)
    del admin  # it would keep reconnecting across the kills
    rng = random.Random(16)
    for r in range(ROUNDS):
        with RawKafka(server.port) as raw:
            error, pid, epoch = init_until_ready(raw, "crasher")
            assert error == E.NONE
            assert add_partitions(raw, "crasher", pid, epoch, [("crash", 0), ("crash", 1)]) == {
                ("crash", 0): E.NONE, ("crash", 1): E.NONE}
            for partition in (0, 1):
                assert produce_txn(raw, "crasher", pid, epoch, "crash", partition, [b"r%d" % r]) == E.NONE
            assert add_offsets(raw, "crasher", pid, epoch, f"g{r}") == E.NONE
            assert txn_commit(raw, "crasher", pid, epoch, f"g{r}", {("crash", 0): r + 1}) == {("crash", 0): E.NONE}
            raw.send_request(END_TXN, 3, m.EndTxnRequest(transactional_id="crasher", producer_id=pid,
                                                         producer_epoch=epoch, committed=True))
            time.sleep(rng.uniform(0, 0.03))
            server.kill(restart=False)
        server.restart()

    with RawKafka(server.port) as raw:
        assert init_until_ready(raw, "crasher")[0] == E.NONE  # the last transaction is resolved too
        offsets = {r: _stable_offset(raw, f"g{r}") for r in range(ROUNDS)}
    values = _committed_values(server.bootstrap)
    committed = []
    for r in range(ROUNDS):
        in_0, in_1 = b"r%d" % r in values[0], b"r%d" % r in values[1]
        assert in_0 == in_1, f"round {r}: half a transaction in the data partitions"
        assert offsets[r] == (r + 1 if in_0 else -1), f"round {r}: offsets {offsets[r]}, data {in_0}"
        committed.append(in_0)
    assert any(committed), "no round committed: the kills came too early to test anything"
