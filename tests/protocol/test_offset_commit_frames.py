"""protocol/offset_commit_frames agrees with the general codec (headers + messages) on every case.

The hand-written reader either returns exactly what the general decoder reads, or None (then the
broker hands the frame to the general codec); it returns None only for shapes it does not take
(v10, metadata with text, long strings and tagged fields in v8+, bad UTF-8, truncation, bytes after
the body). The response writer's bytes equal the general encoder's.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import messages as m
from protocol import offset_commit_frames as ocf
from protocol.errors import ErrorCode
from protocol.headers import decode_request_header, encode_request_frame, encode_response_frame

VERSIONS = range(ocf.MIN_VERSION, ocf.MAX_VERSION + 1)
Topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
Partition = Topic.OffsetCommitRequestPartition
ResponseTopic = m.OffsetCommitResponse.OffsetCommitResponseTopic
ResponsePartition = ResponseTopic.OffsetCommitResponsePartition
short_text = st.text(max_size=30)
int32 = st.integers(-2**31, 2**31 - 1)


def request_frame(version: int, correlation_id: int, client_id: str | None, request) -> bytes:
    body = m.request_codec(ocf.API_KEY, version).encode(request)
    return encode_request_frame(ocf.API_KEY, version, correlation_id, client_id, body)


def general_read(frame: bytes):
    """What the broker's general path reads, in the reader's shape: header, then body."""
    payload = frame[4:]
    header = decode_request_header(payload)
    r, _ = m.request_codec(ocf.API_KEY, header.api_version).decode(payload, header.body_offset)
    topics = [(t.name, *(tuple(getattr(p, f) for p in t.partitions) for f in (
        "partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata")))
        for t in r.topics]
    return header.correlation_id, (header.api_version, r.group_id, r.generation_id_or_member_epoch, r.member_id,
                                   r.group_instance_id, r.retention_time_ms, topics)


def commit(group_id="g", generation=-1, member_id="", instance=None, topics=(("t", ((0, 5, -1, ""),)),),
           **extra) -> m.OffsetCommitRequest:
    return m.OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance,
        topics=[Topic(name=name, partitions=[
            Partition(partition_index=i, committed_offset=o, committed_leader_epoch=e, committed_metadata=md)
            for i, o, e, md in parts]) for name, parts in topics], **extra)


partitions = st.lists(st.tuples(int32, st.integers(-2**63, 2**63 - 1), int32, st.sampled_from(["", None])),
                      max_size=140)  # past 126: a two-byte count
topics = st.lists(st.tuples(st.text(min_size=1, max_size=20), partitions), max_size=4)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), correlation_id=int32, client_id=st.none() | short_text,
       group_id=short_text, member_id=short_text, instance=st.none() | short_text, generation=int32,
       retention=st.integers(-2**63, 2**63 - 1), topics=topics)
def test_reader_agrees_with_the_general_decoder(version, correlation_id, client_id, group_id, member_id, instance,
                                                generation, retention, topics):
    request = commit(group_id, generation, member_id, instance if version >= 7 else None, topics,
                     retention_time_ms=retention if version <= 4 else -1)
    frame = request_frame(version, correlation_id, client_id, request)
    assert ocf.read_request(frame) == general_read(frame)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_usual_commit_is_read(version):
    parts = tuple((p, 1000 + p, 3, "") for p in range(200))
    instance = "i-1" if version >= 7 else None
    frame = request_frame(version, 7, "consumer-1", commit("group", 4, "member-1", instance, [("orders", parts)]))
    assert ocf.read_request(frame) == general_read(frame)
    assert ocf.read_request(frame)[1][6][0][4] == ("",) * 200


@pytest.mark.parametrize("version", VERSIONS)
def test_shapes_the_reader_does_not_take_are_declined(version):
    declined = {"metadata with text": commit(topics=[("t", ((0, 1, -1, ""), (1, 1, -1, "checkpoint")))])}
    if version >= 8:  # shapes only the flexible versions have
        declined["long group id"] = commit(group_id="g" * 200)
        declined["long topic name"] = commit(topics=[("t" * 130, ((0, 1, -1, ""),))])
        declined["tagged fields"] = commit(_unknown_tagged_fields={3: b"x"})
        declined["a partition's tagged fields"] = m.OffsetCommitRequest(
            group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[Topic(name="t", partitions=[
                Partition(partition_index=0, committed_offset=1, committed_metadata="",
                          _unknown_tagged_fields={1: b"y"})])])
        declined["a topic's tagged fields"] = m.OffsetCommitRequest(
            group_id="g", generation_id_or_member_epoch=-1, member_id="",
            topics=[Topic(name="t", partitions=[], _unknown_tagged_fields={1: b"y"})])
    for what, request in declined.items():
        frame = request_frame(version, 5, "c", request)
        general_read(frame)  # a valid request, only an unusual one
        assert ocf.read_request(frame) is None, what
    many = commit(topics=[("t", tuple((p, 0, -1, "") for p in range(ocf.MAX_PARTITIONS + 1)))])
    assert len(general_read(request_frame(version, 5, "c", many))[1][6][0][1]) == ocf.MAX_PARTITIONS + 1
    assert ocf.read_request(request_frame(version, 5, "c", many)) is None
    frame = request_frame(version, 5, "c", commit())
    assert ocf.read_request(frame[:14] + b"\xff" + frame[15:]) is None  # client_id "c" -> invalid UTF-8
    trailing = frame + b"\x00"
    assert ocf.read_request(struct.pack(">i", len(trailing) - 4) + trailing[4:]) is None


def test_a_version_it_does_not_know_is_declined():
    frame = request_frame(10, 5, "c", commit())
    assert ocf.read_request(frame) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_long_strings_are_read_before_the_flexible_versions(version):
    frame = request_frame(version, 5, "c", commit(group_id="g" * 200, topics=[("t" * 300, ((0, 1, 2, ""),))]))
    assert ocf.read_request(frame) == (general_read(frame) if version < 8 else None)


def test_other_apis_are_declined():
    body = m.request_codec(12, 4).encode(m.HeartbeatRequest(group_id="g", member_id="m"))
    assert ocf.read_request(encode_request_frame(12, 4, 1, "c", body)) is None


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), data=st.data())
def test_every_truncation_is_declined(version, data):
    request = commit("group", 3, "member", "inst" if version >= 7 else None,
                     [("a", ((0, 1, 2, ""), (1, 3, 4, None))), ("b", ((7, 8, 9, ""),))])
    frame = request_frame(version, 9, "client", request)
    cut = data.draw(st.integers(0, len(frame) - 1))
    truncated = frame[:cut]
    assert ocf.read_request(truncated) is None  # its size still claims what was cut off
    if len(truncated) >= 4:  # and with its size fixed up: the general decoder agrees, or fails
        fixed = struct.pack(">i", len(truncated) - 4) + truncated[4:]
        ours = ocf.read_request(fixed)
        if ours is not None:
            assert ours == general_read(fixed)


def general_response(version: int, correlation_id: int, topics, errors) -> bytes:
    """What broker/apis/offset_commit.py's general path writes for the same answer."""
    def code(name, index):
        return errors if not isinstance(errors, dict) else errors[(name, index)]
    response = m.OffsetCommitResponse(topics=[
        ResponseTopic(name=t[0], partitions=[ResponsePartition(partition_index=i, error_code=code(t[0], i))
                                             for i in t[1]]) for t in topics])
    body = m.response_codec(ocf.API_KEY, version).encode(response)
    return encode_response_frame(correlation_id, ocf.API_KEY, version, body)


