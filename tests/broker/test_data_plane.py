"""Produce, Fetch, ListOffsets, InitProducerId and Metadata semantics, with exact requests over TCP."""
from __future__ import annotations

import uuid

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import build_batch, iter_batches
from tests.support.raw_kafka import RawKafka

P, F, LO, MD, CT, IP = 0, 1, 2, 3, 19, 22


def create(c: RawKafka, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    T = m.CreateTopicsRequest.CreatableTopic
    resp = c.request(CT, 7, m.CreateTopicsRequest(topics=[T(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=5000, validate_only=False))
    assert resp.topics[0].error_code == ErrorCode.NONE, resp


def produce(c: RawKafka, topic: str, batch: bytes, partition: int = 0, acks: int = -1, version: int = 9):
    R = m.ProduceRequest
    req = R(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=partition, records=batch)])])
    if acks == 0:
        c.send_request(P, version, req)
        return None
    return c.request(P, version, req).responses[0].partition_responses[0]


def fetch(c: RawKafka, topic: str, offset: int, partition: int = 0, version: int = 12, max_wait_ms: int = 0,
          min_bytes: int = 0, partition_max_bytes: int = 1 << 20, session_id: int = 0, session_epoch: int = -1,
          topic_id: uuid.UUID | None = None):
    R = m.FetchRequest
    part = R.FetchTopic.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes)
    ft = R.FetchTopic(topic_id=topic_id, partitions=[part]) if version >= 13 else R.FetchTopic(topic=topic, partitions=[part])
    return c.request(F, version, R(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 24,
                                   isolation_level=0, session_id=session_id, session_epoch=session_epoch,
                                   topics=[ft], forgotten_topics_data=[], rack_id=""))


def batches(records: bytes | None) -> list:
    return [h for _pos, h, _b in iter_batches(records or b"")]


def records_batch(n: int, **kw) -> bytes:
    return build_batch([(f"k{i}".encode(), f"v{i}".encode()) for i in range(n)], **kw)


@pytest.fixture
def conn(kcoord_shared_server):
    with RawKafka(kcoord_shared_server.port) as c:
        yield c


def test_produce_assigns_offsets_and_fetch_returns_the_batches(conn):
    create(conn, "plain")
    assert produce(conn, "plain", records_batch(3)).base_offset == 0
    second = produce(conn, "plain", records_batch(2))
    assert (second.error_code, second.base_offset, second.log_start_offset) == (0, 3, 0)
    part = fetch(conn, "plain", 0).responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, part.last_stable_offset) == (0, 5, 5)
    assert [(h.base_offset, h.records_count) for h in batches(part.records)] == [(0, 3), (3, 2)]


@pytest.mark.parametrize("mutate, code", [
    (lambda b: b[:-1] + bytes([b[-1] ^ 0xFF]), ErrorCode.CORRUPT_MESSAGE),        # CRC no longer matches
    (lambda b: b[:16] + b"\x01" + b[17:], ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),  # magic 1
    (lambda b: b[:40], ErrorCode.CORRUPT_MESSAGE),                                 # truncated batch
])
def test_bad_batches_are_refused_and_the_connection_stays_usable(conn, mutate, code):
    create(conn, f"bad-{code.value}-{len(mutate(records_batch(1)))}")
    topic = f"bad-{code.value}-{len(mutate(records_batch(1)))}"
    resp = produce(conn, topic, mutate(records_batch(2)))
    assert resp.error_code == code
    assert produce(conn, topic, records_batch(1)).base_offset == 0  # nothing was appended before


def test_produce_to_unknown_topic_or_partition(conn):
    assert produce(conn, "no-such-topic", records_batch(1)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    create(conn, "two", partitions=2)
    assert produce(conn, "two", records_batch(1), partition=2).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_acks_zero_gets_no_response(conn):
    create(conn, "fire-and-forget")
    produce(conn, "fire-and-forget", records_batch(1), acks=0)
    # The next response on the connection belongs to the next request.
    assert produce(conn, "fire-and-forget", records_batch(1)).base_offset == 1


def init_producer(c: RawKafka, pid: int = -1, epoch: int = -1):
    resp = c.request(IP, 4, m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                   producer_id=pid, producer_epoch=epoch))
    assert resp.error_code == ErrorCode.NONE
    return resp.producer_id, resp.producer_epoch


def test_idempotent_producer_duplicates_and_sequence_gaps(conn):
    create(conn, "idem")
    pid, epoch = init_producer(conn)
    first = produce(conn, "idem", records_batch(3, producer_id=pid, producer_epoch=epoch, base_sequence=0))
    assert first.base_offset == 0
    retry = produce(conn, "idem", records_batch(3, producer_id=pid, producer_epoch=epoch, base_sequence=0))
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 0)  # same answer, not appended again
    nxt = produce(conn, "idem", records_batch(2, producer_id=pid, producer_epoch=epoch, base_sequence=3))
    assert nxt.base_offset == 3
    gap = produce(conn, "idem", records_batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=9))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert fetch(conn, "idem", 0).responses[0].partitions[0].high_watermark == 5

    # KIP-360 epoch bump: the new epoch starts at sequence 0; the old epoch is fenced.
    pid2, epoch2 = init_producer(conn, pid, epoch)
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert produce(conn, "idem", records_batch(1, producer_id=pid, producer_epoch=epoch2, base_sequence=0)).base_offset == 5
    old = produce(conn, "idem", records_batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=5))
    assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_producer_ids_are_unique(conn):
    ids = {init_producer(conn)[0] for _ in range(5)}
    assert len(ids) == 5


