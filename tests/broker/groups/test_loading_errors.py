"""While a group's `__consumer_offsets` partition is loading, every group API answers
COORDINATOR_LOAD_IN_PROGRESS in the place its version puts errors. An in-process server (real
listener, real storage); the test marks one partition as loading, as a restart does."""
from __future__ import annotations

import asyncio

from broker.client import KafkaWireClient
from protocol import messages as m
from protocol.errors import ErrorCode as E
from tests.support.fixtures import kcoord_broker  # noqa: F401  (the in-process server fixture)

GROUP = "loading-group"
LOADING = E.COORDINATOR_LOAD_IN_PROGRESS


def _requests(bootstrap: str) -> dict[str, object]:
    topic = m.OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])
    fetch_group = m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=GROUP, topics=None)
    commit_topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
    out = {}
    with KafkaWireClient.connect(bootstrap) as c:
        out["fetch_v1"] = c.request(m.OffsetFetchRequest(group_id=GROUP, topics=[topic]), 1)
        out["fetch_v7"] = c.request(m.OffsetFetchRequest(group_id=GROUP, topics=[topic]), 7)
        out["fetch_v8"] = c.request(m.OffsetFetchRequest(groups=[fetch_group]), 8)
        out["commit"] = c.request(m.OffsetCommitRequest(group_id=GROUP, topics=[commit_topic(
            name="__consumer_offsets", partitions=[commit_topic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1)])]), 8)
        out["join_v5"] = c.request(m.JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            protocol_type="consumer", protocols=[]), 5)
        out["join_v9"] = c.request(m.JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            protocol_type="consumer", protocols=[]), 9)
        out["heartbeat"] = c.request(m.HeartbeatRequest(group_id=GROUP, member_id="x"), 4)
        out["leave_v1"] = c.request(m.LeaveGroupRequest(group_id=GROUP, member_id="x"), 1)
        out["describe"] = c.request(m.DescribeGroupsRequest(groups=[GROUP]), 5)
        out["list"] = c.request(m.ListGroupsRequest(), 4)
        out["find"] = c.request(m.FindCoordinatorRequest(key=GROUP, key_type=0), 3)
    return out


async def test_group_apis_while_the_partition_loads(kcoord_broker):  # noqa: F811
    runtime = kcoord_broker.groups
    await asyncio.wait_for(runtime.loaded_event.wait(), 30)
    runtime.coordinator.begin_load(runtime.partition_for(GROUP))
    port = kcoord_broker.listeners[0].port
    r = await asyncio.to_thread(_requests, f"127.0.0.1:{port}")

    assert [(p.partition_index, p.committed_offset, p.error_code)
            for t in r["fetch_v1"].topics for p in t.partitions] == [(0, -1, LOADING), (1, -1, LOADING)]
    assert (r["fetch_v7"].error_code, r["fetch_v7"].topics) == (LOADING, [])  # v2-v7: top level only
    assert [(g.group_id, g.error_code, g.topics) for g in r["fetch_v8"].groups] == [(GROUP, LOADING, [])]
    assert r["commit"].topics[0].partitions[0].error_code == LOADING
    assert (r["join_v5"].error_code, r["join_v5"].protocol_name) == (LOADING, "")
    assert (r["join_v9"].error_code, r["join_v9"].protocol_name) == (LOADING, None)
    assert r["heartbeat"].error_code == LOADING
    assert r["leave_v1"].error_code == LOADING
    assert r["describe"].groups[0].error_code == LOADING
    assert r["list"].error_code == LOADING
    assert r["find"].error_code == E.NONE  # still this node: clients retry the group request here
