"""A ConsumerGroupHeartbeat is answered from its frame (broker/apis/consumer_group_heartbeat.serve_frame)
unless something needs the general path (hooks, a request queued before it, an unusual frame). Over real
TCP the same sequence of heartbeats -- joins at v0 and v1, steady and full heartbeats, every error the
request can meet, a leave -- gets the same answers on both paths (GroupMetadataManager.consumerGroupHeartbeat
decides them; the paths only read and write the frames)."""
from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.broker.apis import consumer_group_heartbeat as cgh_api
from kcoord.broker.app import Broker
from kcoord.coordinator.consumer.steady import HeartbeatResult
from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E

API = 68
TOPIC, PARTITIONS = "cgh-paths", 4
R = m.ConsumerGroupHeartbeatRequest


def _hb(group: str, member_id: str, epoch: int, *, topics=None, regex=None, owned=None, timeout=-1):
    return R(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
             rebalance_timeout_ms=timeout, subscribed_topic_names=topics, subscribed_topic_regex=regex,
             server_assignor=None, topic_partitions=owned)


def sequence(port: int, group: str, topic_id: uuid.UUID) -> list:
    """The heartbeats of two members of `group`, each answer normalised (group name, generated id)."""
    owned = [R.TopicPartitions(topic_id=topic_id, partitions=list(range(PARTITIONS)))]
    steps = [
        (1, _hb(group, "m1", 0, topics=[TOPIC], owned=[], timeout=30_000)),       # join, client-made id
        (1, _hb(group, "m1", 1)),                                                   # steady: nothing sent
        (1, _hb(group, "m1", 1)),                                                   # again: remembered
        (0, _hb(group, "m1", 1)),                                                   # steady at v0
        (0, _hb(group, "m1", 1)),                                                   # again: remembered
        (1, _hb(group, "m1", 1, topics=[TOPIC], owned=owned, timeout=30_000)),    # full: the assignment again
        (0, _hb(group, "", 0, topics=[TOPIC], owned=[], timeout=30_000)),          # v0 join: server-made id
        (1, _hb(group, "nobody", 5)),                                               # UNKNOWN_MEMBER_ID
        (1, _hb(group, "m1", 99)),                                                  # FENCED_MEMBER_EPOCH
        (1, _hb("", "m1", 1)),                                                      # INVALID_REQUEST
        (1, _hb(group, "m2", 0, regex="(", owned=[], timeout=30_000)),             # INVALID_REGULAR_EXPRESSION
        (1, _hb(group, "m3", 0, regex="cgh-.*", owned=[], timeout=30_000)),        # a regex subscription joins
        (1, _hb(group, "m1", -1)),                                                  # leaves
    ]
    out, generated = [], None
    with KafkaWireClient.connect(f"127.0.0.1:{port}", client_id="paths") as client:
        for version, request in steps:
            resp = client.request(request, version)
            if version == 0 and request.member_epoch == 0:
                generated = resp.member_id
            member_id = "<generated>" if resp.member_id is not None and resp.member_id == generated else resp.member_id
            message = None if resp.error_message is None else resp.error_message.replace(group, "<group>")
            assignment = None if resp.assignment is None else sorted(
                (tp.topic_id, tuple(tp.partitions)) for tp in resp.assignment.topic_partitions)
            out.append((version, resp.error_code, message, member_id, resp.member_epoch, resp.heartbeat_interval_ms,
                        assignment))
    return out


@pytest.fixture
async def served(kcoord_broker: Broker):
    await asyncio.wait_for(kcoord_broker.group_coordinator.loaded_event.wait(), 30)
    topic = kcoord_broker.topics.create(TOPIC, PARTITIONS)
    return kcoord_broker, kcoord_broker.listeners[0].port, topic.topic_id