def test_fetch_offset_out_of_range(conn):
    create(conn, "range")
    produce(conn, "range", records_batch(2))
    part = fetch(conn, "range", 3).responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, part.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, 2, 0)
    at_end = fetch(conn, "range", 2).responses[0].partitions[0]
    assert at_end.error_code == ErrorCode.NONE and not at_end.records


def test_first_batch_is_returned_even_if_larger_than_partition_max_bytes(conn):
    create(conn, "big")
    big = build_batch([(b"k", b"x" * 5000)])
    produce(conn, "big", big)
    part = fetch(conn, "big", 0, partition_max_bytes=100).responses[0].partitions[0]
    assert len(part.records) == len(big)


def test_fetch_by_topic_id(conn):
    create(conn, "by-id")
    produce(conn, "by-id", records_batch(1))
    md = conn.request(MD, 12, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="by-id")],
                                                allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
    topic_id = md.topics[0].topic_id
    assert topic_id != uuid.UUID(int=0)
    resp = fetch(conn, "", 0, version=16, topic_id=topic_id)
    assert resp.responses[0].topic_id == topic_id
    assert resp.responses[0].partitions[0].high_watermark == 1
    unknown = fetch(conn, "", 0, version=13, topic_id=uuid.uuid4())
    assert unknown.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_fetch_sessions_are_declined_as_kafka_does_when_its_cache_is_full(conn):
    create(conn, "sessions")
    new_session = fetch(conn, "sessions", 0, version=12, session_id=0, session_epoch=0)
    assert (new_session.error_code, new_session.session_id) == (ErrorCode.NONE, 0)
    assert new_session.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert fetch(conn, "sessions", 0, session_id=1234, session_epoch=1).error_code == \
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert fetch(conn, "sessions", 0, session_id=0, session_epoch=3).error_code == \
        ErrorCode.INVALID_FETCH_SESSION_EPOCH


def list_offset(c: RawKafka, topic: str, timestamp: int, version: int = 7):
    R = m.ListOffsetsRequest
    resp = c.request(LO, version, R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
        name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])]))
    part = resp.topics[0].partitions[0]
    return part.error_code, part.offset, part.timestamp


def test_list_offsets(conn):
    create(conn, "times")
    for ts in (1000, 5000, 3000):  # batches at offsets 0, 2, 4
        produce(conn, "times", build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=ts))
    assert list_offset(conn, "times", -2) == (0, 0, -1)
    assert list_offset(conn, "times", -1) == (0, 6, -1)
    assert list_offset(conn, "times", 2000) == (0, 2, 5000)
    assert list_offset(conn, "times", 9000) == (0, -1, -1)
    assert list_offset(conn, "times", -3) == (0, 2, 5000)
    assert list_offset(conn, "nope", -1)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_log_append_time_topic(conn):
    create(conn, "lat", configs={"message.timestamp.type": "LogAppendTime"})
    resp = produce(conn, "lat", build_batch([(b"k", b"v")], timestamp_ms=1))
    assert resp.log_append_time_ms > 1
    (header,) = batches(fetch(conn, "lat", 0).responses[0].partitions[0].records)
    assert header.timestamp_type == 1 and header.max_timestamp == resp.log_append_time_ms


def metadata(c: RawKafka, names, allow_auto: bool, version: int = 12):
    topics = None if names is None else [m.MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    return c.request(MD, version, m.MetadataRequest(topics=topics, allow_auto_topic_creation=allow_auto,
                                                    include_topic_authorized_operations=False))


def test_metadata_auto_creation_and_errors(kcoord_shared_server, conn):
    resp = metadata(conn, ["auto-made"], allow_auto=True)
    (t,) = resp.topics
    assert (t.error_code, len(t.partitions), t.partitions[0].leader_id) == (0, 1, 1)
    assert resp.controller_id == 1 and resp.cluster_id
    assert [(b.node_id, b.port) for b in resp.brokers] == [(1, kcoord_shared_server.port)]
    assert metadata(conn, ["not-made"], allow_auto=False).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert metadata(conn, ["bad name!"], allow_auto=True).topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "not-made" not in {t.name for t in metadata(conn, None, allow_auto=False).topics}
    assert metadata(conn, [], allow_auto=True).topics == []  # v1+: empty list means no topics


def test_failed_acks_zero_produce_closes_the_connection(kcoord_shared_server, conn):
    produce(conn, "acks0-unknown-topic", records_batch(1), acks=0)
    assert conn.closed_by_peer()
    kcoord_shared_server.wait_for_log(r"acks=0 produce failed .*UNKNOWN_TOPIC_OR_PARTITION")


def test_a_partition_error_ends_the_long_poll(conn):
    create(conn, "poll-error")
    # max_wait is far longer than the test timeout: only the error can make this return.
    resp = fetch(conn, "poll-error", 5, max_wait_ms=600_000, min_bytes=1)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
