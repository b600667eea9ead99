"""The coordinator's side of markers in a cluster (TransactionMarkerChannelManager and its completion
handler, core/src/main/scala/kafka/coordinator/transaction/TransactionMarkerChannelManager.scala,
TransactionMarkerRequestCompletionHandler.scala): where each partition's marker goes from the metadata
image, which answers are retried against the leader looked up again, which are dropped, and that a
TRANSACTION_COORDINATOR_FENCED stops the coordinator (abortSending). No sockets: the partitions here are
led by this node, written through an injected local writer; the retry backoff is patched to zero."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from kcoord.broker.data import txn_marker_channel
from kcoord.broker.data.txn_marker_channel import TxnMarkerChannel, classify, plan_round
from kcoord.cluster import keys
from kcoord.cluster.keys import BrokerInfo, TopicInfo
from kcoord.cluster.metadata_image import EMPTY, MetadataImage
from kcoord.cluster.partition_state import NO_LEADER, PartitionRegistration
from kcoord.metadata.store import KeyValue
from kcoord.protocol.errors import ErrorCode as E
from kcoord.txn.coordinator import CoordinatorFenced


def image(leaders: dict[int, int], brokers=(1, 2, 3), revision: int = 5) -> MetadataImage:
    """Topic "t" with one partition per entry, led by its value (NO_LEADER: none), and these brokers."""
    kvs = [KeyValue(keys.broker_key(b), BrokerInfo(b).encode(), 1, 1, 1) for b in brokers]
    kvs.append(KeyValue(keys.topic_key("t"), TopicInfo(uuid.UUID(int=1), {p: (1, 2, 3) for p in leaders})
                        .encode(), 1, 1, 1))
    kvs += [KeyValue(keys.partition_key("t", p), PartitionRegistration((1, 2, 3), (1, 2, 3), leader=leader).encode(),
                     1, revision, 1) for p, leader in leaders.items()]
    return EMPTY.apply_kvs(kvs, revision)


def test_plan_round_groups_by_current_leader():
    plan = plan_round(image({0: 1, 1: 2, 2: 1, 3: NO_LEADER, 4: 3}, brokers=(1, 2)),
                      [("t", p) for p in range(5)] + [("gone", 0)])
    assert plan.by_leader == {1: {("t", 0), ("t", 2)}, 2: {("t", 1)}}
    assert plan.leaderless == {("t", 3), ("t", 4)}  # no leader, or a leader not registered (dead)
    assert plan.gone == {("gone", 0)}


def test_classify_retries_leader_moves_and_drops_final_errors():
    retry, fenced = classify({("t", 0): E.NONE, ("t", 1): E.NOT_LEADER_OR_FOLLOWER, ("t", 2): E.NETWORK_EXCEPTION,
                              ("t", 3): E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ("t", 4): E.INVALID_PRODUCER_EPOCH,
                              ("t", 5): E.TRANSACTION_COORDINATOR_FENCED})
    assert retry == {("t", 1), ("t", 2), ("t", 3)}
    assert fenced == {("t", 5)}


class Writer:
    """This node's marker writer: answers each call from a script, recording what it was asked. `image()`
    is the metadata: each read (one per round) moves on to the next image, the last one staying."""

    def __init__(self, answers: list[dict], images: list[MetadataImage]) -> None:
        self.answers = answers
        self.images = images
        self.calls: list[tuple[set, int]] = []

    def image(self) -> MetadataImage:
        return self.images.pop(0) if len(self.images) > 1 else self.images[0]

    async def __call__(self, producer_id, epoch, commit, partitions, coordinator_epoch, transaction_version=0):
        self.calls.append((set(partitions), coordinator_epoch))
        answer = self.answers.pop(0)
        return {tp: answer.get(tp, E.NONE) for tp in partitions}


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(txn_marker_channel, "RETRY_BACKOFF_S", 0)


def test_send_retries_until_the_leader_takes_the_marker():
    """NOT_LEADER_OR_FOLLOWER, then a round in which the partition has no leader (nothing sent for it),
    then written: the image is read again each round; the coordinator epoch travels every time."""
    writer = Writer([{("t", 0): E.NOT_LEADER_OR_FOLLOWER}, {}, {}],
                    [image({0: 1, 1: 1}), image({0: NO_LEADER, 1: 1}), image({0: 1, 1: 1})])
    asyncio.run(TxnMarkerChannel(1, writer.image, writer).send(7, 0, True, {("t", 0), ("t", 1)}, 4))
    assert writer.calls == [({("t", 0), ("t", 1)}, 4), ({("t", 0)}, 4)]


def test_a_fenced_answer_stops_the_coordinator():
    writer = Writer([{("t", 0): E.TRANSACTION_COORDINATOR_FENCED}], [image({0: 1})])
    channel = TxnMarkerChannel(1, writer.image, writer)
    with pytest.raises(CoordinatorFenced):
        asyncio.run(channel.send(7, 0, False, {("t", 0)}, 2))


def test_final_errors_and_deleted_topics_are_dropped():
    writer = Writer([{("t", 0): E.INVALID_PRODUCER_EPOCH}], [image({0: 1})])
    channel = TxnMarkerChannel(1, writer.image, writer)
    asyncio.run(channel.send(7, 0, False, {("t", 0), ("deleted", 0)}, 2))
    assert writer.calls == [({("t", 0)}, 2)]
