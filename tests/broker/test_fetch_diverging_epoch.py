"""Fetch v12+ over TCP: a fetcher's LastFetchedEpoch is checked against the partition's leader epochs, as
Kafka's Partition.readRecords does (core/src/main/scala/kafka/cluster/Partition.scala; the end offset is
LeaderEpochFileCache.endOffsetFor's, via Partition.lastOffsetForLeaderEpoch):
- the epoch's end offset cannot be determined -> OFFSET_OUT_OF_RANGE;
- a fetch offset below the log start -> OFFSET_OUT_OF_RANGE, whether or not the epochs diverge;
- our epoch for it is older than the fetcher's, or ends before its fetch offset -> no records and
  DivergingEpoch = (that epoch, its end offset): the fetcher truncates there;
- otherwise the read goes on as without the field (-1 skips the check, and before v12 there is none).

The partition's epochs: 0 for offsets 0-2, then 1 from offset 3 (the node leads it again after a
restart, tests/broker/test_leader_epochs.py).
"""
from __future__ import annotations

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.records import iter_batches
from tests.support.raw_kafka import RawKafka

TOPIC = "diverging"


def produce(server, values) -> None:
    producer = KafkaProducer(bootstrap_servers=server.bootstrap)
    for v in values:
        producer.send(TOPIC, v, partition=0).get(timeout=10)
    producer.close()


def topic_id(c: RawKafka):
    R = m.MetadataRequest
    resp = c.request(3, 12, R(topics=[R.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False))
    return resp.topics[0].topic_id


def fetch(c: RawKafka, version: int, fetch_offset: int, last_fetched_epoch: int):
    """(error, diverging (epoch, end offset) or None, offsets of the records, log start) of partition 0
    (named by id from v13)."""
    R = m.FetchRequest
    part = R.FetchTopic.FetchPartition(partition=0, fetch_offset=fetch_offset, partition_max_bytes=1 << 20,
                                       current_leader_epoch=-1, last_fetched_epoch=last_fetched_epoch,
                                       log_start_offset=-1)
    resp = c.request(1, version, R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                   session_id=0, session_epoch=-1, topics=[R.FetchTopic(
                                       topic=TOPIC, topic_id=topic_id(c) if version >= 13 else None, partitions=[part])],
                                   forgotten_topics_data=[], rack_id=""))
    p = resp.responses[0].partitions[0]
    offsets = [h.base_offset for _, h, _ in iter_batches(p.records or b"")]
    diverging = None if p.diverging_epoch is None else (p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
    return p.error_code, diverging, offsets, p.log_start_offset


def test_last_fetched_epoch_is_checked_against_the_leader_epochs(kcoord_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_server.bootstrap)
    admin.create_topics([NewTopic(TOPIC, 1, 1)])
    admin.close()
    produce(kcoord_server, [b"a", b"b", b"c"])
    kcoord_server.restart()
    produce(kcoord_server, [b"d", b"e"])

    with RawKafka(kcoord_server.port) as c:
        # epoch 0 ended at 3: a fetcher that read epoch 0 up to 3 goes on at 3
        assert fetch(c, 12, 3, 0) == (E.NONE, None, [3, 4], 0)
        # ... but one that read epoch 0 further, to 4, has records we never had: truncate to 3
        assert fetch(c, 12, 4, 0) == (E.NONE, (0, 3), [], 0)
        assert fetch(c, 12, 9, 0) == (E.NONE, (0, 3), [], 0)  # beyond our log end too
        assert fetch(c, 18, 4, 0)[:2] == (E.NONE, (0, 3))    # the newest version alike
        # the current epoch ends at the log end
        assert fetch(c, 12, 4, 1) == (E.NONE, None, [4], 0)
        assert fetch(c, 12, 5, 1) == (E.NONE, None, [], 0)
        # an epoch above every epoch we know: its end cannot be determined
        assert fetch(c, 12, 4, 2)[0] == E.OFFSET_OUT_OF_RANGE
        # no check without an epoch, nor before v12 (the field is not sent)
        assert fetch(c, 12, 4, -1) == (E.NONE, None, [4], 0)
        assert fetch(c, 11, 4, 0) == (E.NONE, None, [4], 0)

        R = m.DeleteRecordsRequest
        resp = c.request(21, 2, R(topics=[R.DeleteRecordsTopic(name=TOPIC, partitions=[
            R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=2)])], timeout_ms=5000))
        assert resp.topics[0].partitions[0].error_code == E.NONE
        # below the log start: out of range whatever the epochs say
        assert fetch(c, 12, 1, 0)[0] == E.OFFSET_OUT_OF_RANGE
        assert fetch(c, 12, 2, 0) == (E.NONE, None, [2, 3, 4], 2)
