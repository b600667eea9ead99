"""Committed offsets survive the server (issue 5): kafka-python consumers commit, the server is
stopped with SIGTERM or killed with SIGKILL, and new consumers of the group resume exactly at the
committed offsets. A commit whose write fails answers an error; the next one succeeds."""
from __future__ import annotations

import signal

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from kcoord.testkit.waiting import wait_until
from tests.broker.groups import procs
from tests.broker.groups.group_server import start_group_server
from tests.broker.groups.procs import committed_max, disjoint_cover

PARTITIONS = 3


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_consumers_resume_from_committed_offsets_after_restart(restartable_server, sig):
    server = restartable_server
    topic, group = f"durable-{sig.name}", f"durable-group-{sig.name}"
    server.create_topic(topic, PARTITIONS)
    server.produce_keyed(topic, 90, prefix="before-")
    ends = server.end_offsets(topic, PARTITIONS)

    first = [procs.python_consumer("kafka-python", server.bootstrap, group, topic, f"d{i}") for i in range(2)]
    try:
        wait_until(lambda: committed_max(first) == ends, 60,
                   "everything committed\n" + "\n".join(c.describe() for c in first))
    finally:
        procs.stop_all(first)
    committed_before = server.committed_offsets(group, topic, PARTITIONS)
    assert committed_before == ends

    server.restart(sig)
    assert server.committed_offsets(group, topic, PARTITIONS) == committed_before
    server.produce_keyed(topic, 30, prefix="after-")

    second = [procs.python_consumer("kafka-python", server.bootstrap, group, topic, f"e{i}") for i in range(2)]
    try:
        wait_until(lambda: disjoint_cover([c.assignment for c in second], PARTITIONS)
                   and sum(len(c.records()) for c in second) >= 30, 60,
                   "the new consumers consume the new messages\n" + "\n".join(c.describe() for c in second))
        first_offsets = {}
        for c in second:
            for p, o, _k in c.records():
                first_offsets[p] = min(o, first_offsets.get(p, o))
        # Resumed exactly where the group committed: nothing before it re-read, nothing skipped.
        assert first_offsets == {p: o for p, o in committed_before.items() if p in first_offsets}
        keys = [k for c in second for _p, _o, k in c.records()]
        assert sorted(keys) == sorted(f"after-{i}" for i in range(30))
    finally:
        procs.stop_all(second)



def _commit(client: KafkaWireClient, group: str, topic: str, offset: int, version: int = 8) -> int:
    topic_type = m.OffsetCommitRequest.OffsetCommitRequestTopic
    request = m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
        topics=[topic_type(name=topic, partitions=[topic_type.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])])
    return client.request(request, version).topics[0].partitions[0].error_code


@pytest.fixture
def faulty_server(tmp_path):
    """A server whose next `__consumer_offsets` write fails whenever the test asks (the admin endpoint's
    /coordinator/fail-offsets-writes)."""
    srv = start_group_server(tmp_path, {"kcoord.admin.listener": "http://127.0.0.1:0"}, name="faulty")
    yield srv
    srv.stop()


def test_failed_offsets_write_answers_an_error_then_the_next_commit_succeeds(faulty_server):
    server = faulty_server
    topic, group = "faulty", "faulty-group"
    server.create_topic(topic, 1)
    server.produce_keyed(topic, 10)
    with KafkaWireClient.connect(server.bootstrap) as client:
        assert _commit(client, group, topic, 3) == E.NONE
        assert server.fail_offsets_writes(1) == 1
        error = _commit(client, group, topic, 7)
        # A storage failure on __consumer_offsets is NOT_COORDINATOR to the client (Kafka's mapping),
        # which makes every client rediscover the coordinator and retry.
        assert error == E.NOT_COORDINATOR
        assert server.committed_offsets(group, topic, 1) == {0: 3}, "the failed commit left no trace"
        assert _commit(client, group, topic, 8) == E.NONE
        assert server.committed_offsets(group, topic, 1) == {0: 8}
