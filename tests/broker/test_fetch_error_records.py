"""Regression: a Fetch partition answered with an error carried a null record set, and librdkafka fails
the parse of the whole response on it ("invalid MessageSetSize -1"), so a read_committed consumer stayed
stuck on a node that answered NOT_LEADER_OR_FOLLOWER (a node resumed after losing its lease). Kafka answers
an errored partition with an empty record set (FetchResponse.partitionResponse -> MemoryRecords.EMPTY,
clients/src/main/java/org/apache/kafka/common/requests/FetchResponse.java)."""
from __future__ import annotations

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from tests.support.raw_kafka import RawKafka


def test_an_errored_partition_has_an_empty_record_set_not_a_null_one(kcoord_server):
    R = m.FetchRequest
    part = R.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                       current_leader_epoch=-1, last_fetched_epoch=-1, log_start_offset=-1)
    with RawKafka(kcoord_server.port) as c:
        for version in (4, 12):
            resp = c.request(1, version, R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                           isolation_level=1, session_id=0, session_epoch=-1,
                                           topics=[R.FetchTopic(topic="no-such-topic", partitions=[part])],
                                           forgotten_topics_data=[], rack_id=""))
            p = resp.responses[0].partitions[0]
            assert p.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
            assert p.records == b""