ERRORS = [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.ILLEGAL_GENERATION,
          ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.GROUP_ID_NOT_FOUND]


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), correlation_id=int32,
       topics=st.lists(st.tuples(st.text(max_size=140), st.lists(int32, max_size=140).map(tuple)), max_size=3),
       data=st.data())
def test_response_bytes_equal_the_general_encoder(version, correlation_id, topics, data):
    one = data.draw(st.sampled_from(ERRORS))
    assert ocf.response_frame(version, correlation_id, topics, one) == general_response(
        version, correlation_id, topics, one)
    assert ocf.response_frame(version, correlation_id, topics, one) == general_response(  # a remembered body
        version, correlation_id, topics, one)
    by_partition = {(name, i): data.draw(st.sampled_from(ERRORS)) for name, indices in topics for i in indices}
    assert ocf.response_frame(version, correlation_id, topics, by_partition) == general_response(
        version, correlation_id, topics, by_partition)


def test_a_remembered_body_answers_only_the_same_partitions_and_code():
    topics = [("t", (0, 1, 2))]
    first = ocf.response_frame(8, 1, topics, ErrorCode.NONE)
    assert ocf.response_frame(8, 2, topics, ErrorCode.NONE)[8:] == first[8:]  # only the correlation id differs
    for version, other_topics, code in ((8, [("t", (0, 1, 3))], ErrorCode.NONE), (8, [("u", (0, 1, 2))], ErrorCode.NONE),
                                        (8, topics, ErrorCode.UNKNOWN_MEMBER_ID), (7, topics, ErrorCode.NONE),
                                        (2, topics, ErrorCode.NONE)):
        assert ocf.response_frame(version, 3, other_topics, code) == general_response(version, 3, other_topics, code)