async def test_frame_path_and_general_path_answer_alike(served, monkeypatch):
    broker, port, topic_id = served
    frames_read = []
    real_read = cgh_api.reader.read
    monkeypatch.setattr(cgh_api.reader, "read", lambda frame: frames_read.append(frame) or real_read(frame))
    monkeypatch.setattr(cgh_api, "_steady", {})  # nothing remembered from another test
    steady_answers = []
    coordinator = broker.group_coordinator
    real_steady = coordinator.steady_consumer_heartbeat

    def steady(group_id, member_id, epoch, client_id, client_host):
        interval = real_steady(group_id, member_id, epoch, client_id, client_host)
        if interval is not None:
            steady_answers.append((group_id, member_id, epoch, client_id))
        return interval
    monkeypatch.setattr(coordinator, "steady_consumer_heartbeat", steady)

    fast = await asyncio.to_thread(sequence, port, "fast-path", topic_id)
    # every heartbeat went to the frame handler first: read, or (the second steady one of each version)
    # answered from what the first left remembered
    assert len(frames_read) == len(fast) - 2

    seen = []
    broker.hooks.after(API, lambda ctx, req, resp: seen.append(ctx.api_version))  # forces the general path
    frames_read.clear()
    general = await asyncio.to_thread(sequence, port, "general-path", topic_id)
    assert frames_read == [] and len(seen) == len(general)
    # (steady_answers: checked below, the fast path's only; the general path never asks for it)

    assert fast == general
    assert [(step[1], step[4]) for step in fast] == [
        (E.NONE, 1), (E.NONE, 1), (E.NONE, 1), (E.NONE, 1), (E.NONE, 1), (E.NONE, 1), (E.NONE, 2), (E.UNKNOWN_MEMBER_ID, 0), (E.FENCED_MEMBER_EPOCH, 0),
        (E.INVALID_REQUEST, 0), (E.INVALID_REGULAR_EXPRESSION, 0), (E.NONE, 2), (E.NONE, -1)]
    # (the regex member joins at the current epoch with nothing: its regex is resolved in the background,
    # GroupMetadataManager.maybeUpdateRegularExpressions, and bumps nothing until then)
    assert fast[11][6] == []
    join, steady, full = fast[0], fast[1], fast[5]
    assert join[6] == full[6] == [(topic_id, tuple(range(PARTITIONS)))] and steady[6] is None
    assert all(step[6] is None for step in fast[1:5])
    # the steady heartbeats were answered by the coordinator's steady check (the first of each version read
    # in full, the next from its remembered fields), the rest by the general route
    assert steady_answers == [("fast-path", "m1", 1, "paths")] * 4


async def test_frame_path_answers_keep_the_connection_order(served):
    """A heartbeat that waits for its records to be durable holds the connection: the request behind it
    on the same connection is answered after it (Kafka answers a connection's requests in order)."""
    _broker, port, _topic_id = served

    def pipelined():
        with KafkaWireClient.connect(f"127.0.0.1:{port}", client_id="order") as client:
            join = client.send(_hb("order", "o1", 0, topics=[TOPIC], owned=[], timeout=30_000), 1)
            steady = client.send(_hb("order", "o1", 1), 1)
            assert join < steady  # correlation ids: the receive below checks each answer is the one expected
            return client.receive(), client.receive()

    join, steady = await asyncio.to_thread(pipelined)
    assert (join.error_code, join.member_epoch) == (E.NONE, 1)
    assert (steady.error_code, steady.member_epoch) == (E.NONE, 1)


@given(version=st.sampled_from([0, 1]), correlation_id=st.integers(-2**31, 2**31 - 1),
       member_id=st.text(max_size=40), member_epoch=st.integers(1, 2**31 - 1),
       interval=st.integers(0, 2**31 - 1))
def test_a_remembered_steady_answer_is_the_general_answer(version, correlation_id, member_id, member_epoch, interval):
    """The bytes a remembered steady heartbeat is answered with are those the general route writes for the
    same result (KafkaApis.handleConsumerGroupHeartbeatRequest: NONE, the member's id and epoch, the
    interval, no assignment), at every correlation id."""
    known = cgh_api.remember(b"tail", version, "g", member_id, member_epoch, "client", interval)
    cgh_api._steady.pop(b"tail")
    general = cgh_api.response_frame(version, correlation_id,
                                     HeartbeatResult(E.NONE, None, member_id, member_epoch, interval))
    assert (0, cgh_api.steady_answer(known, correlation_id)) == general
    expected = m.response_codec(API, version).encode(m.ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=0, error_message=None, member_id=member_id, member_epoch=member_epoch,
        heartbeat_interval_ms=interval, assignment=None))
    assert cgh_api.steady_answer(known, correlation_id)[9:] == expected  # size, correlation id, header tags, then the body
